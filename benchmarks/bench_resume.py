#!/usr/bin/env python
"""Workload 5: the cost of resuming an interrupted run.

    python benchmarks/bench_resume.py [--smoke | --quick | --full] [--signal INT|KILL]

A ``simulated`` run is started in a child process (the driver, Ray started
locally inside it). When about half its shards are in the result store the
child is interrupted (Ctrl-C, i.e. SIGINT, by default; ``--signal KILL``
models a crash of the driver) and the same run is started again in a fresh
child: it resumes from the stored shards. An uninterrupted run of the same
spec into a fresh store, in that second child after the resumed run, is the
baseline.

Generation calls are counted in the Ray workers by wrapping the simulated
backend's ``generate`` (``bench_hooks.py``, installed through Ray's
``worker_process_setup_hook``; the package is not changed): a call that
began is counted even when the interruption cut it off.

Figures: calls and samples sent to the backend by the interrupted run, by
the resumed run, by the uninterrupted run, and the repeated work (total
minus uninterrupted). Goal: repeated work <= one shard's worth. The resumed
run's metrics must equal the uninterrupted run's (checked).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from _common import PY, ROOT, Recorder, arith_records, note, parser, print_machine, rmtree, with_tmpdir, write_jsonl  # noqa: E402
from bench_hooks import read_calls  # noqa: E402

#: mode -> (shards, shard size, seconds per shard)
MODES = {"smoke": (8, 8, 0.3), "quick": (32, 32, 0.3), "full": (64, 64, 0.5)}
FIXED_COST_S = 0.02
TOKENS = 32


def spec(data: Path, store: Path, shard_size: int, per_shard_s: float) -> dict[str, Any]:
    return {
        "name": "resume",
        "model": {"type": "simulated", "fixed_cost_s": FIXED_COST_S,
                  "per_token_s": (per_shard_s - FIXED_COST_S) / (TOKENS * shard_size),
                  "tokens_per_output": TOKENS, "batch_size": shard_size},
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"},
        "metrics": ["exact_match"],
        "execution": {"shard_size": shard_size, "generation_actors": 1, "scoring_actors": 1, "num_gpus": 1},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }


# ----------------------------------------------------------------------------- child: one driver
def _lines(path: str) -> int:
    return len(read_calls(path))


def worker(out_path: str, spec_paths: list[str]) -> int:
    """Run the specs one after the other in one local Ray; after each, record
    how many call-log lines exist (every call of a run is logged before its
    ``evaluate`` returns), so the parent can split the log by run."""
    import logging

    import ray

    from auditkit_ray.api import evaluate

    # a shell starting this tree in the background (``cmd &``) leaves SIGINT
    # ignored, and an ignored disposition survives exec: restore Ctrl-C
    signal.signal(signal.SIGINT, signal.default_int_handler)
    calls = os.environ["AUDITKIT_BENCH_CALLS"]
    pythonpath = os.pathsep.join(p for p in [str(BENCH_DIR), str(ROOT), os.environ.get("PYTHONPATH", "")] if p)
    # as auditkit_ray.pipeline.runtime.init_ray does, plus the call-counting hook
    ray.init(num_gpus=1, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath, "AUDITKIT_BENCH_CALLS": calls},
                          "worker_process_setup_hook": "bench_hooks.count_generate_calls"})
    results = []
    for sp in spec_paths:
        try:
            res = evaluate(json.loads(Path(sp).read_text()), progress=False)
        except KeyboardInterrupt:
            return 130
        results.append({"metrics": {k: [v.mean, v.n] for k, v in res.metrics.items()},
                        "samples": res.perf.samples, "generated": res.perf.generated, "log_lines": _lines(calls)})
        Path(out_path).write_text(json.dumps(results))
    return 0


# ----------------------------------------------------------------------------- parent
def run_child(specs: list[dict[str, Any]], work: Path, tag: str, calls: Path, interrupt_at: int | None, sig: int,
              shards_dir: Path) -> tuple[int, list[dict[str, Any]], float, int]:
    paths = []
    for k, sd in enumerate(specs):
        paths.append(work / f"{tag}-{k}.spec.json")
        paths[-1].write_text(json.dumps(sd))
    out = work / f"{tag}.out.json"
    env = {**os.environ, "AUDITKIT_BENCH_CALLS": str(calls)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([PY, __file__, "--worker", str(out), *map(str, paths)], cwd=str(ROOT), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done_at_signal = -1
    try:
        if interrupt_at is not None:
            while proc.poll() is None:
                done = len(list(shards_dir.glob("shard-*.parquet"))) if shards_dir.exists() else 0
                if done >= interrupt_at:
                    done_at_signal = done
                    proc.send_signal(sig)
                    break
                time.sleep(0.05)
        _, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:  # our own child only
            proc.kill()
            proc.wait()
    wall = time.perf_counter() - t0
    if interrupt_at is None and proc.returncode != 0:
        raise SystemExit(
            f"{tag} run failed (exit {proc.returncode}):\n" + "\n".join((err or "").strip().splitlines()[-15:])
        )
    results = json.loads(out.read_text()) if out.exists() else []
    return proc.returncode, results, wall, done_at_signal


def tally(rows: list[tuple[str, int, int, str]]) -> dict[str, int]:
    starts = [r for r in rows if r[0] == "start"]
    ends = [r for r in rows if r[0] == "end"]
    return {"calls": len(starts), "samples": sum(r[2] for r in starts), "completed": len(ends)}


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--signal", choices=["INT", "KILL"], default="INT")
    ap.add_argument("--worker", nargs="+", metavar="OUT SPEC", help=__import__("argparse").SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a.worker[0], a.worker[1:])
    shards, shard_size, per_shard_s = MODES[a.mode]
    print_machine()
    rec = Recorder("resume", a.mode)
    work = with_tmpdir("bench-resume-")
    data = write_jsonl(work / "data.jsonl", arith_records(shards * shard_size))
    rec.setting(shards=shards, shard_size=shard_size, per_shard_s=per_shard_s, signal=a.signal)
    note(
        f"{shards} shards x {shard_size} samples, {per_shard_s} s per shard; "
        f"interrupt with SIG{a.signal} at {shards // 2} shards"
    )

    from auditkit_ray.config.loader import run_spec_from_dict
    from auditkit_ray.pipeline.identity import generation_fingerprint, run_fingerprint
    from auditkit_ray.store.layout import RunLayout

    def layout_dir(store: Path) -> Path:
        rs = run_spec_from_dict(spec(data, store, shard_size, per_shard_s), "<bench>")
        return store / RunLayout(run_fingerprint(rs), generation_fingerprint(rs), shard_size).shards_dir

    sig = signal.SIGINT if a.signal == "INT" else signal.SIGKILL
    s1, s3 = work / "store-resumed", work / "store-uninterrupted"
    c1, c2 = work / "calls-interrupted.tsv", work / "calls-after.tsv"
    rc, _, wall1, at = run_child([spec(data, s1, shard_size, per_shard_s)], work, "interrupted", c1, shards // 2, sig,
                                 layout_dir(s1))
    if at < 0:
        raise SystemExit(f"the run finished (exit {rc}) before it could be interrupted; give it more shards")
    if rc == 0:
        raise SystemExit(f"SIG{a.signal} at {at} stored shards did not stop the run (exit 0)")
    stored = len(list(layout_dir(s1).glob("shard-*.parquet")))
    # the resumed run, then the uninterrupted baseline, in one fresh driver
    _, (res2, res3), wall23, _ = run_child(
        [spec(data, s1, shard_size, per_shard_s), spec(data, s3, shard_size, per_shard_s)],
        work,
        "after",
        c2,
        None,
        sig,
        layout_dir(s1),
    )
    if (
        res2["metrics"] != res3["metrics"]
        or res2["samples"] != res3["samples"]
        or res2["samples"] != shards * shard_size
    ):
        raise SystemExit(f"the resumed run differs from the uninterrupted one: {res2} vs {res3}")
    after = read_calls(str(c2))
    t1, t2, t3 = tally(read_calls(str(c1))), tally(after[: res2["log_lines"]]), tally(after[res2["log_lines"]:])
    repeated_calls = t1["calls"] + t2["calls"] - t3["calls"]
    repeated_samples = t1["samples"] + t2["samples"] - t3["samples"]
    rec.emit("resume.interrupted.exit_code", rc)
    rec.emit("resume.interrupted.shards_stored", stored, f"of {shards}")
    rec.emit("resume.interrupted.calls", t1["calls"], f"({t1['completed']} completed)")
    rec.emit("resume.resumed.calls", t2["calls"])
    rec.emit("resume.uninterrupted.calls", t3["calls"])
    rec.emit("resume.total.calls", t1["calls"] + t2["calls"])
    rec.emit("resume.repeated.calls", repeated_calls)
    rec.emit("resume.repeated.samples", repeated_samples, f"(shard = {shard_size})")
    rec.emit("resume.wall.interrupted_process", wall1, "s")
    rec.emit("resume.wall.resumed_and_uninterrupted_process", wall23, "s")
    rec.emit("resume.results_match_uninterrupted", True)
    rec.goal("repeated_le_one_shard", repeated_samples <= shard_size, f"{repeated_samples} samples repeated")
    rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
