"""Watchdogs and fatal errors on a real local Ray, on generation actors started for the run and on resident
ones (kept loaded between runs: issue 50), which a fault must leave no worse off."""

import json
import time

import pytest

from auditkit_ray.api import evaluate, samples_table
from auditkit_ray.errors import RunError

pytestmark = pytest.mark.usefixtures("ray_cluster")


@pytest.fixture(params=["fresh", "resident"])
def engines(request):
    """The run's generation actors: started for it and stopped after it, or resident (every resident is evicted
    after the test)."""
    from resident_engines import residents

    with residents(request.param == "resident"):
        yield request.param


def test_hung_generation_fails_its_shard_fast_and_the_retry_completes_the_run(make_spec, tmp_path, rows, numbers,
                                                                              engines):
    marker = tmp_path / "hung-once"
    spec = make_spec(
        "hang",
        model={
            "type": "simulated",
            "fixed_cost_s": 0.0,
            "output": "prompt",
            "hang_ids": ["q010"],
            "hang_marker": str(marker),
        },
        execution={"shard_size": 8, "shard_timeout_s": 3},
    )
    t0 = time.perf_counter()
    res = evaluate(spec)
    took = time.perf_counter() - t0
    assert marker.exists(), "the batch with q010 should have hung once"
    assert took < 120, f"the watchdog should end the hang long before the backend's 3600 s sleep (took {took:.0f}s)"
    assert res.error_count == 0 and res.metrics["exact_match"].n == 40
    ref = evaluate(make_spec("ref", model={"type": "simulated", "fixed_cost_s": 0.0, "output": "prompt"}))
    assert rows(res) == rows(ref) and numbers(res) == numbers(ref)
    table = samples_table(res)
    pid_of = {
        sid: json.loads(w)["pid"]
        for sid, w in zip(table.column("sample_id").to_pylist(), table.column("worker").to_pylist())
    }
    hung_pid = int(marker.read_text())
    # the hung actor was replaced by a fresh one, which generated the shard that hung (shards that the hung
    # actor finished before it hung keep its pid; which shard an actor takes first is Ray Data's choice)
    assert pid_of["q010"] != hung_pid, "the shard that hung was generated again by a fresh actor"


def test_a_shard_that_always_hangs_is_recorded_as_errors_after_its_retries(make_spec, engines):
    spec = make_spec(
        "hang-always",
        model={"type": "simulated", "fixed_cost_s": 0.0, "hang_ids": ["q001"]},
        execution={"shard_size": 8, "shard_timeout_s": 2, "max_shard_retries": 1},
    )
    res = evaluate(spec)
    assert res.error_count == 8  # the whole first shard, named
    assert all("timed out" in e.message for e in res.errors)
    assert res.metrics["exact_match"].n == 32 and res.metrics["exact_match"].counts["error"] == 8


def test_a_model_load_slower_than_the_shard_timeout_is_not_a_hung_shard(make_spec, engines):
    spec = make_spec(
        "slow-load",
        model={"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "load_s": 4.0},
        execution={"shard_size": 8, "shard_timeout_s": 2, "max_shard_retries": 0, "generation_actors": 1},
    )
    res = evaluate(spec)
    assert res.error_count == 0 and res.metrics["exact_match"].n == 40, [e.message for e in res.errors]
    assert res.perf.generation_s is not None and res.perf.generation_s < 2.0, (
        f"generation time must not include the 4 s model load: {res.perf.generation_s}")


def test_out_of_memory_in_the_engine_fails_the_run_fast_with_a_clear_error(make_spec, tmp_path, engines):
    spec = make_spec("oom", model={"type": "simulated", "fixed_cost_s": 0.0, "oom_ids": ["q020"]})
    t0 = time.perf_counter()
    with pytest.raises(RunError, match="out of memory"):
        evaluate(spec)
    assert time.perf_counter() - t0 < 60
    # what finished before the failure is kept for a resume
    assert not (tmp_path / "oom" / "runs").exists() or not list((tmp_path / "oom").rglob("result.json"))


def test_a_failed_run_releases_its_gpus_while_the_caller_still_holds_the_error(make_spec, ray_cluster, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    spec = make_spec("oom-held", model={"type": "simulated", "fixed_cost_s": 0.0, "oom_ids": ["q020"]},
                     execution={"shard_size": 8, "generation_actors": 2})
    cfg = tmp_path / "oom.yaml"
    cfg.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True)))
    script = Path(__file__).resolve().parents[1] / "support" / "hold_failed_run.py"
    report_file = tmp_path / "report.json"
    out = subprocess.run(
        [sys.executable, str(script), ray_cluster.get_runtime_context().gcs_address, str(cfg), str(report_file)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert "out of memory" in report["error"]
    assert report["free_gpus"] == report["total_gpus"] == 4, f"the failed run's actors still hold GPUs: {report}"


def test_judges_and_oracles_run_in_their_own_pools(make_spec):
    spec = make_spec(
        "pools",
        metrics=["exact_match", "tests_support_metrics:SlowJudge", "tests_support_metrics:PidOracle"],
        execution={"shard_size": 8, "judge_actors": 1, "oracle_actors": 1},
    )
    res = evaluate(spec)
    t = samples_table(res)
    by_name = {}
    for row in t.to_pylist():
        for s in json.loads(row["scores"]):
            by_name.setdefault(s["name"], set()).add(s["metadata"].get("pid"))
    assert res.metrics["slow_judge"].n == 40 and res.metrics["pid_oracle"].n == 40
    assert by_name["slow_judge"].isdisjoint(by_name["pid_oracle"]), "judge and oracle pools are different actors"
