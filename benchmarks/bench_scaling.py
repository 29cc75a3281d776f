#!/usr/bin/env python
"""Workload 2: scaling over generation actors on logical GPUs.

    python benchmarks/bench_scaling.py [--smoke | --quick | --full] [--actors 1,2,4,8,16,32]

The ``simulated`` backend (it sleeps like a GPU: ``fixed_cost_s`` per call
plus ``per_token_s`` x ``tokens_per_output`` x requests) on a local Ray
started with ``num_gpus`` logical GPUs, one generation actor per GPU. The
same total work (``shards`` x ``shard_size`` samples, exact_match scored) is
run with N = 1, 2, 4, ... 32 actors, each N in a fresh driver process (its
own local Ray, warmed up by one tiny run) so that the driver's memory of one
N does not carry into the next.

Ray Data is told to wait until the whole actor pool is up before handing
out shards (``DataContext.wait_for_min_actors_s``; by default the first
actors start alone and, on a small head node, drain much of a fixed workload
before the last ones are up), so ``first_shard_done`` - one shard's time is
the start-up of N actors.

Figures per N: wall time of ``evaluate`` (actor start-up included),
end-to-end throughput, steady-state throughput (shards finished while all N
actors were running: from the last actor's first shard to the first actor's
last shard, read from the per-sample table's ``worker.generated_at``),
efficiency = throughput / (N x one-actor throughput) for both, and the
driver's RSS (peak during the run, sampled every 50 ms).

Goals: steady-state efficiency >= 0.9 up to 16 actors; driver RSS flat in N
(peak within 10% of the one-actor run's).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    PY,
    ROOT,
    MiB,
    PeakRSS,
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

#: mode -> (actor counts, shards, shard size, seconds of simulated work per shard)
MODES = {
    "smoke": ([1, 2], 4, 8, 0.05),
    "quick": ([1, 2, 4, 8, 16, 32], 128, 64, 0.5),
    "full": ([1, 2, 4, 8, 16, 32], 256, 64, 1.0),
}
FIXED_COST_S = 0.02
TOKENS = 32


def spec(
    n_actors: int, data: Path, store: Path, shard_size: int, per_shard_s: float, scoring_actors: int
) -> dict[str, Any]:
    per_token = (per_shard_s - FIXED_COST_S) / (TOKENS * shard_size)
    return {
        "name": f"scaling-{n_actors}",
        "model": {"type": "simulated", "fixed_cost_s": FIXED_COST_S, "per_token_s": per_token,
                  "tokens_per_output": TOKENS, "batch_size": shard_size, "num_gpus": 1.0},
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"},
        "metrics": ["exact_match"],
        "execution": {"shard_size": shard_size, "generation_actors": n_actors, "scoring_actors": scoring_actors},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }


def shard_times(result: Any) -> list[tuple[int, str, float]]:
    """(shard, worker pid, generated_at) per shard, from the per-sample table."""
    from auditkit_ray.api import samples_table

    t = samples_table(result).select(["shard", "index", "worker"])
    out = {}
    for shard, idx, w in zip(
        t.column("shard").to_pylist(), t.column("index").to_pylist(), t.column("worker").to_pylist()
    ):
        if idx == 0:
            info = json.loads(w)
            out[shard] = (shard, f"{info.get('host')}:{info.get('pid')}", float(info["generated_at"]))
    return sorted(out.values())


def steady_throughput(times: list[tuple[int, str, float]], shard_size: int, n_actors: int) -> tuple[float | None, int]:
    """Samples/s over the window in which every actor was producing; also the
    number of shards in the window (None when the window is empty, or when
    fewer than ``n_actors`` actors ever produced a shard)."""
    by: dict[str, list[float]] = {}
    for _, w, t in times:
        by.setdefault(w, []).append(t)
    if len(by) < n_actors:
        return None, 0
    if len(by) == 1:
        ts = sorted(next(iter(by.values())))
        if len(ts) < 2:
            return None, 0
        return (len(ts) - 1) * shard_size / (ts[-1] - ts[0]), len(ts) - 1
    start = max(min(v) for v in by.values())
    end = min(max(v) for v in by.values())
    inside = [t for _, _, t in times if start < t <= end]
    if end <= start or not inside:
        return None, 0
    return len(inside) * shard_size / (end - start), len(inside)


def child(k: int, data: Path, store: Path, shards: int, shard_size: int, per_shard_s: float, scoring_actors: int,
          warm: bool = True) -> dict[str, Any]:
    """One actor count in a fresh driver process: its own Ray (``num_gpus=k``),
    a warm-up run, then the measured run with the driver's RSS sampled."""
    ray_s = start_ray(num_gpus=k)
    # Ray Data hands shards to actors as each one comes up; on a small head node
    # the Nth actor can start tens of seconds after the first, and the early ones
    # drain a fixed workload before the pool is whole. Wait for the whole pool so
    # that a window with all N actors producing exists (start-up stays in 'wall').
    from ray.data import DataContext

    DataContext.get_current().wait_for_min_actors_s = 600
    try:
        warm_s = warm_up(num_gpus=1) if warm else 0.0
        t_start = time.time()
        with PeakRSS() as mem, timed() as t:
            res = call_quietly(lambda: run_spec(spec(k, data, store, shard_size, per_shard_s, scoring_actors)))
    finally:
        stop_ray()
    times = shard_times(res)
    steady, in_window = steady_throughput(times, shard_size, k)
    n = shards * shard_size
    return {"ray_start": ray_s, "warm_up": warm_s, "wall": t["s"], "e2e": n / t["s"], "steady": steady,
            "rss_start": mem.start / MiB, "rss_peak": mem.peak / MiB, "workers": len({x[1] for x in times}),
            "in_window": in_window, "first_shard": min(x[2] for x in times) - t_start}


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--actors", help="comma-separated actor counts (default: by mode)")
    ap.add_argument("--scoring-actors", type=int, default=2)
    ap.add_argument("--child", nargs=3, metavar=("N", "WORK", "OUT"), help=__import__("argparse").SUPPRESS)
    a = ap.parse_args(argv)
    counts, shards, shard_size, per_shard_s = MODES[a.mode]
    if a.child:
        k, work, out = int(a.child[0]), Path(a.child[1]), Path(a.child[2])
        r = child(k, work / "data.jsonl", work / f"store-{k}", shards, shard_size, per_shard_s, a.scoring_actors,
                  warm=a.mode != "smoke")
        out.write_text(json.dumps(r))
        rmtree(work / f"store-{k}")
        return 0
    if a.actors:
        counts = [int(x) for x in a.actors.split(",")]
    print_machine()
    rec = Recorder("scaling", a.mode)
    n = shards * shard_size
    work = with_tmpdir("bench-scaling-")
    write_jsonl(work / "data.jsonl", arith_records(n))
    rec.setting(actor_counts=counts, shards=shards, shard_size=shard_size, batch_size=shard_size, samples=n,
                per_shard_s=per_shard_s, scoring_actors=a.scoring_actors)
    note(f"{n} samples = {shards} shards x {shard_size}; simulated {per_shard_s} s per shard (one backend call per "
         f"shard: batch = shard = {shard_size}); scoring actors {a.scoring_actors}; one driver process per actor count")
    rec.emit("scaling.shard_size", shard_size, "samples")
    rec.emit("scaling.batch_size", shard_size, "samples")
    rec.emit("scaling.ideal_one_actor_throughput", shard_size / per_shard_s, "samples/s")
    rows: dict[int, dict[str, Any]] = {}
    for k in counts:
        out = work / f"n{k}.json"
        mode_flag = f"--{a.mode}"
        proc = subprocess.run(
            [
                PY,
                __file__,
                mode_flag,
                "--scoring-actors",
                str(a.scoring_actors),
                "--child",
                str(k),
                str(work),
                str(out),
            ],
            cwd=str(ROOT),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SystemExit(
                f"N={k} failed (exit {proc.returncode}):\n" + "\n".join(proc.stderr.strip().splitlines()[-15:])
            )
        rows[k] = r = json.loads(out.read_text())
        note(
            f"  N={k:<3} wall {r['wall']:6.1f} s, {r['workers']} actors produced, first shard done after "
            f"{r['first_shard']:.1f} s, steady window {r['in_window']} shards, "
            f"steady {r['steady'] or 0:.0f} samples/s, "
            f"driver RSS {r['rss_start']:.0f} -> peak {r['rss_peak']:.0f} MiB"
        )
    rec.emit(
        "scaling.ray_start",
        sum(r["ray_start"] for r in rows.values()) / len(rows),
        "s (mean over the driver processes)",
    )
    base_e2e, base_steady = rows[counts[0]]["e2e"] / counts[0], (rows[counts[0]]["steady"] or 0) / counts[0]
    for k in counts:
        r = rows[k]
        rec.emit(f"scaling.n{k}.wall", r["wall"], "s")
        rec.emit(f"scaling.n{k}.first_shard_done", r["first_shard"], "s")
        rec.emit(f"scaling.n{k}.throughput_e2e", r["e2e"], "samples/s")
        rec.emit(f"scaling.n{k}.efficiency_e2e", r["e2e"] / (k * base_e2e), "")
        if r["steady"] is not None and base_steady:
            rec.emit(f"scaling.n{k}.throughput_steady", r["steady"], "samples/s")
            rec.emit(f"scaling.n{k}.efficiency_steady", r["steady"] / (k * base_steady), "")
        else:
            rec.emit(
                f"scaling.n{k}.efficiency_steady",
                "n/a",
                f"(no window with all {k} actors producing; {r['workers']} produced)",
            )
        rec.emit(f"scaling.n{k}.driver_rss_peak", r["rss_peak"], "MiB")
        rec.emit(f"scaling.n{k}.driver_rss_growth_in_run", r["rss_peak"] - r["rss_start"], "MiB")
    upto16 = [k for k in counts if 1 < k <= 16]
    effs = [rows[k]["steady"] / (k * base_steady) for k in upto16 if rows[k]["steady"] and base_steady]
    if upto16 and len(effs) == len(upto16):
        rec.goal("efficiency_ge_0.9_up_to_16", min(effs) >= 0.9, f"lowest {min(effs):.2f}")
    else:
        rec.goal("efficiency_ge_0.9_up_to_16", None, "not measured in this mode")
    peaks = [rows[k]["rss_peak"] for k in counts]
    growth = (max(peaks) - peaks[0]) / peaks[0]
    rec.emit("scaling.driver_rss_growth", growth * 100, f"% (peak, N={counts[0]} to the largest)")
    rec.goal("driver_rss_flat", growth <= 0.10, f"{growth * 100:+.1f}% peak vs N={counts[0]}")
    rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
