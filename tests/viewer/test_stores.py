"""The viewer over an S3 store (a real moto server) and over a store being written: runs that finish after the
viewer started appear on the next request (no stale cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)


def test_runs_written_after_start_appear_and_a_running_one_is_listed(tmp_path, kit):
    store = tmp_path / "store"
    first = kit.write_run(store, "live/first", n=20, right=lambda i: True)
    v = kit.Viewer(["--store", str(store), "--port", "0"], tmp_path / "view.log")
    try:
        runs = json.loads(kit.http(v.base + "/api/runs")[1])["runs"]
        assert [r["fingerprint"] for r in runs] == [first]
        (store / "runs" / ("e" * 64)).mkdir(parents=True)  # a run of a sweep in progress: no result.json yet
        second = kit.write_run(store, "live/second", n=20, right=lambda i: i % 2 == 0,
                               created_at="2026-04-01T00:00:00+00:00")
        runs = {r["fingerprint"]: r for r in json.loads(kit.http(v.base + "/api/runs")[1])["runs"]}
        assert set(runs) == {first, second, "e" * 64}
        assert runs["e" * 64]["state"] == "running" and runs[second]["metrics"]["exact_match"]["mean"] == 0.5
        status, body = kit.http(v.base + f"/api/run/{second}/samples?limit=5")
        assert status == 200 and json.loads(body)["total"] == 20
    finally:
        v.stop()


@pytest.fixture
def s3(s3_server, s3_bucket):
    """(endpoint, client, bucket): the shared moto server and this test's own bucket on it."""
    import boto3

    client = boto3.client("s3", endpoint_url=s3_server["url"], region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    return s3_server["url"], client, s3_bucket


def upload_run(client, bucket: str, local_store: Path, fp: str, prefix: str, endpoint: str) -> None:
    """A locally written run copied into ``s3://<bucket>/<prefix>/``, its table pointed at its S3 copy."""
    run_dir = local_store / "runs" / fp
    result = json.loads((run_dir / "result.json").read_text())
    shards = Path(result["samples_path"])
    result["samples_path"] = f"s3://{bucket}/{prefix}/runs/{fp}/{shards.name}"
    result["config"]["store"] = {"path": f"s3://{bucket}/{prefix}", "endpoint_url": endpoint}
    for f in sorted(shards.iterdir()):
        client.put_object(Bucket=bucket, Key=f"{prefix}/runs/{fp}/{shards.name}/{f.name}", Body=f.read_bytes())
    client.put_object(Bucket=bucket, Key=f"{prefix}/runs/{fp}/result.json", Body=json.dumps(result).encode())


def test_an_s3_store_is_browsed_and_diffed_like_a_local_one(s3, tmp_path, kit, page):
    endpoint, client, bucket = s3
    local = tmp_path / "local"
    a = kit.write_run(local, "s3/a", n=40, right=lambda i: i % 4 != 0, config=kit.config_of("s3/a", "m-a"))
    b = kit.write_run(local, "s3/b", n=40, right=lambda i: i % 5 != 0, created_at="2026-05-01T00:00:00+00:00",
                      config=kit.config_of("s3/b", "m-b", api_key=kit.SECRET))
    upload_run(client, bucket, local, a, "evals", endpoint)
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    v = kit.Viewer(["--store", f"s3://{bucket}/evals", "--endpoint-url", endpoint, "--port", "0"],
                   tmp_path / "view.log", env=env)
    try:
        page.open(v.url)
        assert page.locator("a.run-link").all_text_contents() == ["s3/a"]
        upload_run(client, bucket, local, b, "evals", endpoint)  # a run finishing while the viewer runs
        page.open(v.base + "/#/runs?since=2026")
        assert sorted(page.locator("a.run-link").all_text_contents()) == ["s3/a", "s3/b"]
        page.open(v.base + f"/#/run/{b}?metric=exact_match&max=0")
        assert "8 matching of 40" in page.locator("#page-info").text_content()
        page.open(v.base + f"/#/diff?a={a}&b={b}")
        assert page.locator('tr[data-metric="exact_match"] td').nth(3).text_content() == "0.8000"
        page.shot("s3-diff")
        assert not [u for u, _, body in page.bodies if kit.SECRET in body]
    finally:
        v.stop()


def test_the_runs_of_an_experimentdb_are_listed_and_opened(tmp_path, kit):
    from auditkit_ray import api

    store = tmp_path / "store"
    fp = kit.write_run(store, "db/only", n=10, right=lambda i: i < 7)
    db = tmp_path / "runs.sqlite"
    assert api.sync_runs(str(store), db=str(db)) == 1
    v = kit.Viewer(["--db", str(db), "--port", "0"], tmp_path / "view.log")
    try:
        runs = json.loads(kit.http(v.base + "/api/runs?name=db/")[1])["runs"]
        assert [r["fingerprint"] for r in runs] == [fp]
        run = json.loads(kit.http(v.base + f"/api/run/{fp[:10]}")[1])
        assert run["metrics"]["exact_match"]["mean"] == 0.7
    finally:
        v.stop()
