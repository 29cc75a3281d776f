"""Datasets where cluster users keep them: an S3-compatible bucket (moto in
server mode) as JSON Lines, a Parquet file and a Parquet directory; a local
dataset repository read through ``datasets.load_dataset``'s builder (no Hub is
reachable here); and the bad sources, each one line and exit 2 from the CLI."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from auditkit_ray.api import evaluate
from auditkit_ray.cli import main
from auditkit_ray.pipeline.identity import dataset_fingerprint, dataset_identity, hash_path

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")

REPO = Path(__file__).resolve().parents[2]
WORD_PROBLEMS = REPO / "examples" / "data" / "word_problems_test.jsonl"
N = 24  # a small slice: three shards of eight
SIM = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "prompt"}
METRICS = ["exact_match", "contains"]


@pytest.fixture(scope="module")
def wp_local(tmp_path_factory):
    """The slice on disk: JSON Lines, one Parquet file, a directory of two Parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("wp")
    lines = WORD_PROBLEMS.read_text(encoding="utf-8").splitlines(keepends=True)[:N]
    (root / "wp.jsonl").write_text("".join(lines), encoding="utf-8")
    table = pa.Table.from_pylist([json.loads(line) for line in lines])
    pq.write_table(table, root / "wp.parquet")
    (root / "wp_dir").mkdir()
    pq.write_table(table.slice(0, 10), root / "wp_dir" / "part-0.parquet")
    pq.write_table(table.slice(10), root / "wp_dir" / "part-1.parquet")
    return root


@pytest.fixture(scope="module")
def wp_bucket(s3_server, wp_local):
    """The same files in a bucket, under another prefix than their local directory."""
    import uuid

    import boto3

    c = boto3.client("s3", endpoint_url=s3_server["url"], region_name="us-east-1")
    name = f"ak-data-{uuid.uuid4().hex[:8]}"
    c.create_bucket(Bucket=name)
    for f in sorted(p for p in wp_local.rglob("*") if p.is_file()):
        c.upload_file(str(f), name, f"some/prefix/{f.relative_to(wp_local).as_posix()}")
    return name


def _spec(store: Path, dataset: dict, **over):
    from auditkit_ray.config import run_spec_from_dict

    return run_spec_from_dict({
        "name": "wp", "model": SIM, "metrics": METRICS, "prompt": {"template": "{{ question }} Answer:"},
        "dataset": {"input_field": "question", "target_field": "answer", **dataset},
        "execution": {"shard_size": 8}, "store": {"path": str(store)}, **over})


@pytest.fixture(scope="module")
def local_run(ray_cluster, wp_local):
    """The run over the slice from local disk that every other source must equal."""
    result = evaluate(_spec(wp_local / "store-local", {"path": str(wp_local / "wp.jsonl")}))
    assert result.perf.samples == N
    return result


def test_s3_dataset_as_jsonl_parquet_and_parquet_directory_equals_the_local_run(
    local_run, tmp_path, wp_local, wp_bucket, s3_server, rows, numbers
):
    local = local_run
    for name, extra in (("wp.jsonl", {"execution": {"shard_size": 8, "plan_tasks": 2}}),  # planned in Ray tasks
                        ("wp.parquet", {}), ("wp_dir", {})):
        s3 = {"path": f"s3://{wp_bucket}/some/prefix/{name}", "endpoint_url": s3_server["url"]}
        spec = _spec(tmp_path / name, s3, **extra)
        got = evaluate(spec)
        assert rows(got) == rows(local), name
        assert numbers(got) == numbers(local), name
        # the identity is the content: the same bytes on disk and in the bucket, one dataset fingerprint
        on_disk = _spec(tmp_path, {"path": str(wp_local / name)})
        assert got.dataset_fingerprint == dataset_fingerprint(on_disk), name
        assert dataset_identity(spec)["content_hash"] == hash_path(wp_local / name), name


def test_s3_endpoint_from_the_aws_environment(tmp_path, wp_bucket, s3_server, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server["url"])  # pyarrow ignores it: the reader passes it on
    from auditkit_ray.data.readers import load_samples

    samples, _ = load_samples(_spec(tmp_path, {"path": f"s3://{wp_bucket}/some/prefix/wp.parquet"}).dataset)
    assert [s.id for s in samples] == [f"wp-{i:04d}" for i in range(N)]


@pytest.fixture(scope="module")
def dataset_repo(tmp_path_factory):
    """A local dataset repository, as a Hub dataset repository is laid out: data files per split."""
    root = tmp_path_factory.mktemp("repo") / "word-problems"
    (root / "data").mkdir(parents=True)
    lines = WORD_PROBLEMS.read_text(encoding="utf-8").splitlines(keepends=True)
    (root / "data" / "test.jsonl").write_text("".join(lines[:N]), encoding="utf-8")
    (root / "data" / "train.jsonl").write_text("".join(lines[N:N + 10]), encoding="utf-8")
    (root / "README.md").write_text("# word problems\n", encoding="utf-8")
    return root


def test_local_dataset_repository_runs_with_its_revision_in_the_fingerprint(
    local_run, dataset_repo, tmp_path, monkeypatch, rows, numbers
):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    spec = _spec(tmp_path / "store", {"hub": str(dataset_repo), "split": "test"})
    got = evaluate(spec)
    local = local_run
    assert rows(got) == rows(local) and numbers(got) == numbers(local)
    ident = dataset_identity(spec)
    assert ident["revision"] == hash_path(dataset_repo) == ident["content_hash"]
    assert got.dataset_fingerprint == dataset_fingerprint(spec)
    # new bytes in the repository: a new revision, a new fingerprint
    with open(dataset_repo / "data" / "test.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "wp-extra", "question": "What is 1 plus 1?", "answer": "2"}) + "\n")
    changed = _spec(tmp_path / "store", {"hub": str(dataset_repo), "split": "test"})
    assert dataset_identity(changed)["revision"] != ident["revision"]
    assert dataset_fingerprint(changed) != got.dataset_fingerprint


SECRET = "s3cr3t-NEVER-SHOWN"


@pytest.fixture(scope="module")
def denied_bucket(s3_server):
    import uuid

    import boto3

    c = boto3.client("s3", endpoint_url=s3_server["url"], region_name="us-east-1")
    name = f"ak-deny-{uuid.uuid4().hex[:8]}"
    c.create_bucket(Bucket=name)
    c.put_object(Bucket=name, Key="d.jsonl", Body=b'{"id": "a", "question": "q", "answer": "a"}\n')
    arn = f"arn:aws:s3:::{name}"
    c.put_bucket_policy(Bucket=name, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": [arn, f"{arn}/*"]}]}))
    return name


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and SECRET not in err
    return lines[0]


@pytest.mark.parametrize("case, expect", [
    ("no-bucket", "no such bucket"),
    ("no-key", "no such object or prefix"),
    ("denied", "access denied"),
    ("path-and-hub", "dataset: "),
])
def test_bad_s3_sources_exit_2_with_one_line(case, expect, tmp_path, s3_server, wp_bucket, denied_bucket,
                                              capsys, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)  # moto takes any credentials; none may be shown
    url = s3_server["url"]
    path = {"no-bucket": "s3://ak-no-such-bucket/d.jsonl", "no-key": f"s3://{wp_bucket}/some/prefix/nope.jsonl",
            "denied": f"s3://{denied_bucket}/d.jsonl", "path-and-hub": f"s3://{wp_bucket}/x.jsonl"}[case]
    data = _spec(tmp_path / "store", {"path": path, "endpoint_url": url}).model_dump(mode="json", by_alias=True)
    if case == "path-and-hub":
        data["dataset"]["hub"] = "org/name"
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(data))
    assert main(["run", str(cfg), "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert expect in line and (case == "path-and-hub" or path.rstrip("/") in line), line
    if case == "path-and-hub":
        assert "path" in line and "hub" in line, line


@pytest.fixture(scope="module")
def hub_standin():
    """The Hub stand-in (tests/support/hub_standin.py) in a process of its own."""
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "hub_standin.py")],
                            stdout=subprocess.PIPE, text=True)
    try:
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("case, expect", [
    ("offline-no-cache", "dataset.hub 'org/no-such-dataset': not in the local datasets cache and HF_HUB_OFFLINE"),
    ("no-such-revision", "dataset.revision 'v9-missing': no such revision of Hub dataset 'org/no-such-dataset'"),
])
def test_bad_hub_sources_exit_2_with_one_line(case, expect, tmp_path, hub_standin):
    dataset = {"hub": "org/no-such-dataset", "input_field": "question"}
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": SECRET}
    if case == "offline-no-cache":
        env["HF_HUB_OFFLINE"] = "1"
    else:
        dataset["revision"] = "v9-missing"
        # a loaded CI machine can answer slower than the Hub client's default 10 s wait
        env.update(HF_HUB_OFFLINE="0", HF_ENDPOINT=hub_standin, HF_HUB_ETAG_TIMEOUT="120",
                   HF_HUB_DOWNLOAD_TIMEOUT="120", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        for var in ("HF_DATASETS_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                    "all_proxy"):
            env.pop(var, None)  # the stand-in is on loopback: a proxy of the machine's must not stand between
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({"model": SIM, "dataset": dataset, "store": {"path": str(tmp_path / "s")},
                                   "tracking": {"index": False}}))
    r = subprocess.run([sys.executable, "-m", "auditkit_ray.cli", "run", str(cfg), "--quiet"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert expect in _one_error_line(r.stderr)
