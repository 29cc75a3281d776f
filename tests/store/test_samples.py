"""The store's one reader of stored runs (``store.samples``): a run's per-sample
table from a RunResult, a run directory or its result.json, local or on S3
(moto in server mode), always in sample order; and the reason, not a crash,
when it cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from auditkit_ray import api  # noqa: E402
from auditkit_ray.core.result import MetricSummary, RunResult  # noqa: E402
from auditkit_ray.errors import ConfigError  # noqa: E402
from auditkit_ray.store.layout import RunLayout  # noqa: E402
from auditkit_ray.store.samples import read_samples_table, try_read_samples_table  # noqa: E402

FP = "a" * 64
LAYOUT = RunLayout(FP, "b" * 64, 3)


def _score(sid: str, rep: int) -> str:
    value = float((int(sid[1:]) + rep) % 2)
    return json.dumps([{"name": "m", "value": value, "status": "scored", "metadata": {}}])


def _shard(i: int, keys: list[tuple[str, int]]) -> bytes:
    n = len(keys)
    table = pa.table({
        "shard": pa.array([i] * n, pa.int32()), "index": pa.array(range(n), pa.int32()),
        "sample_id": [k[0] for k in keys], "repeat": pa.array([k[1] for k in keys], pa.int32()),
        "text": [f"out {k[0]}#{k[1]}" for k in keys], "scores": [_score(*k) for k in keys],
    })
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


#: shard -> its rows, written below in reverse so that listing order is not sample order
SHARDS = {0: [("s0", 0), ("s0", 1), ("s1", 0)], 1: [("s1", 1), ("s2", 0), ("s2", 1)], 2: [("s3", 0)]}
ORDER = [k for i in sorted(SHARDS) for k in SHARDS[i]]


def _result(samples_path: str, store: dict | None = None) -> RunResult:
    values = [json.loads(_score(*k))[0]["value"] for k in ORDER]
    summary = MetricSummary(name="m", direction="maximize", mean=sum(values) / len(values), n=len(values),
                            total=len(values), identity={"name": "m", "class": "tests:m"})
    return RunResult(run_id="r" * 16, name="stored", fingerprint=FP, samples_path=samples_path,
                     config={"store": store or {}}, metrics={"m": summary})


def _write_run(store, samples_path: str, store_cfg: dict | None = None) -> RunResult:
    for i in sorted(SHARDS, reverse=True):
        store.write_atomic(LAYOUT.shard(i), _shard(i, SHARDS[i]))
    result = _result(samples_path, store_cfg)
    store.replace(LAYOUT.result, result.to_json().encode())
    return result


@pytest.fixture
def local_run(tmp_path):
    store = api.open_store(str(tmp_path / "store"))
    return _write_run(store, store.uri(LAYOUT.shards_dir)), Path(store.uri(LAYOUT.run_dir))


def _keys(table) -> list[tuple[str, int]]:
    return list(zip(table.column("sample_id").to_pylist(), table.column("repeat").to_pylist()))


def test_a_local_run_reads_the_same_from_its_result_its_directory_and_its_result_json(local_run):
    result, run_dir = local_run
    tables = [read_samples_table(result), read_samples_table(run_dir), read_samples_table(run_dir / "result.json"),
              api.samples_table(str(run_dir))]
    for t in tables:
        assert _keys(t) == ORDER  # sample order, not the order the shards were written in
        assert t.column("text").to_pylist() == [f"out {s}#{r}" for s, r in ORDER]


def test_columns_keep_their_order_required_ones_must_be_there(local_run):
    result, _ = local_run
    t = read_samples_table(result, ["scores", "sample_id", "no_such_column"])
    assert t.schema.names == ["scores", "sample_id"] and t.column("sample_id").to_pylist() == [s for s, _ in ORDER]
    with pytest.raises(ConfigError, match="lacks column"):
        read_samples_table(result, ["sample_id"], required=["cluster"])


def test_a_relative_samples_path_is_found_next_to_the_result_json(local_run):
    result, run_dir = local_run
    moved = result.model_copy(update={"samples_path": "s3"})  # written relative to the run directory
    (run_dir / "result.json").write_text(moved.to_json())
    assert _keys(read_samples_table(run_dir)) == ORDER
    assert _keys(read_samples_table(moved, base_dir=run_dir)) == ORDER


def test_what_cannot_be_read_is_an_error_or_a_reason(tmp_path):
    none = _result("")
    with pytest.raises(ConfigError, match="no per-sample table"):
        read_samples_table(none)
    assert "no per-sample table" in try_read_samples_table(none)[1]
    gone = _result(str(tmp_path / "gone"))
    table, why = try_read_samples_table(gone)
    assert table is None and "does not exist" in why
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "shard-00000.parquet").write_bytes(b"not parquet")
    table, why = try_read_samples_table(_result(str(tmp_path / "bad")))
    assert table is None and why.startswith("cannot read per-sample table")


def test_an_s3_run_reads_through_the_store_with_the_endpoint_it_was_stored_with(s3_server, s3_bucket, monkeypatch):
    s3 = s3_server["url"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    root = f"s3://{s3_bucket}/evals"
    store = api.open_store(root, endpoint_url=s3)
    result = _write_run(store, store.uri(LAYOUT.shards_dir), {"path": root, "endpoint_url": s3})
    assert _keys(read_samples_table(result)) == ORDER  # the endpoint comes from the run's own store config
    # a bare s3:// path knows no endpoint but the environment's
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3)
    run_uri = store.uri(LAYOUT.run_dir)
    for where in (run_uri, run_uri + "/", run_uri + "/result.json"):
        assert _keys(api.samples_table(where)) == ORDER
    assert api.load_run(run_uri).fingerprint == FP
    assert api.compare(run_uri, run_uri + "/result.json", n_resamples=20).metrics["m"].paired.n_paired == len(ORDER)
    table, why = try_read_samples_table(_result(f"{root}/runs/{'c' * 64}/s3", {"endpoint_url": s3}))
    assert table is None and "does not exist" in why
