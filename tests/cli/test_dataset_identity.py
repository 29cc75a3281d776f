"""One dataset wherever its bytes sit (issue 45, docs/models-and-data.md): a local ``wp20.jsonl`` and the same
bytes as ``s3://.../data.jsonl`` on a real S3 server (moto) are one dataset: one run fingerprint, and their
runs compare. The real console script, in a subprocess."""

from __future__ import annotations

import json

import pytest
from console import console

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")

boto3 = pytest.importorskip("boto3", reason="S3 tests need the 's3' extra (make test installs it)")


def test_the_same_bytes_under_two_names_local_and_on_s3_are_one_dataset(tmp_path, s3_server, s3_bucket):
    s3 = s3_server["url"]
    data = b"".join(json.dumps({"id": f"q{i}", "q": f"What is {i} plus 1?", "a": str(i + 1)}).encode() + b"\n"
                    for i in range(6))
    (tmp_path / "wp20.jsonl").write_bytes(data)
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": s3}
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    client.put_object(Bucket=s3_bucket, Key="word-problems/data.jsonl", Body=data)

    def run_file(name, path):
        doc = {"name": "wp", "dataset": {"path": path, "input_field": "q", "target_field": "a"},
               "model": {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "constant": "3"},
               "metrics": ["exact_match"], "execution": {"shard_size": 3},
               "store": {"path": str(tmp_path / f"store-{name}")}, "tracking": {"index": False}}
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        return f"{name}.json"

    local, remote = run_file("local", "wp20.jsonl"), run_file("remote", f"s3://{s3_bucket}/word-problems/data.jsonl")
    fps = []
    for f in (local, remote):
        v = console("validate", f, cwd=tmp_path, env=env)
        assert v.returncode == 0, v.stderr
        fps.append(v.stdout.split("fingerprint ")[1].split()[0])
    assert fps[0] == fps[1], fps  # one run: the file's name and place are not its identity

    results = []
    for f in (local, remote):
        r = console("run", f, "--json", "--quiet", cwd=tmp_path, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        results.append(json.loads(r.stdout))
    assert results[0]["dataset_fingerprint"] == results[1]["dataset_fingerprint"]
    dirs = [str(next((tmp_path / f"store-{n}").glob("runs/*/result.json"))) for n in ("local", "remote")]
    c = console("compare", *dirs, "--json", "--resamples", "50", cwd=tmp_path, env=env)
    assert c.returncode == 0, c.stdout + c.stderr
    doc = json.loads(c.stdout)
    assert doc["dataset_comparable"] and doc["metrics"]["exact_match"]["comparable"], doc["dataset_reasons"]


def test_an_s3_checkpoint_says_what_it_is_and_where_it_is_downloaded(tmp_path, s3_server, s3_bucket, tiny_model):
    s3 = s3_server["url"]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": s3, "AUDITKIT_RAY_MODEL_CACHE": str(tmp_path / "model-cache")}
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    files = sorted(f for f in tiny_model.rglob("*") if f.is_file())
    for f in files:
        client.upload_file(str(f), s3_bucket, f"tiny/{f.relative_to(tiny_model)}")
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "q0", "q": "1+1", "a": "2"}) + "\n")
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "s3ckpt", "base": {
        "dataset": {"path": "d.jsonl", "input_field": "q", "target_field": "a"}, "metrics": ["exact_match"],
        "store": {"path": "store"}, "tracking": {"index": False}},
        "runs": [{"name": "tiny", "model": {"type": "hf", "path": f"s3://{s3_bucket}/tiny/"}}]}))
    r = console("sweep", "sweep.json", "--dry-run", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next((ln for ln in r.stderr.splitlines() if ln.startswith(f"model.path s3://{s3_bucket}/tiny/: ")), None)
    assert line is not None, r.stderr
    assert f"{len(files)} files, " in line and " MB (content " in line, line
    assert "each node downloads it once into its model cache (AUDITKIT_RAY_MODEL_CACHE, here " in line, line
