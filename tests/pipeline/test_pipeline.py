"""The Ray pipeline on a real local Ray (2 CPUs, 4 logical GPUs)."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from auditkit_ray import ConfigError, DataError, Status
from auditkit_ray.api import evaluate, samples_table

pytestmark = pytest.mark.usefixtures("ray_cluster")


def test_simulated_run_scores_every_sample_and_writes_result(make_spec, tmp_path):
    spec = make_spec()
    res = evaluate(spec)
    assert res.metrics["exact_match"].mean == 1.0 and res.metrics["exact_match"].n == 40
    assert res.perf.samples == 40 and res.perf.generated == 40
    assert res.metadata["n_shards"] == 5
    stored = json.loads((tmp_path / "store" / "runs" / res.fingerprint / "result.json").read_text())
    assert stored["fingerprint"] == res.fingerprint and stored["format"] == 1
    t = samples_table(res)
    assert t.column("sample_id").to_pylist() == [f"q{i:03d}" for i in range(40)]  # order survives


def test_same_scores_from_one_actor_and_two_actors(make_spec, rows, numbers):
    # slow enough shards that the second actor is up before the work runs out, even on a loaded machine
    over = {"model": {"type": "simulated", "fixed_cost_s": 0.3, "per_token_s": 0.0, "output": "prompt"}}
    one = evaluate(make_spec("s1", execution={"shard_size": 2, "generation_actors": 1}, **over))
    two = evaluate(make_spec("s2", execution={"shard_size": 2, "generation_actors": 2, "scoring_actors": 2}, **over))
    assert one.fingerprint == two.fingerprint
    assert rows(one) == rows(two)
    assert numbers(one) == numbers(two)
    pids = {json.loads(w)["pid"] for w in samples_table(two).column("worker").to_pylist()}
    assert len(pids) == 2, "two generation actors should both have worked"


def test_four_generation_actors_each_see_a_different_cuda_visible_devices(make_spec):
    spec = make_spec(
        model={"type": "simulated", "fixed_cost_s": 0.3, "per_token_s": 0.0},
        execution={"shard_size": 2, "generation_actors": 4},
    )
    res = evaluate(spec)
    workers = {}
    for w in samples_table(res).column("worker").to_pylist():
        w = json.loads(w)
        workers[w["pid"]] = w
    assert len(workers) == 4
    visible = [w["cuda_visible_devices"] for w in workers.values()]
    assert all(v is not None for v in visible)
    assert len(set(visible)) == 4, visible
    assert sorted(g for w in workers.values() for g in w["gpu_ids"]) == ["0", "1", "2", "3"]


def test_teardown_frees_the_clusters_gpus(make_spec, ray_cluster):
    evaluate(make_spec(execution={"shard_size": 4, "generation_actors": 4}))
    deadline = time.time() + 30
    while time.time() < deadline and ray_cluster.available_resources().get("GPU", 0) < 4:
        time.sleep(0.2)
    assert ray_cluster.available_resources().get("GPU", 0) == 4


def test_generation_error_is_recorded_as_error_and_counted(make_spec):
    spec = make_spec(model={"type": "simulated", "fixed_cost_s": 0.0, "fail_ids": ["q003", "q017"]})
    res = evaluate(spec)
    em = res.metrics["exact_match"]
    assert em.n == 38 and em.counts["error"] == 2 and em.mean == 1.0  # errors are not zeros
    assert res.error_count == 2
    assert {e.sample_id for e in res.errors} == {"q003", "q017"}
    assert all("simulated failure" in e.message for e in res.errors)
    rows = {r["sample_id"]: r for r in samples_table(res).to_pylist()}
    assert rows["q003"]["error"] and json.loads(rows["q003"]["scores"])[0]["status"] == Status.ERROR.value


def test_changing_only_metrics_rescores_stored_generations_without_generating(make_spec, tmp_path):
    first = evaluate(make_spec())
    assert first.perf.generated == 40
    result_json = tmp_path / "store" / "runs" / first.fingerprint / "result.json"
    mtime = result_json.stat().st_mtime_ns
    again = evaluate(make_spec())  # nothing to do: the stored result comes back as it was, stored untouched
    assert again.model_dump(exclude={"perf"}) == first.model_dump(exclude={"perf"})
    assert result_json.stat().st_mtime_ns == mtime
    # its perf is this invocation's: every sample stored, nothing generated, its own wall time; the rate stays
    # the generation's (a leaderboard compares models by it)
    assert (again.perf.stored, again.perf.generated) == (40, 0) and again.perf.wall_s != first.perf.wall_s
    assert again.perf.throughput_samples_per_s == first.perf.throughput_samples_per_s
    more = evaluate(make_spec(metrics=["exact_match", "token_f1", "contains"]))
    assert more.fingerprint != first.fingerprint
    assert more.generation_fingerprint == first.generation_fingerprint
    assert more.perf.generated == 0 and more.metrics["contains"].n == 40
    assert more.perf.rescored == 40 and more.perf.stored == 0


def test_worker_killed_mid_run_completes_with_no_sample_lost_or_counted_twice(make_spec, tmp_path, rows, numbers):
    slow = {"type": "simulated", "fixed_cost_s": 0.4, "per_token_s": 0.0, "output": "prompt"}
    spec = make_spec("killed", model=slow, execution={"shard_size": 2, "generation_actors": 1})
    gen_dir = tmp_path / "killed" / "generations"
    killed = {}

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline:
            if list(gen_dir.rglob("shard-*.parquet")):
                # the first finished run shard names the generation actor's pid
                pid = _generation_actor_pid(tmp_path / "killed")
                if pid:
                    os.kill(pid, signal.SIGKILL)
                    killed["pid"] = pid
                    return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    res = evaluate(spec)
    t.join()
    assert killed, "the generation actor was never killed"
    ref = evaluate(make_spec("ref", model=slow, execution={"shard_size": 2, "generation_actors": 1}))
    assert rows(res) == rows(ref)
    assert numbers(res) == numbers(ref)
    ids = [r[0] for r in rows(res)]
    assert len(ids) == len(set(ids)) == 40
    pids = {json.loads(w)["pid"] for w in samples_table(res).column("worker").to_pylist()}
    assert killed["pid"] in pids and len(pids) >= 2, "a restarted actor should have finished the run"


def _generation_actor_pid(store: Path) -> int | None:
    for f in sorted((store / "runs").rglob("shard-*.parquet")):
        import pyarrow.parquet as pq

        try:
            w = pq.read_table(f, columns=["worker"]).column("worker")[0].as_py()
        except Exception:  # noqa: BLE001 - file being linked
            continue
        return json.loads(w)["pid"]
    return None


# ----------------------------------------------------------------------------- bad input
def _assert_nothing_written(store: Path):
    assert not list(store.rglob("shard-*.parquet")) and not list(store.rglob("result.json"))


def test_empty_dataset_is_a_clear_error(make_spec, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataError, match="no samples"):
        evaluate(make_spec(data=empty))
    _assert_nothing_written(tmp_path / "store")


def test_sample_missing_a_template_field_names_the_sample(make_spec, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "ok", "question": "q", "answer": "a"}\n{"id": "bad-7", "answer": "a"}\n')
    with pytest.raises(DataError) as exc:
        evaluate(make_spec(data=data))
    assert "bad-7" in str(exc.value) and "question" in str(exc.value)
    _assert_nothing_written(tmp_path / "store")


def test_model_path_that_does_not_exist_is_a_clear_error(make_spec, tmp_path):
    with pytest.raises(ConfigError, match="no-such-model"):
        evaluate(make_spec(model={"type": "hf", "path": str(tmp_path / "no-such-model")}))
    _assert_nothing_written(tmp_path / "store")


def test_dataset_that_is_not_utf8_names_the_file_and_line(make_spec, tmp_path):
    data = tmp_path / "latin.jsonl"
    data.write_bytes(
        b'{"id": "1", "question": "ok", "answer": "1"}\n{"id": "2", "question": "caf\xe9", "answer": "2"}\n'
    )
    with pytest.raises(DataError) as exc:
        evaluate(make_spec(data=data))
    assert f"{data}:2" in str(exc.value) and "UTF-8" in str(exc.value)
    _assert_nothing_written(tmp_path / "store")


def test_partial_temporary_files_are_never_read_as_complete(make_spec, tmp_path):
    spec = make_spec()
    from auditkit_ray.pipeline.identity import run_fingerprint

    shards = tmp_path / "store" / "runs" / run_fingerprint(spec) / "s8"
    shards.mkdir(parents=True)
    (shards / ".shard-00000.parquet.tmp-dead").write_bytes(b"PAR1 half written")
    res = evaluate(spec)
    assert res.perf.generated == 40 and res.metrics["exact_match"].n == 40


def test_resume_after_driver_kill_matches_uninterrupted_run(make_spec, tmp_path, ray_cluster, rows, numbers):
    """The driver (`auditkit-ray run` in its own process, joined to the same
    cluster) is SIGKILLed halfway; running it again finishes only the missing
    shards and gives the same RunResult numbers and per-sample scores."""
    import subprocess
    import sys

    import yaml

    slow = {"type": "simulated", "fixed_cost_s": 0.25, "per_token_s": 0.0, "output": "prompt"}
    spec = make_spec("resumed", model=slow, execution={"shard_size": 2, "generation_actors": 1})
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True)))
    address = ray_cluster.get_runtime_context().gcs_address
    cmd = [sys.executable, "-m", "auditkit_ray.cli", "run", str(cfg), "--address", address, "--quiet"]
    shards_dir = tmp_path / "resumed" / "runs" / spec_fingerprint(spec) / "s2"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(shards_dir.glob("shard-*.parquet"))) < 6:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {f.name: f.stat().st_ino for f in shards_dir.glob("shard-*.parquet")}
    assert 6 <= len(before) < 20, f"kill should land halfway, found {len(before)} of 20 shards"

    out = subprocess.run(cmd[:-1] + ["--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    from auditkit_ray import RunResult

    resumed = RunResult.model_validate_json(out.stdout)
    after = {f.name: f.stat().st_ino for f in shards_dir.glob("shard-*.parquet")}
    assert len(after) == 20
    assert all(after[k] == v for k, v in before.items()), "finished shards must not be rewritten"
    # at most the shards in flight at the kill are generated again
    assert resumed.perf.generated <= 40 - 2 * len(before) + 2 * 2

    ref = evaluate(make_spec("uninterrupted", model=slow, execution={"shard_size": 2, "generation_actors": 1}))
    assert resumed.fingerprint == ref.fingerprint
    assert numbers(resumed) == numbers(ref)
    assert rows(resumed) == rows(ref)


def spec_fingerprint(spec):
    from auditkit_ray.pipeline.identity import run_fingerprint

    return run_fingerprint(spec)


def test_precomputed_backend_rescores_a_stored_run_and_reports_missing_outputs(make_spec, tmp_path):
    first = evaluate(make_spec(model={"type": "simulated", "output": "prompt", "fixed_cost_s": 0.0}))
    run_dir = tmp_path / "store" / "runs" / first.fingerprint
    re = evaluate(make_spec("rescored", model={"type": "precomputed", "path": str(run_dir)}, metrics=["contains"]))
    assert [r["text"] for r in samples_table(re).to_pylist()] == [r["text"] for r in samples_table(first).to_pylist()]
    assert re.metrics["contains"].n == 40

    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text('{"id": "q000", "output": "3"}\n')
    part = evaluate(make_spec("partial", model={"type": "precomputed", "path": str(outputs)}))
    assert part.metrics["exact_match"].n == 1 and part.metrics["exact_match"].counts["error"] == 39


def test_scoring_of_first_shards_overlaps_generation_of_later_ones(make_spec):
    spec = make_spec(
        model={"type": "simulated", "fixed_cost_s": 0.25, "per_token_s": 0.0},
        execution={"shard_size": 2, "generation_actors": 1},
    )
    res = evaluate(spec)
    workers = [json.loads(w) for w in samples_table(res).column("worker").to_pylist()]
    first_scored = min(w["scored_at"] for w in workers)
    last_generated = max(w["generated_at"] for w in workers)
    assert first_scored < last_generated - 1.0, "scoring should start while generation is still running"


def test_an_actor_needing_two_gpus_is_given_two_devices(make_spec):
    spec = make_spec(
        model={"type": "simulated", "fixed_cost_s": 0.2, "num_gpus": 2},
        execution={"shard_size": 4, "generation_actors": 2},
    )
    res = evaluate(spec)
    workers = {json.loads(w)["pid"]: json.loads(w) for w in samples_table(res).column("worker").to_pylist()}
    assert len(workers) == 2
    for w in workers.values():
        assert len(w["gpu_ids"]) == 2 and len(w["cuda_visible_devices"].split(",")) == 2
    all_ids = sorted(g for w in workers.values() for g in w["gpu_ids"])
    assert all_ids == ["0", "1", "2", "3"]  # disjoint GPUs


def test_group_scope_metric_sees_all_repeats_of_a_sample_once(make_spec):
    spec = make_spec(
        model={"type": "simulated", "output": "target", "fail_ids": []},
        repeats=3,
        metrics=["exact_match", "tests_support_metrics:AllRepeatsAgree"],
    )
    res = evaluate(spec)
    assert res.metrics["exact_match"].n == 120
    agree = res.metrics["all_repeats_agree"]
    assert agree.n == 40 and agree.mean == 1.0 and agree.total == 40


def test_scoring_actor_killed_mid_run_completes_with_no_sample_lost_or_counted_twice(
    make_spec, tmp_path, rows, numbers
):
    slow = {"type": "simulated", "fixed_cost_s": 0.3, "per_token_s": 0.0, "output": "prompt"}
    # Ray Data's scoring actors (execution.direct: false): a run this small would otherwise be scored in the
    # driver, which is this test process
    spec = make_spec("killscore", model=slow, execution={"shard_size": 2, "direct": False})
    killed = {}

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline:
            for f in (
                sorted((tmp_path / "killscore" / "runs").rglob("shard-*.parquet"))
                if (tmp_path / "killscore").exists()
                else []
            ):
                import pyarrow.parquet as pq

                try:
                    pid = json.loads(pq.read_table(f, columns=["worker"]).column("worker")[0].as_py())["scored_by"]
                except Exception:  # noqa: BLE001 - file being linked
                    continue
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    res = evaluate(spec)
    t.join()
    assert killed, "the scoring actor was never killed"
    ref = evaluate(make_spec("killscore-ref", model=slow, execution={"shard_size": 2, "direct": False}))
    assert rows(res) == rows(ref) and numbers(res) == numbers(ref)
    scorers = {json.loads(w)["scored_by"] for w in samples_table(res).column("worker").to_pylist()}
    assert killed["pid"] in scorers and len(scorers) >= 2, "a restarted scoring actor finished the run"


def test_merging_the_scoring_actors_tallies_equals_merging_the_stored_shards(make_spec, monkeypatch):
    # the driver merges what each scoring actor tallied of the shard it wrote; a resumed run tallies
    # the shards an earlier run wrote from the store: both must give the same RunResult numbers
    from auditkit_ray.pipeline import merge as merging
    from auditkit_ray.pipeline.merge import merge
    from auditkit_ray.pipeline.plan import build_plan
    from auditkit_ray.store.base import open_store

    read_back, tally_stored = [], merging.tally_stored
    monkeypatch.setattr(merging, "tally_stored", lambda store, plan, shards, metrics, **kw: (
        read_back.extend(shards), tally_stored(store, plan, shards, metrics, **kw))[1])

    spec = make_spec(model={"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "prompt",
                            "fail_ids": ["q003", "q017"]},
                     metrics=["exact_match", "token_f1", "bleu", "chrf"], execution={"shard_size": 6})
    res = evaluate(spec)
    assert res.metadata["n_shards"] == 7 and res.error_count == 2
    assert 0 < res.metrics["token_f1"].mean < 1 and res.metrics["bleu"].aggregation == "corpus"
    assert read_back == []  # every shard's tally came from its scoring actor
    plan = build_plan(spec, open_store(spec.store))
    again = merge(
        plan,
        plan.store,
        wall_s=res.perf.wall_s,
        generated=res.perf.generated,
        generation_s=res.perf.generation_s or 0.0,
        new_tokens=round((res.perf.tokens_per_s or 0) * res.perf.wall_s),
    )
    assert read_back == list(range(7))  # this time all from the store (each shard's footer)
    assert again.model_dump(exclude={"created_at"}) == res.model_dump(exclude={"created_at"})
    rows = merge(plan, plan.store, wall_s=res.perf.wall_s, generated=res.perf.generated,
                 generation_s=res.perf.generation_s or 0.0,
                 new_tokens=round((res.perf.tokens_per_s or 0) * res.perf.wall_s), from_rows=True)
    assert rows.model_dump(exclude={"created_at"}) == res.model_dump(exclude={"created_at"})  # and from every row


def test_score_metadata_that_json_writers_treat_differently_is_stored_as_documented(make_spec):
    # the scores column is JSON text any reader reads; orjson writes it when installed, the standard
    # library what orjson refuses (an integer beyond 64 bits): both must read back exactly, a NaN as null
    from auditkit_ray.core.rowjson import loads
    from auditkit_ray.pipeline.merge import merge
    from auditkit_ray.pipeline.plan import build_plan
    from auditkit_ray.store.base import open_store

    spec = make_spec(metrics=["exact_match", "tests_support_metrics:AwkwardMetadata"])
    res = evaluate(spec)
    assert res.metrics["awkward_metadata"].mean == 1.0 and res.metrics["awkward_metadata"].n == 40
    rows = samples_table(res).to_pylist()
    assert len(rows) == 40
    for r in rows:
        stored = {s["name"]: s for s in json.loads(r["scores"])}
        assert stored["awkward_metadata"]["metadata"] == {"big": 2**70 + 1, "ratio": None, "word": "日本 café",
                                                          "day": "2024-06-01", "groups": ["staff"]}
        assert type(stored["awkward_metadata"]["metadata"]["big"]) is int
        assert loads(r["scores"]) == json.loads(r["scores"])
    plan = build_plan(spec, open_store(spec.store))
    again = merge(
        plan,
        plan.store,
        wall_s=res.perf.wall_s,
        generated=res.perf.generated,
        generation_s=res.perf.generation_s or 0.0,
        new_tokens=round((res.perf.tokens_per_s or 0) * res.perf.wall_s),
    )
    assert again.metrics == res.metrics  # tallied again from the stored text: the same numbers
