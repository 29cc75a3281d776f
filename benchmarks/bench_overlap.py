#!/usr/bin/env python
"""Workload 3: generation and a judge stage overlap (streaming).

    python benchmarks/bench_overlap.py [--smoke | --quick | --full]

Generation is the ``simulated`` backend (one logical GPU); the "judge" is a
custom metric that sleeps a fixed time per sample (``bench_metrics:SleepyJudge``,
registered as ``module:Class``), sized so both stages cost about the same.
Three runs in one Ray session:

1. generate only (no metrics): the generation stage alone;
2. re-score run 1's stored outputs with the judge (``rescore``: the
   ``precomputed`` backend): the judge stage alone;
3. generate and judge in one run: the stages stream into each other.

Figures: the three wall times, the sequential sum (1 + 2), and overlapped
(3) / slower stage alone. Goal: overlapped <= 1.15x the slower stage alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
# Ray workers import the judge as 'bench_metrics:SleepyJudge' (init_ray passes PYTHONPATH on)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [str(BENCH_DIR), os.environ.get("PYTHONPATH", "")] if p)
from _common import (  # noqa: E402
    Recorder,
    arith_records,
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

#: mode -> (shards, shard size, seconds per shard in each stage)
MODES = {"smoke": (3, 8, 0.1), "quick": (24, 32, 0.5), "full": (64, 64, 1.0)}
JUDGE = "bench_metrics:SleepyJudge"
FIXED_COST_S = 0.02
TOKENS = 32


def gen_spec(data: Path, store: Path, shard_size: int, per_shard_s: float, metrics: list[Any]) -> dict[str, Any]:
    return {
        "name": "overlap",
        "model": {"type": "simulated", "fixed_cost_s": FIXED_COST_S,
                  "per_token_s": (per_shard_s - FIXED_COST_S) / (TOKENS * shard_size),
                  "tokens_per_output": TOKENS, "batch_size": shard_size},
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"},
        "metrics": metrics,
        "execution": {"shard_size": shard_size, "generation_actors": 1, "scoring_actors": 1},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    a = ap.parse_args(argv)
    shards, shard_size, per_shard_s = MODES[a.mode]
    print_machine()
    rec = Recorder("overlap", a.mode)
    work = with_tmpdir("bench-overlap-")
    data = write_jsonl(work / "data.jsonl", arith_records(shards * shard_size))
    judge = {"name": JUDGE, "params": {"seconds": per_shard_s / shard_size}}
    rec.setting(shards=shards, shard_size=shard_size, stage_s_per_shard=per_shard_s, judge=judge)
    note(f"{shards} shards x {shard_size} samples; each stage ~{per_shard_s} s per shard "
         f"(~{shards * per_shard_s:.0f} s of work per stage); 1 generation actor, 1 scoring actor")
    rec.emit("overlap.ray_start", start_ray(num_gpus=1), "s")
    try:
        rec.emit("overlap.warm_up_run", warm_up(num_gpus=1), "s")
        from auditkit_ray.api import rescore_spec

        with timed() as t_gen:
            res_gen = call_quietly(lambda: run_spec(gen_spec(data, work / "s1", shard_size, per_shard_s, [])))
        run_dir = Path(res_gen.samples_path).parent
        rs = rescore_spec(str(run_dir), [JUDGE], None).model_dump(mode="json", by_alias=True, exclude_none=True)
        rs["metrics"] = [judge]
        rs["tracking"] = {"index": False}
        with timed() as t_judge:
            call_quietly(lambda: run_spec(rs))
        with timed() as t_both:
            res = call_quietly(lambda: run_spec(gen_spec(data, work / "s2", shard_size, per_shard_s, [judge])))
        if res.metrics["sleepy_judge"].n != shards * shard_size:
            raise SystemExit(
                f"the overlapped run scored {res.metrics['sleepy_judge'].n} samples, not {shards * shard_size}"
            )
    finally:
        stop_ray()
    gen_s, judge_s, both_s = t_gen["s"], t_judge["s"], t_both["s"]
    slower = max(gen_s, judge_s)
    rec.emit("overlap.generate_only", gen_s, "s")
    rec.emit("overlap.judge_only", judge_s, "s")
    rec.emit("overlap.sequential_sum", gen_s + judge_s, "s")
    rec.emit("overlap.overlapped", both_s, "s")
    rec.emit("overlap.ratio.overlapped_vs_slower_stage", both_s / slower, "x")
    rec.emit("overlap.ratio.overlapped_vs_sequential", both_s / (gen_s + judge_s), "x")
    rec.goal("overlapped_le_1.15x_slower_stage", both_s <= 1.15 * slower, f"{both_s / slower:.2f}x")
    rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
