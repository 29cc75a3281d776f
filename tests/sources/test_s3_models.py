"""Checkpoints on S3 (moto in server mode, a real S3-compatible server):
the node cache, a download killed midway, bad sources, a two-node cluster and
a sweep over three s3:// checkpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from local_cluster import free_port, stop_cluster  # tests/support

from auditkit_ray.cli import main
from auditkit_ray.sources import s3model

pytestmark = pytest.mark.usefixtures("library_warnings_on_stderr")

pytest.importorskip("boto3", reason="S3 tests need the 's3' extra (make test installs it)")
BIN = Path(sys.executable).parent
RAY = str(BIN / "ray")


@pytest.fixture(autouse=True)
def s3_credentials(monkeypatch):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # moto's S3 accepts any
        monkeypatch.setenv(k, os.environ.get(k) or "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def _client(s3_server):
    import boto3

    return boto3.client("s3", endpoint_url=s3_server["url"], region_name="us-east-1")


def upload(s3_server, bucket: str, prefix: str, model_dir: Path) -> str:
    c = _client(s3_server)
    for f in sorted(model_dir.iterdir()):
        if f.is_file():
            c.upload_file(str(f), bucket, f"{prefix}/{f.name}")
    return f"s3://{bucket}/{prefix}/"


def _downloads(cache: Path) -> list[dict]:
    record = cache / s3model.RECORD
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def _files(d: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in d.iterdir() if f.is_file() and not f.name.startswith(".")}


def _run_file(tmp_path, name: str, spec) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True)))
    return p


KILL_AFTER_ONE = """
import os, signal, sys
from auditkit_ray.sources import s3model
real = s3model._download
count = [0]
def once_then_die(*a, **kw):
    if count[0] == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # killed midway: one object written, the rest never
    count[0] += 1
    return real(*a, **kw)
s3model._download = once_then_die
s3model.fetch(sys.argv[1], None, sys.argv[2])
"""


def test_s3_download_killed_midway_is_never_loaded_and_the_next_fetch_completes(
        s3_server, s3_bucket, tiny_model, tmp_path, monkeypatch):
    uri = upload(s3_server, s3_bucket, "ckpt/tiny", tiny_model)
    cache = tmp_path / "cache"
    monkeypatch.setenv(s3model.MODEL_CACHE_ENV, str(cache))
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_ONE, uri, s3_server["url"]], env=dict(os.environ))
    assert killed.returncode == -signal.SIGKILL
    cid = s3model.resolve(uri, s3_server["url"])
    assert list(cache.glob(f".partial-{cid}-*")) and not (cache / cid).exists() and not _downloads(cache)
    # two processes of one node (as two actors) fetch at once: one downloads, the other waits for it
    fetch = "import sys; from auditkit_ray.sources import s3model; s3model.fetch(sys.argv[1], None, sys.argv[2])"
    both = [subprocess.Popen([sys.executable, "-c", fetch, uri, s3_server["url"]]) for _ in range(2)]
    assert [p.wait(timeout=120) for p in both] == [0, 0]
    got = s3model.fetch(uri, cid, s3_server["url"])
    assert got == cache / cid and _files(got) == _files(tiny_model)
    assert not list(cache.glob(".partial-*")), "the killed download's partial copy is removed, never used"
    assert len(_downloads(cache)) == 1  # once per node
    # the same bytes under another URI are the same content, so the same cached copy
    assert s3model.resolve(upload(s3_server, s3_bucket, "elsewhere", tiny_model), s3_server["url"]) == cid


def test_bad_s3_sources_exit_2_naming_the_source(s3_server, s3_bucket, make_spec, tiny_model, tmp_path, capsys,
                                                 monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "never-printed-secret")
    c = _client(s3_server)
    c.put_object(Bucket=s3_bucket, Key="weights-only/model.safetensors", Body=b"x")
    cases = {
        "s3://ak-no-such-bucket/m/": "no such bucket",
        f"s3://{s3_bucket}/no-such-prefix/": "no objects under this prefix",
        f"s3://{s3_bucket}/weights-only/": "no config.json",
    }
    for uri, why in cases.items():
        spec = make_spec(model={"type": "hf", "path": uri, "endpoint_url": s3_server["url"]})
        assert main(["run", str(_run_file(tmp_path, "bad", spec)), "--quiet"]) == 2, uri
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and uri in err[0] and why in err[0] and "never-printed" not in err[0], err


def test_access_denied_is_one_line_naming_the_source_without_credentials():
    """moto accepts any credentials, so S3's AccessDenied reply is built here as botocore builds it."""
    from botocore.exceptions import ClientError

    exc = ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListObjectsV2")
    msg = s3model._explain("s3://b/p/", exc, "model.path")
    assert msg.startswith("model.path 's3://b/p/': access denied") and "AWS_ACCESS_KEY_ID" in msg


@pytest.fixture
def two_nodes(s3_server, tmp_path):
    """Two `ray start` nodes (one logical GPU each, so one generation actor each), each with its own
    model cache directory; the S3 endpoint from AWS_ENDPOINT_URL, as boto3 reads it."""
    temp_dir = tempfile.mkdtemp(prefix="akm-", dir="/tmp")  # short: Ray's socket paths have a length limit
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token", "AWS_ENDPOINT_URL": s3_server["url"],
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    caches = [tmp_path / "node-a-cache", tmp_path / "node-b-cache"]
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--num-gpus", "1", "--disable-usage-stats"]
    try:
        for i, cache in enumerate(caches):
            where = (["--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", temp_dir] if i == 0
                     else ["--address", f"127.0.0.1:{port}"])
            for _attempt in range(3):  # a loaded machine can outlast `ray start`'s own 30 s wait for the raylet
                out = subprocess.run([RAY, "start", *where, *common], capture_output=True, text=True, timeout=180,
                                     env={**env, s3model.MODEL_CACHE_ENV: str(cache)})
                if out.returncode == 0 or "timed out during startup" not in out.stderr + out.stdout:
                    break
                if i == 0:
                    stop_cluster(temp_dir)
            assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        yield {"address": f"127.0.0.1:{port}", "env": env, "caches": caches}
    finally:
        stop_cluster(temp_dir)


def _cli_run(cluster, cfg: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "auditkit_ray.cli", "run", str(cfg), "--address", cluster["address"],
                          "--quiet", "--json"], capture_output=True, text=True, timeout=600,
                         env={**cluster["env"], "RAY_ADDRESS": ""})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _texts(result: dict) -> list[tuple]:
    import pyarrow.dataset as pads

    t = pads.dataset(result["samples_path"]).to_table().sort_by([("sample_id", "ascending"), ("repeat", "ascending")])
    return list(zip(t.column("sample_id").to_pylist(), t.column("text").to_pylist(), t.column("scores").to_pylist()))


def test_s3_checkpoint_on_two_nodes_equals_the_local_run_and_each_node_downloads_once(
        two_nodes, s3_server, s3_bucket, make_spec, arith, tiny_model, tmp_path):
    uri = upload(s3_server, s3_bucket, "tiny", tiny_model)
    cid = s3model.resolve(uri, s3_server["url"])
    a, b = two_nodes["caches"]
    a.mkdir()  # node A was killed mid-download before: a partial copy, and a directory without its manifest
    (a / f".partial-{cid}-4242").mkdir()
    (a / f".partial-{cid}-4242" / "config.json").write_text("{broken")
    (a / cid).mkdir()
    (a / cid / "config.json").write_text("{broken")
    hf = {"type": "hf", "batch_size": 4, "device": "cpu", "num_gpus": 1}
    over = dict(generation={"max_new_tokens": 6}, dataset={"limit": 16},
                execution={"shard_size": 4, "generation_actors": 2, "scoring_actors": 1})
    local = _cli_run(two_nodes, _run_file(tmp_path, "local", make_spec("s-local", model={**hf, "path": str(tiny_model)},
                                                                       **over)))
    _client(s3_server).upload_file(str(arith), s3_bucket, "data/arith.jsonl")  # the local run's dataset
    remote_over = {**over, "dataset": {**over["dataset"], "path": f"s3://{s3_bucket}/data/arith.jsonl",
                                       "endpoint_url": s3_server["url"]}}
    remote = _cli_run(two_nodes, _run_file(tmp_path, "s3", make_spec("s-s3", model={**hf, "path": uri},
                                                                     **remote_over)))
    assert _texts(remote) == _texts(local) and len(_texts(remote)) == 16  # model and data both from S3
    assert remote["dataset_fingerprint"] == local["dataset_fingerprint"]
    assert remote["backend"]["checkpoint_hash"] == cid and "path" not in remote["backend"]["settings"]

    for cache in (a, b):
        assert [d["content_id"] for d in _downloads(cache)] == [cid], f"{cache.name}: one download"
        assert _files(cache / cid) == _files(tiny_model)
    assert not list(a.glob(".partial-*"))


def test_sweep_over_three_s3_checkpoints_and_two_quantizations_makes_one_leaderboard(
        ray_cluster, s3_server, s3_bucket, tiny_grid, make_grid_sweep, tmp_path, capsys):
    from auditkit_ray.api import sweep

    data = Path(__file__).resolve().parents[2] / "examples" / "data" / "arith.jsonl"
    doc = make_grid_sweep(tiny_grid, data, tmp_path / "store", name="s3grid")
    doc["base"]["model"]["endpoint_url"] = s3_server["url"]
    doc["base"]["dataset"]["limit"] = 8
    doc["grid"]["model.path"] = [upload(s3_server, s3_bucket, name, p) for name, p in tiny_grid.items()]
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    assert main(["sweep", str(cfg), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "6 runs" in out and "exact_match" in out, out
    result = sweep(str(cfg))  # everything stored: read back, one result per cell
    hashes = {r.backend["checkpoint_hash"] for r in result.runs}
    assert len(result.runs) == 6 and len(hashes) == 3
