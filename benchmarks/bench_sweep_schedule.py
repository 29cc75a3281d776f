#!/usr/bin/env python
"""Workload 10 (issue 37's workload 9): how well a sweep packs its cells onto the cluster's GPUs.

    python benchmarks/bench_sweep_schedule.py [--smoke | --quick | --full] [--json FILE]

A sweep of ``simulated`` cells of mixed sizes (1, 2, 4 and 8 GPUs, as a
night of 7B to 70B models has; the larger, the longer) runs on a local Ray
with 8 logical GPUs, once in the file's order (``execution.cell_order:
fifo``, the queue that keeps its order and waits) and once packed (``pack``:
largest first, smaller cells backfilled into free GPUs). The cells' order in
the file is shuffled with a fixed seed. Each policy gets its own result
store, so both do all the work.

Figures per policy: the makespan (first cell started to last cell ended),
the lower bound max(total GPU-seconds / GPUs, the longest cell) from the
cells' own measured durations in that run, their ratio, and the sweep's GPU
occupancy. Goal: packed makespan <= 1.15x its lower bound.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    Recorder,
    arith_records,
    call_quietly,
    note,
    parser,
    print_machine,
    rmtree,
    start_ray,
    stop_ray,
    warm_up,
    with_tmpdir,
    write_jsonl,
)

GPUS = 8
#: mode -> cells of each size {gpus: (count, seconds of simulated work per shard)}, shards per cell
MODES: dict[str, tuple[dict[int, tuple[int, float]], int]] = {
    "smoke": ({1: (3, 0.2), 2: (2, 0.3), 4: (2, 0.4), 8: (1, 0.5)}, 2),
    "quick": ({1: (10, 1.0), 2: (5, 1.5), 4: (3, 2.0), 8: (2, 3.0)}, 2),
    "full": ({1: (20, 1.5), 2: (10, 2.5), 4: (6, 3.5), 8: (4, 5.0)}, 2),
}
SHARD = 4


def sweep_doc(data: Path, store: Path, sizes: dict[int, tuple[int, float]], order: str) -> dict[str, Any]:
    runs = []
    for gpus, (count, per_shard) in sizes.items():
        for k in range(count):
            runs.append({"name": f"g{gpus}-{k}", "model": {
                "type": "simulated", "fixed_cost_s": per_shard, "per_token_s": 0.0, "num_gpus": gpus,
                "constant": f"g{gpus}-{k}", "output": "constant", "batch_size": SHARD}})
    random.Random(9).shuffle(runs)
    return {"name": f"schedule-{order}", "base": {
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "metrics": ["exact_match"],
        "execution": {"shard_size": SHARD, "cell_order": order},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }, "runs": runs}


def measure(cells: list[dict[str, Any]]) -> dict[str, float]:
    start = min(c["started"] for c in cells)
    makespan = max(c["ended"] for c in cells) - start
    durations = [(c["gpus"], c["ended"] - c["started"]) for c in cells]
    bound = max(sum(g * d for g, d in durations) / GPUS, max(d for _, d in durations))
    return {"makespan": makespan, "bound": bound, "ratio": makespan / bound}


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    a = ap.parse_args(argv)
    sizes, shards = MODES[a.mode]
    rec = Recorder("sweep_schedule", a.mode)
    rec.setting(gpus=GPUS, sizes={str(k): v for k, v in sizes.items()}, shards_per_cell=shards)
    print_machine()
    from auditkit_ray.config import SweepSpec
    from auditkit_ray.pipeline.sweep import run_sweep

    work = with_tmpdir("bench-sweep-schedule-")
    try:
        data = write_jsonl(work / "d.jsonl", arith_records(SHARD * shards))
        # logical CPUs as a GPU node has them: the scoring actors of 8 cells at once each take one
        rec.emit("schedule.ray_start", start_ray(num_cpus=2 * GPUS, num_gpus=GPUS), "s")
        warm_up(GPUS)
        out = {}
        for order in ("fifo", "pack"):
            doc = sweep_doc(data, work / f"store-{order}", sizes, order)
            note(f"{order}: {len(doc['runs'])} cells")
            res = call_quietly(lambda doc=doc: run_sweep(SweepSpec(**doc), progress=False))
            if not res.ok:
                raise SystemExit(f"{order}: cells failed: {res.failed}")
            out[order] = measure(res.cells) | {"occupancy": res.gpu_occupancy or 0.0}
    finally:
        stop_ray()
        rmtree(work)
    n = sum(c for c, _ in sizes.values())
    for order, m in out.items():
        rec.emit(f"schedule.{order}.makespan", m["makespan"], f"s ({n} cells on {GPUS} GPUs)")
        rec.emit(f"schedule.{order}.lower_bound", m["bound"], "s (max(GPU-seconds / GPUs, longest cell))")
        rec.emit(f"schedule.{order}.ratio", m["ratio"], "x the lower bound")
        rec.emit(f"schedule.{order}.gpu_occupancy", m["occupancy"], "of the GPUs' time")
    rec.emit("schedule.ratio.fifo_vs_pack", out["fifo"]["makespan"] / out["pack"]["makespan"], "x")
    rec.goal("pack_le_1.15x_lower_bound", out["pack"]["ratio"] <= 1.15 if a.mode != "smoke" else None,
             f"{out['pack']['ratio']:.3f}x" + (" (smoke: not a measurement)" if a.mode == "smoke" else ""))
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
