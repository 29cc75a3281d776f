#!/usr/bin/env python
"""Workload 4: framework overhead on CPU scoring.

    python benchmarks/bench_scoring_overhead.py [--smoke | --quick | --full] [--samples N]

RAG samples (retrieved contexts, gold evidence, a corpus snapshot with
versions, supersession dates and access groups, gold numbers, answerability)
go through the ``echo`` backend (the output is the reference answer, with
citations; it runs in the scoring actors) and are scored with exact_match,
token_f1 and the ten deterministic RAG checks, on the machine's CPUs (2
here).

Peer in the same run: a plain single-process loop that reads the same file
with the package's reader and calls the same metrics' ``score`` on every
sample. Both produce the same means (checked).

Figures: samples/s of auditkit (Ray already started and warmed up by one tiny
run; both reported separately), of the loop, their ratio; and driver-side costs measured
on their own after the run: building the plan (before any actor starts) on
the driver alone and in parts, the driver's and Ray tasks' (what the run
does for a file of 64 MiB or more: ``--full``), merging the run's shards back from the store (what a resumed
run does for the shards an earlier run wrote; a run merges the tallies its
scoring actors sent instead), and the CPU per sample of the generation and
scoring stages run in this process on up to 10k samples (``stage_cpu``: no
Ray hand-offs, steadier than wall times on a shared machine).
Goal: auditkit >= 1.5x the loop once Ray start-up is excluded.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    Recorder,
    call_quietly,
    note,
    parser,
    print_machine,
    rmtree,
    run_spec,
    start_ray,
    stop_ray,
    timed,
    warm_up,
    with_tmpdir,
    write_jsonl,
)

SAMPLES = {"smoke": 2_000, "quick": 50_000, "full": 200_000}
SHARD = 2_000
METRICS = ["exact_match", "token_f1", "evidence_recall", "freshness", "stale_hit_rate", "access_control_compliance",
           "unauthorized_hit_rate", "citation_validity", "citation_precision", "citation_recall",
           "numeric_correctness", "abstention"]


def rag_records(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        docs, ctxs = {}, []
        for k in range(4):
            did = f"d{i}-{k}"
            stale = rng.random() < 0.15
            docs[did] = {"digest": f"h{i}{k}", "version": 2,
                         "superseded_at": "2024-01-01" if stale else None,
                         "access_groups": ["*"] if k == 0 else (["staff"] if rng.random() < 0.9 else ["legal"])}
            if k < 3:
                ctxs.append({"id": did, "digest": f"h{i}{k}", "version": 2 if rng.random() < 0.95 else 1, "rank": k + 1,
                             "text": f"Document {k} says the total for item {i} was {1000 + i}."})
        gold = [f"d{i}-{rng.choice([0, 1, 3])}"]
        amount = 1000 + i
        if rng.random() < 0.1:
            answer = "I don't know: the documents do not mention it."
        else:
            cites = "[1]" if rng.random() < 0.7 else "[1, 2]"
            answer = f"The total for item {i} was {amount:,} {cites}."
        out.append({
            "id": f"rag-{i:07d}", "question": f"What was the total for item {i}?", "answer": answer,
            "retrieved_contexts": ctxs, "gold_evidence": gold,
            "corpus_snapshot": {"documents": docs, "decision_date": "2024-06-01"},
            "user_groups": ["staff"], "gold_numbers": [amount], "answerable": rng.random() < 0.9,
        })
    return out


def spec(data: Path, store: Path, scoring_actors: int) -> dict[str, Any]:
    return {
        "name": "scoring-overhead",
        "model": {"type": "echo", "field": "target", "batch_size": SHARD},
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }}"},
        "metrics": METRICS,
        "execution": {"shard_size": SHARD, "generation_actors": 1, "scoring_actors": scoring_actors},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }


def plain_loop(data: Path) -> tuple[dict[str, float], int]:
    """The same reader and metrics, one process, no framework: means by metric."""
    from auditkit_ray.config.models import DatasetSpec
    from auditkit_ray.core.metric import MissingEvidence
    from auditkit_ray.core.registry import build_metric
    from auditkit_ray.core.types import Generation
    from auditkit_ray.data.readers import load_samples

    samples, _ = load_samples(DatasetSpec(path=str(data), input_field="question", target_field="answer"))
    metrics = [build_metric(m) for m in METRICS]
    sums = {m.name: 0.0 for m in metrics}
    counts = {m.name: 0 for m in metrics}
    for s in samples:
        g = Generation(text=s.targets[0], finish_reason="stop")
        ctx = {"annotations": {}, "prompt": s.input, "repeat": 0}
        for m in metrics:
            try:
                sc = m.score(s, g, ctx)
            except MissingEvidence:
                continue
            if sc.status.value == "scored":
                sums[m.name] += sc.value
                counts[m.name] += 1
    return {k: sums[k] / counts[k] for k in sums if counts[k]}, len(samples)


def stage_cpu(data: Path, store: Path, n: int, passes: int = 5) -> tuple[float, float, int]:
    """One generation and one scoring actor's CPU per sample, without Ray's
    hand-offs: the first ``n`` samples planned on the driver, each shard
    through ``GenerateStage`` once, then through ``ScoreStage`` ``passes``
    times (the best pass; both stages pause the GC as in the actors).
    ``time.process_time``, so steadier than the wall times on a shared
    machine. Returns (generate, score) in us per sample, and n."""
    import time

    import numpy as np

    from auditkit_ray.actors.generate import Generator
    from auditkit_ray.actors.score import ScoreStage
    from auditkit_ray.config.loader import run_spec_from_dict
    from auditkit_ray.pipeline.plan import build_plan
    from auditkit_ray.store.base import open_store

    d = spec(data, store, 1)
    d["dataset"]["limit"] = n
    rs = run_spec_from_dict(d, "<bench>")
    plan = build_plan(rs, open_store(rs.store))
    runs = {plan.layout.run_fp: (plan.spec.model_dump_json(by_alias=True), plan.store, plan.layout)}
    gen, score = Generator(runs=runs), ScoreStage(runs=runs, pool="checks", final=True)
    rows = [{k: np.array([v], dtype=object) for k, v in plan.row(i).items()} for i in plan.pending]
    gen(rows[0])  # the backend's construction and first imports: once per actor, not per sample
    t0 = time.process_time()
    generated = [gen(r) for r in rows]
    gen_s = time.process_time() - t0
    best = float("inf")
    for _ in range(passes):
        t0 = time.process_time()
        for g in generated:
            score(g)
        best = min(best, time.process_time() - t0)
    done = plan.n_samples
    return gen_s / done * 1e6, best / done * 1e6, done


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, help="number of samples (default: by mode)")
    ap.add_argument("--scoring-actors", type=int, default=2)
    a = ap.parse_args(argv)
    n = a.samples or SAMPLES[a.mode]
    print_machine()
    rec = Recorder("scoring_overhead", a.mode)
    work = with_tmpdir("bench-scoring-")
    data = write_jsonl(work / "rag.jsonl", rag_records(n))
    rec.setting(samples=n, shard_size=SHARD, scoring_actors=a.scoring_actors, metrics=METRICS)
    note(f"{n} RAG samples, {len(METRICS)} metrics, shard_size {SHARD}, scoring actors {a.scoring_actors}")

    with timed() as t_loop:
        loop_means, loop_n = plain_loop(data)
    ray_s = start_ray()
    try:
        warm_s = warm_up()
        with timed() as t_ours:
            res = call_quietly(lambda: run_spec(spec(data, work / "store", a.scoring_actors)))
        # driver-side pieces, measured again on their own
        from auditkit_ray.config.loader import run_spec_from_dict
        from auditkit_ray.pipeline.merge import merge
        from auditkit_ray.pipeline.plan import build_plan
        from auditkit_ray.store.base import open_store

        rs = run_spec_from_dict(spec(data, work / "store-plan", a.scoring_actors), "<bench>")
        with timed() as t_plan:
            build_plan(rs, open_store(rs.store))
        with timed() as t_plan_tasks:
            tasks_plan = build_plan(rs, open_store(rs.store), in_tasks=True)
        rs_done = run_spec_from_dict(spec(data, work / "store", a.scoring_actors), "<bench>")
        plan_done = build_plan(rs_done, open_store(rs_done.store))
        with timed() as t_merge:
            merge(plan_done, plan_done.store, wall_s=1.0, generated=0, generation_s=0.0, new_tokens=0)
        gen_us, score_us, staged = stage_cpu(data, work / "store-stage", min(n, 10_000))
    finally:
        stop_ray()
    ours_means = {k: v.mean for k, v in res.metrics.items() if v.mean is not None}
    diff = [k for k in loop_means if abs(loop_means[k] - ours_means.get(k, float("nan"))) > 1e-9]
    if diff or res.perf.samples != loop_n:
        raise SystemExit(
            f"auditkit and the plain loop disagree on {diff or 'the sample count'}: {ours_means} vs {loop_means}"
        )
    ours_rate, loop_rate = n / t_ours["s"], n / t_loop["s"]
    rec.emit("scoring.samples", n, "samples")
    rec.emit("scoring.ray_start", ray_s, "s")
    rec.emit("scoring.warm_up_run", warm_s, "s")
    rec.emit("scoring.auditkit.wall", t_ours["s"], "s")
    rec.emit("scoring.auditkit.throughput", ours_rate, "samples/s")
    rec.emit("scoring.auditkit.throughput_with_ray_start", n / (t_ours["s"] + ray_s + warm_s), "samples/s")
    rec.emit("scoring.loop.wall", t_loop["s"], "s")
    rec.emit("scoring.loop.throughput", loop_rate, "samples/s")
    rec.emit("scoring.ratio.auditkit_vs_loop", ours_rate / loop_rate, "x")
    rec.emit("scoring.driver.plan", t_plan["s"], "s (the driver alone)")
    rec.emit(
        "scoring.driver.plan_in_tasks",
        t_plan_tasks["s"],
        f"s ({tasks_plan.planned_in_tasks or 'no'} parts, the driver's and Ray tasks': what the run did; "
        "the driver alone below 64 MiB)",
    )
    rec.emit("scoring.driver.merge_from_store", t_merge["s"], "s")
    rec.emit("scoring.stage.generate_cpu", gen_us, f"us/sample (GenerateStage in one process, {staged} samples)")
    rec.emit(
        "scoring.stage.score_cpu",
        score_us,
        f"us/sample (ScoreStage in one process, {staged} samples, best of 5 passes)",
    )
    rec.emit("scoring.means_match_loop", True)
    rec.goal("ge_1.5x_loop_excluding_ray_start", ours_rate >= 1.5 * loop_rate, f"{ours_rate / loop_rate:.2f}x")
    rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
