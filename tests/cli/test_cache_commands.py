"""``auditkit-ray cache stats|clear`` (the console script, in a subprocess, as a user runs it) over result stores
that real runs filled: local, and S3 on a real moto server; the API response cache of the api backend
against the OpenAI-compatible test server on 127.0.0.1."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")

CLI = str(Path(sys.executable).with_name("auditkit-ray"))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, env=os.environ.copy())


def cache_json(*args: str) -> dict:
    p = cli("cache", *args, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_cache_stats_after_a_run_and_a_rerun_show_the_rerun_hits_and_clear_by_fingerprint_removes_only_its_entries(
        make_spec, tmp_path):
    pytest.importorskip("aiohttp", reason="the api backend needs the 'api' extra (aiohttp)")
    from auditkit_ray.api import evaluate
    from auditkit_ray.testing import OpenAIServer, ScriptedPolicy

    responses = str(tmp_path / "api-cache.sqlite")
    with OpenAIServer(ScriptedPolicy(lambda body: "4")) as server:
        model = {"type": "api", "base_url": server.base_url, "model": "scripted", "cache_path": responses}
        base = {"model": model, "dataset": {"limit": 8}}
        first = evaluate(make_spec("a", **base))
        rerun = evaluate(make_spec("a", **base, metrics=["exact_match"]))  # new scoring, same outputs
        other_store = evaluate(make_spec("b", **base))  # nothing stored there: answers from the API cache
        changed = evaluate(make_spec("a", **base, generation={"max_new_tokens": 16}))
        assert server.requests == 16
    assert rerun.generation_fingerprint == first.generation_fingerprint != changed.generation_fingerprint

    st = cache_json("stats", "--store", str(tmp_path / "a"), "--response-cache", responses)
    runs = {r["fingerprint"]: r for r in st["recent_runs"]}
    assert runs[rerun.fingerprint]["generation_hits"] == 8 and runs[rerun.fingerprint]["generation_hit_rate"] == 1.0
    assert runs[first.fingerprint]["generation_hits"] == 0 and runs[changed.fingerprint]["generation_hits"] == 0
    assert st["generations"]["entries"] == 2 and st["generations"]["hit_rate"] == pytest.approx(8 / 24)
    entry = {e["fingerprint"]: e for e in st["generations"]["list"]}[first.generation_fingerprint]
    assert entry["bytes"] > 0 and entry["age_s"] >= 0 and set(entry["runs"]) == {first.fingerprint, rerun.fingerprint}
    assert st["responses"]["entries"] == 16 and st["responses"]["exists"]
    st_b = cache_json("stats", "--store", str(tmp_path / "b"), "--response-cache", responses)
    assert st_b["recent_runs"][0]["fingerprint"] == other_store.fingerprint
    assert st_b["recent_runs"][0]["response_hits"] == 8 and st_b["responses"]["hit_rate"] == 1.0
    text = cli("cache", "stats", "--store", str(tmp_path / "a"), "--response-cache", responses).stdout
    assert f"{rerun.fingerprint[:12]}" in text and "generations 8/8 from cache (100%)" in text

    # the rerun's run fingerprint names the entry it read: that entry goes, the other run's stays, results stay
    out = cache_json("clear", "--store", str(tmp_path / "a"), "--fingerprint", rerun.fingerprint[:12],
                     "--response-cache", responses)
    assert out["generations"] == [first.generation_fingerprint] and out["files"] == 1 and out["responses"] == 0
    left = cache_json("stats", "--store", str(tmp_path / "a"), "--response-cache", responses)
    assert [e["fingerprint"] for e in left["generations"]["list"]] == [changed.generation_fingerprint]
    assert not (tmp_path / "a" / "generations" / first.generation_fingerprint).exists()
    assert (tmp_path / "a" / "runs" / rerun.fingerprint / "result.json").is_file()
    assert left["responses"]["entries"] == 16

    assert cache_json("clear", "--only", "responses", "--older-than", "1h", "--response-cache",
                      responses)["responses"] == 0
    assert cache_json("clear", "--only", "responses", "--all", "--response-cache", responses)["responses"] == 16


def test_cache_clear_by_fingerprint_on_s3_removes_only_that_runs_objects(make_spec, s3_server, s3_bucket):
    import boto3

    from auditkit_ray.api import evaluate

    store = {"path": f"s3://{s3_bucket}/results", "endpoint_url": s3_server["url"]}
    sim = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0}
    a = evaluate(make_spec(model={**sim, "output": "target"}, store=store, dataset={"limit": 16}))
    b = evaluate(make_spec(model={**sim, "output": "prompt"}, store=store, dataset={"limit": 16}))
    where = ["--store", store["path"], "--endpoint-url", s3_server["url"]]
    st = cache_json("stats", *where)
    assert {e["fingerprint"]: e["files"] for e in st["generations"]["list"]} == {
        a.generation_fingerprint: 2, b.generation_fingerprint: 2}

    out = cache_json("clear", *where, "--fingerprint", b.generation_fingerprint[:10], "--only", "generations")
    assert out["generations"] == [b.generation_fingerprint] and out["files"] == 2
    s3 = boto3.client("s3", endpoint_url=s3_server["url"], region_name="us-east-1")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket, Prefix="results/")["Contents"]]
    gens = {k.split("/")[2] for k in keys if k.startswith("results/generations/")}
    assert gens == {a.generation_fingerprint}
    assert f"results/runs/{b.fingerprint}/result.json" in keys  # results are not cache

    bad = cli("cache", "clear", *where, "--fingerprint", "ffff0000")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no generation entry" in bad.stderr
