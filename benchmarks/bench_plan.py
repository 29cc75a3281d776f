#!/usr/bin/env python
"""The plan: reading, validating and sharding a dataset before a run starts.

    python benchmarks/bench_plan.py [--smoke | --quick | --full] [--samples N] [--runs K]

Workload 4's RAG samples (``bench_scoring_overhead.rag_records``), one JSON
Lines file. Three ways to plan, each timed on its own in the same run
(Ray started and warmed up first, reported separately):

1. the driver alone (``execution.plan_tasks: 0``), against
   parts read at once, one per CPU, the first on the driver and the others
   in Ray tasks (``plan_tasks`` unset, what a run does for a file of 64 MiB
   or more; forced here at every size): the same plan either way (checked);
2. a sweep of K runs over the same dataset (another metric set each: K run
   fingerprints), planned one by one, against planned together
   (``build_plans``: one reading, shared rows); and what the plans' rows
   hold on the driver until their cells run (each distinct row once).

No goal of the issue is attached; these are the driver-side costs behind
workload 4 and behind sweeps over checkpoints.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    Recorder,
    note,
    parser,
    print_machine,
    rmtree,
    start_ray,
    stop_ray,
    timed,
    warm_up,
    with_tmpdir,
    write_jsonl,
)  # noqa: E402
from bench_scoring_overhead import METRICS, SAMPLES, rag_records, spec  # noqa: E402


def planned(plan: Any, shard: int) -> dict[str, Any]:
    """A shard's planned row, fetched from Ray's object store where the plan's parts put it."""
    from auditkit_ray.actors.shard import REF

    row = plan.shard_payloads[shard]
    return __import__("ray").get(row[REF]) if REF in row else row


def rows_mib(plans: list[Any]) -> float:
    """What the plans' rows hold on the driver: each distinct bytes object once (a row the plan's parts put in
    Ray's object store is a reference here and holds nothing on the driver)."""
    seen: dict[int, int] = {}
    for p in plans:
        for row in p.shard_payloads.values():
            for b in row.values():
                if isinstance(b, bytes | bytearray | memoryview):
                    seen[id(b)] = len(b)
    return sum(seen.values()) / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, help="number of samples (default: by mode)")
    ap.add_argument("--runs", type=int, default=4, help="runs of the sweep (default %(default)s)")
    a = ap.parse_args(argv)
    n = a.samples or SAMPLES[a.mode]
    print_machine()
    rec = Recorder("plan", a.mode)
    work = with_tmpdir("bench-plan-")
    data = write_jsonl(work / "rag.jsonl", rag_records(n))
    shard = min(2000, max(1, n // 4))  # at least 4 shards, to split among the tasks
    rec.setting(samples=n, runs=a.runs, file_mb=round(data.stat().st_size / 1e6, 1), shard_size=shard)
    note(f"{n} RAG samples ({data.stat().st_size / 1e6:.0f} MB), a sweep of {a.runs} runs")

    from auditkit_ray.actors.shard import unpack
    from auditkit_ray.config.loader import run_spec_from_dict
    from auditkit_ray.pipeline.plan import build_plan, build_plans
    from auditkit_ray.store.base import open_store

    def run_spec(k: int = 0, tasks: int | None = None) -> Any:
        d = spec(data, work / "store", 2)
        d["metrics"] = METRICS[: len(METRICS) - k]  # another metric set: another run over the same rows
        d["execution"]["plan_tasks"] = tasks
        d["execution"]["shard_size"] = shard
        return run_spec_from_dict(d, "<bench>")

    ray_s = start_ray()
    try:
        warm_s = warm_up()
        cpus = int(__import__("ray").cluster_resources().get("CPU", 1))
        alone_spec, tasks_spec = run_spec(tasks=0), run_spec(tasks=max(2, cpus))
        with timed() as t_alone:
            alone = build_plan(alone_spec, open_store(alone_spec.store), in_tasks=True)
        with timed() as t_tasks:
            tasks = build_plan(tasks_spec, open_store(tasks_spec.store), in_tasks=True)
        same = sorted(alone.shard_payloads) == sorted(tasks.shard_payloads) and all(
            unpack(planned(alone, i)["payload"]) == unpack(planned(tasks, i)["payload"]) for i in alone.shard_payloads
        )
        if not same or tasks.planned_in_tasks < 2:
            raise SystemExit(f"the plan in parts ({tasks.planned_in_tasks} parts) differs from the driver's")
        del alone, tasks
        specs = [run_spec(k) for k in range(a.runs)]
        with timed() as t_separate:
            plans = [build_plan(s, open_store(s.store)) for s in specs]
        separate_mib = rows_mib(plans)
        del plans
        gc.collect()
        with timed() as t_shared:
            plans = build_plans(specs)
        shared_mib = rows_mib(plans)
        if len({p.layout.run_fp for p in plans}) != a.runs:
            raise SystemExit("the sweep's runs are not distinct runs")
        del plans
    finally:
        stop_ray()
    rec.emit("plan.samples", n, "samples")
    rec.emit("plan.ray_start", ray_s, "s")
    rec.emit("plan.warm_up_run", warm_s, "s")
    rec.emit("plan.driver_alone", t_alone["s"], "s")
    rec.emit(
        "plan.in_tasks",
        t_tasks["s"],
        f"s ({max(2, cpus)} parts: the driver's and {max(2, cpus) - 1} Ray tasks', their workers' start included)",
    )
    rec.emit("plan.ratio.driver_alone_vs_in_tasks", t_alone["s"] / t_tasks["s"], "x")
    rec.emit("plan.same_plan", True)
    rec.emit("plan.sweep.separately", t_separate["s"], f"s ({a.runs} runs, one reading each)")
    rec.emit("plan.sweep.shared", t_shared["s"], f"s ({a.runs} runs, one reading)")
    rec.emit("plan.sweep.ratio.separately_vs_shared", t_separate["s"] / t_shared["s"], "x")
    rec.emit(
        "plan.sweep.separately.rows_held", separate_mib, "MiB (the plans' rows on the driver until their cell runs)"
    )
    rec.emit("plan.sweep.shared.rows_held", shared_mib, "MiB (the plans' rows on the driver until their cell runs)")
    rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
