#!/usr/bin/env python
"""Workload 12: how long the console script takes to stop on SIGTERM, against SIGINT in the same run.

    python benchmarks/bench_signals.py [--smoke | --quick | --full]

``auditkit-ray run`` and ``auditkit-ray sweep`` (two cells) are started on a
``simulated`` model whose shards take 0.6 s; once the first shard file is in
the store the command gets SIGINT or SIGTERM, and the figure is the time from
the signal to the command's exit. Each command runs on a private local
cluster (``AUDITKIT_RAY_WARM=0``: its stop includes stopping Ray) and, for
``run``, on the warm cluster as well (``auditkit-ray up`` in a home of the
benchmark's own, stopped at the end).

Every stop is checked, not only timed: exit 130 for SIGINT and 143 for
SIGTERM, and the first stderr line names the stored shards and how to resume.

Baseline: SIGINT on the same command in the same run. Goals: SIGTERM stops
within 1.5x SIGINT's time, and a sweep within 1.5x a run's (SIGINT, private).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from _common import CLI, Recorder, note, parser, print_machine, rmtree, with_tmpdir  # noqa: E402

#: mode -> (rounds per system and signal, systems)
MODES = {
    "smoke": (1, ["run-private"]),
    "quick": (3, ["run-private", "sweep-private", "run-warm"]),
    "full": (5, ["run-private", "sweep-private", "run-warm"]),
}
WORDS = {signal.SIGINT: ("interrupted", 130), signal.SIGTERM: ("terminated", 143)}


def config(work: Path, store: Path, sweep: bool) -> Path:
    data = work / "data.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"id": f"s{i:02d}", "q": f"q{i}", "a": "x"}) + "\n" for i in range(40)))
    run = {"name": "long", "dataset": {"path": str(data), "input_field": "q", "target_field": "a"},
           "model": {"type": "simulated", "fixed_cost_s": 0.6, "per_token_s": 0.0},
           "metrics": ["exact_match"], "execution": {"shard_size": 2, "generation_actors": 1},
           "store": {"path": str(store)}, "tracking": {"index": False}}
    doc = {"name": "sw", "base": run, "grid": {"model.fixed_cost_s": [0.6, 0.7]}} if sweep else run
    path = work / ("sweep.json" if sweep else "run.json")
    path.write_text(json.dumps(doc))
    return path


def stop_once(system: str, sig: signal.Signals, work: Path, env: dict[str, str]) -> float:
    """Start the command, signal it once a shard is stored, return seconds from the signal to its exit."""
    command = system.split("-")[0]
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)
    cfg = config(work, store, sweep=command == "sweep")
    # SIGINT taken as a terminal's Ctrl-C is, whatever this benchmark inherited (a script's `&` ignores it)
    p = subprocess.Popen([CLI, command, str(cfg), "--quiet"], cwd=work, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while p.poll() is None and not any(store.glob("**/shard-*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.02)
    if p.poll() is not None:
        raise SystemExit(f"{system}: the command ended (exit {p.returncode}) before a shard was stored:\n"
                         + p.stderr.read())
    t0 = time.perf_counter()
    p.send_signal(sig)
    _, err = p.communicate(timeout=300)
    took = time.perf_counter() - t0
    word, code = WORDS[sig]
    first = next((ln for ln in err.splitlines() if ln.strip()), "")
    if p.returncode != code or not first.startswith(f"{word}: ") or "run the same command again" not in first:
        raise SystemExit(f"{system} {sig.name}: exit {p.returncode}, stderr:\n{err}")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    a = ap.parse_args(argv)
    rounds, systems = MODES[a.mode]
    print_machine()
    rec = Recorder("signals", a.mode)
    rec.setting(rounds=rounds, systems=systems, shards=20, shard_s=0.6)
    work = with_tmpdir("bench-signals-")
    base = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    envs = {"private": {**base, "AUDITKIT_RAY_WARM": "0"},
            "warm": {**base, "AUDITKIT_RAY_WARM": "1", "AUDITKIT_RAY_HOME": str(work / "home")}}
    medians: dict[tuple[str, str], float] = {}
    warm = any(s.endswith("-warm") for s in systems)
    try:
        if warm:
            subprocess.run([CLI, "up"], cwd=work, env=envs["warm"], check=True, capture_output=True, timeout=300)
        for system in systems:
            env = envs[system.split("-")[1]]
            for sig in (signal.SIGINT, signal.SIGTERM):
                times = [stop_once(system, sig, work, env) for _ in range(rounds)]
                note(f"{system} {sig.name}: " + ", ".join(f"{t:.2f} s" for t in times))
                medians[system, sig.name] = statistics.median(times)
                rec.emit(f"signals.{system}.{sig.name}.stop", medians[system, sig.name], "s (median)")
            rec.emit(f"signals.ratio.{system}.term_vs_int",
                     medians[system, "SIGTERM"] / medians[system, "SIGINT"], "x")
    finally:
        if warm:
            subprocess.run([CLI, "down"], cwd=work, env=envs["warm"], capture_output=True, timeout=300)
        rmtree(work)
    worst = max(medians[s, "SIGTERM"] / medians[s, "SIGINT"] for s in systems)
    rec.goal("term_le_1.5x_int", worst <= 1.5, f"worst {worst:.2f}x")
    if ("sweep-private", "SIGINT") in medians:
        ratio = medians["sweep-private", "SIGINT"] / medians["run-private", "SIGINT"]
        rec.emit("signals.ratio.sweep_vs_run", ratio, "x")
        rec.goal("sweep_le_1.5x_run", ratio <= 1.5, f"{ratio:.2f}x")
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
