"""Ten million samples on one head node: the driver merges shard statistics, not samples, and keeps no
Python object per sample (issue 53). Real runs on the session's local Ray: every registered metric family,
merged three ways (the scoring actors' tallies, the tallies in the shards' footers, every stored row), and
the objects a run leaves alive in the driver counted at two sizes."""

import gc
import json
import sys
import tracemalloc
from pathlib import Path

import pytest

from auditkit_ray.api import evaluate

pytestmark = pytest.mark.usefixtures("ray_cluster")
ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "examples" / "agents" / "tools.jsonl"


def merged_three_ways(res, spec) -> list[dict]:
    """The run's RunResult as the run merged it (each shard's tally from its scoring actor), merged again from
    the tallies in the shards' footers, and merged from every stored row (the per-sample merge)."""
    from auditkit_ray.pipeline.merge import merge
    from auditkit_ray.pipeline.plan import build_plan
    from auditkit_ray.store.base import open_store

    plan = build_plan(spec, open_store(spec.store))
    kw = dict(wall_s=res.perf.wall_s, generated=res.perf.generated, generation_s=res.perf.generation_s or 0.0,
              new_tokens=round((res.perf.tokens_per_s or 0) * res.perf.wall_s), model_size=res.perf.model_size_bytes)
    footers = merge(plan, plan.store, **kw)
    rows = merge(plan, plan.store, from_rows=True, **kw)
    return [r.model_dump(exclude={"created_at"}) for r in (res, footers, rows)]


def assert_same_three_ways(res, spec):
    actors, footers, rows = merged_three_ways(res, spec)
    assert footers == rows, "merged from the footers' statistics, not the per-sample merge"
    assert actors == rows, "merged from the actors' statistics, not the per-sample merge"


def rag_spec(tmp_path):
    from auditkit_ray.config import load_sweep_spec, run_spec_from_dict

    base = dict(load_sweep_spec(ROOT / "examples/rag/rag_sweep.yaml").base)
    for key in ("dataset", "retrieval"):  # the example's paths are relative to the repo root
        base[key] = {**base[key], **{k: str(ROOT / v) for k, v in base[key].items() if k in ("path", "corpus")}}
    base["model"] = {**base["model"], "callable": "examples.rag.reader:answer_from_first_context"}
    base["execution"] = {"shard_size": 5}
    base["store"] = {"path": str(tmp_path / "rag-store")}
    return run_spec_from_dict(base)


def test_a_run_merged_from_shard_statistics_equals_the_per_sample_merge_on_every_metric_family(make_spec, tmp_path):
    from auditkit_ray.testing import OpenAIServer, ScriptedPolicy

    seen_families = set()

    # text: exact, overlap and corpus metrics; generation errors; samples without a target (not tested); an
    # extracted answer beside the raw one; repeats (the clustered interval); latencies (the percentiles)
    data = tmp_path / "text.jsonl"
    with open(data, "w") as f:
        for i in range(40):
            a, b = i % 7, (i * 3) % 11
            rec = {"id": f"q{i:03d}", "question": f"What is {a} plus {b}?", "answer": f"{a} plus {b}"}
            f.write(json.dumps(rec if i % 9 != 4 else {k: v for k, v in rec.items() if k != "answer"}) + "\n")
    text = make_spec("text", data=data,
                     model={"type": "simulated", "fixed_cost_s": 0.001, "per_token_s": 0.0, "output": "prompt",
                            "fail_ids": ["q003", "q017", "q030"]},
                     annotators=[{"type": "regex", "name": "plus", "pattern": r"(\d+ plus \d+)"}],
                     metrics=["exact_match", "token_f1", "bleu", "chrf", {"name": "exact_match", "on": "plus"}],
                     repeats=2, execution={"shard_size": 6})
    res = evaluate(text)
    assert res.error_count == 6 and res.metrics["bleu"].aggregation == "corpus"
    assert res.metrics["exact_match"].counts["not_tested"] > 0 and res.perf.latency_p95_s is not None
    assert 0 < res.metrics["token_f1"].mean < 1 and res.metrics["exact_match@plus"].mean == 1.0
    assert_same_three_ways(res, text)
    seen_families |= {m.family for m in res.metrics.values()}

    # retrieval and RAG checks: samples without gold evidence are unknown
    rag = rag_spec(tmp_path)
    res = evaluate(rag)
    assert res.metrics["hit_rate_at_k"].counts["unknown"] > 0 and res.metrics["evidence_recall"].n > 0
    assert_same_three_ways(res, rag)
    seen_families |= {m.family for m in res.metrics.values()}

    # agent trajectories and outcome oracles
    agent = make_spec("agent", data=TOOLS, model={"type": "agent", "callable": "scripted_agent:step", "max_turns": 6},
                      dataset={"path": str(TOOLS), "input_field": "input", "target_field": "target"},
                      prompt={"template": "{{ input }}"},
                      metrics=["tool_call_match", "parallel_calls", "agent_outcome"], execution={"shard_size": 3})
    res = evaluate(agent)
    assert res.metrics["agent_outcome"].n >= 1
    assert_same_three_ways(res, agent)
    seen_families |= {m.family for m in res.metrics.values()}

    # a judge that cannot decide on some samples (unknown) and fails on others (error)
    def reply(body):
        text = body["messages"][-1]["content"]
        return "hmm, hard to say" if "What is 5 plus" in text else "yes" if "plus 3" not in text else "no"

    with OpenAIServer(ScriptedPolicy(reply, faults=[{"match": "What is 6 plus", "status": 500}])) as server:
        judge = {"type": "api", "base_url": server.base_url, "model": "judge", "max_retries": 0,
                 "cache_path": str(tmp_path / "judge-cache.sqlite")}
        metrics = ["exact_match", {"name": "factual_correctness", "params": {"judge": judge}}]
        judged = make_spec("judged", metrics=metrics, execution={"shard_size": 7})
        res = evaluate(judged)
    fc = res.metrics["factual_correctness"]
    assert fc.counts["unknown"] > 0 and fc.counts["error"] > 0 and 0 < fc.mean < 1
    assert_same_three_ways(res, judged)
    seen_families |= {m.family for m in res.metrics.values()}

    from auditkit_ray.core.registry import BUILTIN, resolve_metric

    registered = {resolve_metric(name).family for name in BUILTIN}
    missing = registered - seen_families - {"judge-reference", "oracle-diagnostic"}
    assert not {f for f in missing if not f.startswith(("likelihood", "probe", "repeat", "bertscore"))}, missing


def arith_data(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        for i in range(n):
            a, b = i % 97, (i * 7) % 89
            f.write(json.dumps({"id": f"q{i:06d}", "question": f"What is {a} plus {b}?", "answer": str(a + b)}) + "\n")
    return path


def left_alive(spec) -> tuple[int, int]:
    """(memory blocks allocated during the run and still alive after it, objects the collector tracks, more
    than before it), in this process, the run's driver: counts, not time, so a slow machine cannot fool it."""
    gc.collect()
    before = len(gc.get_objects())
    tracemalloc.start()
    try:
        res = evaluate(spec)
        assert res.perf.samples > 0
        del res
        gc.collect()
        blocks = sum(s.count for s in tracemalloc.take_snapshot().statistics("filename"))
    finally:
        tracemalloc.stop()
    gc.collect()
    return blocks, len(gc.get_objects()) - before


def test_objects_a_run_leaves_alive_in_the_driver_do_not_grow_with_its_samples(make_spec, tmp_path):
    # the same number of shards at 2,000 and 20,000 samples: what scales with shards is the same; what scales
    # with samples (a record, a score, a latency kept per sample) would be 18,000 more of each
    small = arith_data(tmp_path / "small.jsonl", 2_000)
    large = arith_data(tmp_path / "large.jsonl", 20_000)

    def spec(name, data, size):
        return make_spec(name, data=data, execution={"shard_size": size})

    evaluate(spec("warm", small, 500))  # imports, Ray Data's first dataset: what any first run allocates once
    blocks_small, objects_small = left_alive(spec("small", small, 500))
    blocks_large, objects_large = left_alive(spec("large", large, 5_000))
    print(f"left alive: {blocks_small} blocks, {objects_small} objects at 2k; "
          f"{blocks_large} blocks, {objects_large} objects at 20k", file=sys.stderr)
    extra = 18_000
    assert blocks_large - blocks_small < extra // 10, (blocks_small, blocks_large)
    assert objects_large - objects_small < extra // 10, (objects_small, objects_large)


def test_a_run_planned_in_tasks_holds_no_object_per_sample_while_it_runs(make_spec, tmp_path, monkeypatch):
    # the peak of what the driver allocates over a whole run (plan, pipeline, merge), at two sizes with shards
    # of one size: what grows is compact (an id hash and a latency, 16 bytes a sample; a few hundred bytes a
    # shard), not an object per sample. The pieces of the file the driver holds at once are bounded (16 MiB
    # parts, 1 MiB reads): here smaller than either dataset, so that the bound, not the file, is what they hold
    from auditkit_ray.data import readers
    from auditkit_ray.pipeline import plan_tasks

    monkeypatch.setattr(readers, "SCAN_CHUNK", 64 << 10)
    monkeypatch.setattr(plan_tasks, "PART_BYTES", 64 << 10)
    small = arith_data(tmp_path / "small.jsonl", 2_000)
    large = arith_data(tmp_path / "large.jsonl", 20_000)

    def peak(name, data, size):
        spec = make_spec(name, data=data, execution={"shard_size": size, "plan_tasks": 2})
        gc.collect()
        tracemalloc.start()
        try:
            res = evaluate(spec)
            assert res.perf.samples > 0
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak("warm", small, 500)
    small_peak, large_peak = peak("small", small, 500), peak("large", large, 500)
    print(f"driver's traced peak: {small_peak} B at 2k, {large_peak} B at 20k", file=sys.stderr)
    # a dict per sample alone is over 200 bytes: 18,000 of them would be 3.6 MB
    assert large_peak - small_peak < 64 * 18_000, (small_peak, large_peak)

