#!/usr/bin/env python
"""Workload 6: merge and compare many runs.

    python benchmarks/bench_compare.py [--smoke | --quick | --full] [--runs 20] [--samples 100000]

Setup (untimed): ``--runs`` runs of ``--samples`` samples each are written
to a result store as the scoring stage writes them (per-sample Parquet
shards; each row carries exact_match, token_f1 and non_degenerate scores;
token_f1 values are continuous and paired: a shared per-sample difficulty
plus a per-run skill plus noise).

auditkit (its own process): the driver's ``merge`` of every run's shards
into a RunResult, then ``leaderboard(runs, metrics=["token_f1"],
n_resamples=1000)``: a bootstrap interval on every run's mean and a paired
test for every pair of runs (the leaderboard's pairwise test for a
non-binary mean metric is the paired sign-flip permutation test), Holm.

naive pandas (its own process, same statistics, 1000 resamples): read every
run's Parquet with pandas, parse the scores JSON column, mean per run,
bootstrap interval per run, an inner join per pair and a paired sign-flip
test on the joined differences in one (1000 x n) draw, Holm. Means and
rankings must agree (checked).

Figures: wall time of each phase and each process's peak RSS (``ru_maxrss``).
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, Recorder, arith_records, note, parser, print_machine, rmtree, with_tmpdir, write_jsonl  # noqa: E402

MODES = {"smoke": (3, 1_000), "quick": (20, 10_000), "full": (20, 100_000)}
RESAMPLES = 1000
METRIC = "token_f1"
SHARD = 10_000


def run_dict(r: int, data: Path, store: Path, shard_size: int) -> dict[str, Any]:
    return {
        "name": f"model-{r:02d}",
        "model": {"type": "echo", "prefix": f"m{r:02d} "},  # a different model identity per run
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "metrics": ["exact_match", "token_f1", "non_degenerate"],
        "execution": {"shard_size": shard_size},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }


def _plan(r: int, data: Path, store: Path, shard_size: int, n: int):
    """A Plan as the driver has it after the pipeline ran (no payloads)."""
    import math

    from auditkit_ray.config.loader import run_spec_from_dict
    from auditkit_ray.pipeline.plan import Plan, RunIdentity
    from auditkit_ray.store.base import open_store
    from auditkit_ray.store.layout import RunLayout

    spec = run_spec_from_dict(run_dict(r, data, store, shard_size), "<bench>")
    identity = RunIdentity.of(spec)
    layout = RunLayout(identity.run_fp, identity.gen_fp, shard_size)
    return Plan(spec=spec, store=open_store(spec.store), n_samples=n, layout=layout,
                n_shards=math.ceil(n / shard_size), identity=identity)


def write_runs(n_runs: int, n: int, data: Path, store: Path) -> None:
    """Per-sample shards, as ScoreStage writes them (actors.tables.run_table)."""
    from auditkit_ray.actors.tables import run_table

    recs = arith_records(n)
    rng = random.Random(1)
    difficulty = [rng.random() for _ in range(n)]
    shard_size = min(SHARD, n)
    for r in range(n_runs):
        plan = _plan(r, data, store, shard_size, n)
        skill = 0.35 + 0.01 * r
        for i in range(plan.n_shards):
            chunk = range(i * shard_size, min(n, (i + 1) * shard_size))
            items, targets, gens, scores = [], [], [], []
            for k in chunk:
                f1 = round(min(1.0, max(0.0, skill + 0.5 * (difficulty[k] - 0.5) + rng.gauss(0, 0.15))), 4)
                items.append({"request": {"sample_id": recs[k]["id"], "prompt": recs[k]["question"], "repeat": 0}})
                targets.append(recs[k]["answer"])
                gens.append({"text": f"answer {recs[k]['answer']}", "raw_text": f"answer {recs[k]['answer']}",
                             "completion_tokens": 2, "token_source": "tokenizer", "latency_s": 0.01,
                             "latency_scope": "batch", "finish_reason": "stop"})
                scores.append(
                    [
                        {
                            "name": "exact_match",
                            "value": 1.0 if f1 > 0.8 else 0.0,
                            "status": "scored",
                            "reason": None,
                            "metadata": {},
                        },
                        {"name": "token_f1", "value": f1, "status": "scored", "reason": None, "metadata": {}},
                        {"name": "non_degenerate", "value": 1.0, "status": "scored", "reason": None, "metadata": {}},
                    ]
                )
            table = run_table(i, items, targets, gens, [{}] * len(items), scores, {"host": "bench", "pid": 0})
            plan.store.write_table(plan.layout.shard(i), table)


# ----------------------------------------------------------------------------- children
def child_auditkit(n_runs: int, n: int, data: Path, store: Path) -> dict[str, Any]:
    from auditkit_ray.compare import leaderboard
    from auditkit_ray.pipeline.merge import merge

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    paths = []
    for r in range(n_runs):
        plan = _plan(r, data, store, min(SHARD, n), n)
        res = merge(plan, plan.store, wall_s=1.0, generated=n, generation_s=1.0, new_tokens=2 * n)
        plan.store.replace(plan.layout.result, res.to_json().encode("utf-8"))
        paths.append(str(store / plan.layout.result))
    t1 = time.perf_counter()
    lb = leaderboard(paths, metrics=[METRIC], n_resamples=RESAMPLES, seed=0)
    t2 = time.perf_counter()
    board = lb.metrics[METRIC]
    return {"merge_s": t1 - t0, "compare_s": t2 - t1, "rss_base_kib": rss0,
            "rss_peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "means": {e.run: e.mean for e in board.entries}, "order": board.order(), "pairs": len(board.pairwise),
            "significant": sum(1 for c in board.pairwise if c.significant)}


def child_pandas(n_runs: int, n: int, data: Path, store: Path) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    frames = {}
    for r in range(n_runs):
        plan = _plan(r, data, store, min(SHARD, n), n)
        df = pd.read_parquet(store / plan.layout.shards_dir, columns=["sample_id", "repeat", "scores"])
        df[METRIC] = df["scores"].map(lambda s: next(x["value"] for x in json.loads(s) if x["name"] == METRIC))
        frames[plan.spec.name] = df[["sample_id", "repeat", METRIC]]
    means = {k: float(v[METRIC].mean()) for k, v in frames.items()}
    t1 = time.perf_counter()
    rng = np.random.default_rng(0)
    for name, df in frames.items():  # bootstrap interval of each mean
        v = df[METRIC].to_numpy()
        idx = rng.integers(0, len(v), size=(RESAMPLES, len(v)))
        np.quantile(v[idx].mean(axis=1), [0.025, 0.975])
    names = sorted(frames, key=lambda k: -means[k])
    pvals = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            m = frames[names[i]].merge(frames[names[j]], on=["sample_id", "repeat"], suffixes=("_a", "_b"))
            d = (m[f"{METRIC}_b"] - m[f"{METRIC}_a"]).to_numpy()
            d = d[d != 0]
            signs = rng.choice([-1.0, 1.0], size=(RESAMPLES, len(d)))
            k = int(np.sum(np.abs(signs @ d) >= abs(d.sum()) - 1e-9))
            pvals.append((1 + k) / (1 + RESAMPLES))
    order = np.argsort(pvals)  # Holm
    adj, running, mcount = [0.0] * len(pvals), 0.0, len(pvals)
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (mcount - rank) * pvals[idx]))
        adj[idx] = running
    t2 = time.perf_counter()
    return {"merge_s": t1 - t0, "compare_s": t2 - t1, "rss_base_kib": rss0,
            "rss_peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "means": means, "order": names, "pairs": len(pvals), "significant": sum(1 for p in adj if p < 0.05)}


# ----------------------------------------------------------------------------- parent
def run_child(kind: str, args: list[str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run([PY, __file__, "--child", kind, *args], cwd=str(ROOT), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(
            f"{kind} failed (exit {proc.returncode}):\n" + "\n".join(proc.stderr.strip().splitlines()[-15:])
        )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    return out


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int)
    ap.add_argument("--samples", type=int)
    ap.add_argument("--child", help=__import__("argparse").SUPPRESS)
    ap.add_argument("--child-args", nargs=4, help=__import__("argparse").SUPPRESS)
    a, rest = ap.parse_known_args(argv)
    if a.child:
        n_runs, n, data, store = int(rest[0]), int(rest[1]), Path(rest[2]), Path(rest[3])
        fn = child_auditkit if a.child == "auditkit" else child_pandas
        print(json.dumps(fn(n_runs, n, data, store)))
        return 0
    n_runs, n = MODES[a.mode]
    n_runs, n = a.runs or n_runs, a.samples or n
    print_machine()
    rec = Recorder("compare", a.mode)
    work = with_tmpdir("bench-compare-")
    data = write_jsonl(work / "data.jsonl", arith_records(n))
    store = work / "store"
    t0 = time.perf_counter()
    write_runs(n_runs, n, data, store)
    note(f"setup: {n_runs} runs x {n} samples written in {time.perf_counter() - t0:.1f} s; "
         f"{RESAMPLES} resamples; metric {METRIC}; {n_runs * (n_runs - 1) // 2} pairs")
    rec.setting(runs=n_runs, samples=n, resamples=RESAMPLES, metric=METRIC)
    args = [str(n_runs), str(n), str(data), str(store)]
    ours = run_child("auditkit", args)
    naive = run_child("pandas", args)
    bad = [k for k in naive["means"] if abs(naive["means"][k] - ours["means"][k]) > 1e-9]
    if bad or ours["order"] != naive["order"] or ours["pairs"] != naive["pairs"]:
        raise SystemExit(f"auditkit and pandas disagree (means {bad}, order {ours['order']} vs {naive['order']})")
    for name, r in (("auditkit", ours), ("pandas", naive)):
        rec.emit(f"compare.{name}.merge", r["merge_s"], "s")
        rec.emit(f"compare.{name}.leaderboard", r["compare_s"], "s")
        rec.emit(f"compare.{name}.total", r["merge_s"] + r["compare_s"], "s")
        rec.emit(f"compare.{name}.peak_rss", r["rss_peak_kib"] / 1024, "MiB")
        rec.emit(f"compare.{name}.rss_after_imports", r["rss_base_kib"] / 1024, "MiB")
        rec.emit(f"compare.{name}.significant_pairs", r["significant"], f"of {r['pairs']}")
    rec.emit("compare.ratio.total.auditkit_vs_pandas",
             (ours["merge_s"] + ours["compare_s"]) / (naive["merge_s"] + naive["compare_s"]), "x")
    rec.emit("compare.ratio.peak_rss.auditkit_vs_pandas", ours["rss_peak_kib"] / naive["rss_peak_kib"], "x")
    rec.emit("compare.rankings_match_pandas", True)
    rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
