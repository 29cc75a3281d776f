"""``sweep``: run every run of a sweep file (or, with ``--dry-run``, show the plan)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import api
from ..errors import EXIT_GATE, EXIT_OK
from .output import SweepStatus, emit, print_run
from .run import add_common


def cmd_sweep(args: argparse.Namespace) -> int:
    """``auditkit-ray sweep FILE``: run a sweep (or print its plan with ``--dry-run``). Exits 1 when a cell
    failed (each is named with its reason) or ``--fail-fast`` skipped some (each is named); the others are
    finished and their leaderboard printed."""
    if args.dry_run:
        print(api.sweep_plan(args.file, address=args.address, store=args.store).format())
        return EXIT_OK
    status = None if args.quiet else SweepStatus()
    result = api.sweep(args.file, address=args.address, progress=False, store=args.store,
                       fail_fast=args.fail_fast, events=args.events, on_event=status)
    code = EXIT_OK if result.ok else EXIT_GATE
    if args.json:
        emit(json.dumps({"name": result.name, "fingerprint": result.fingerprint, "manifest": result.manifest_uri,
                         "result": "ok" if result.ok else "failed", "gpu_occupancy": result.gpu_occupancy,
                         "failed": [{"cell": c["name"], "reason": c["reason"], "attempts": c["attempts"],
                                     "runs": c["runs"]} for c in result.failed],
                         "skipped": [{"cell": c["name"], "reason": c["reason"], "runs": c["runs"]}
                                     for c in result.skipped],
                         "cells": result.cells, "runs": [json.loads(r.to_json()) for r in result.runs]}, indent=2))
        return code
    print(sweep_header(result))
    if len(result.runs) > 1:
        print(api.leaderboard(result.runs, failed_cells=result.cells).format(pairwise=args.pairwise))
    else:
        for r in result.runs:
            print_run(r)
    if result.failed:
        print(f"{len(result.failed)} of {len(result.cells)} cells failed (run the same command again to redo them):")
        for c in result.failed:
            print(f"  FAILED {c['name']}: {c['reason']} (attempts {c['attempts']}; runs {', '.join(c['runs'])})")
    if result.skipped:
        first = result.failed[0]["name"] if result.failed else "a failed cell"
        print(f"{len(result.skipped)} of {len(result.cells)} cells skipped by --fail-fast after {first} failed "
              "(run without --fail-fast, or again once it is fixed, to run them):")
        for c in result.skipped:
            print(f"  SKIPPED {c['name']} (runs {', '.join(c['runs'])})")
    if args.report and result.runs:
        run_dirs = [str(Path(r.samples_path).parent) for r in result.runs if not r.samples_path.startswith("s3://")]
        report = api.build_report(run_dirs, baseline=args.baseline, title=f"sweep {result.name}",
                                  failed_cells=result.cells)
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(api.render_report(report, "html"), encoding="utf-8")
        print(f"HTML report: {Path(args.report).resolve()}")
    return code


def sweep_header(result: Any) -> str:
    """``sweep ovn: 4 cells, 4 runs: 2 done, 2 failed; manifest URI``: the cells and runs the sweep has, and
    how many of them ended how (not only those that finished)."""
    cells = result.cells
    states = [c["state"] for c in cells]
    parts = [f"{states.count(s)} {s}" for s in ("done", "failed", "skipped") if states.count(s)]
    parts += [f"{n} {s}" for s in sorted(set(states) - {"done", "failed", "skipped"}) if (n := states.count(s))]
    n_runs = sum(len(c["runs"]) for c in cells)
    return (f"sweep {result.name}: {len(cells)} cell{'s' if len(cells) != 1 else ''}, {n_runs} "
            f"run{'s' if n_runs != 1 else ''}: {', '.join(parts) or 'none done'}; manifest {result.manifest_uri}")


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    w = sub.add_parser("sweep", help="run every run of a sweep file on Ray (resumes finished shards)")
    w.add_argument("file")
    w.add_argument("--dry-run", action="store_true", help="print the plan (runs, GPUs, what is done) without running")
    add_common(w)
    w.add_argument("--fail-fast", action="store_true",
                   help="start no new cell after the first failure (default: finish every cell that can)")
    w.add_argument("--events", default=None, metavar="FILE.jsonl",
                   help="append the sweep's events as JSON lines (cell started, shard done, cell done or failed, "
                   "sweep done)")
    w.add_argument("--json", action="store_true")
    w.add_argument("--pairwise", action="store_true",
                   help="also print the leaderboard's full matrix of Holm-adjusted pairwise p-values")
    w.add_argument("--report", default=None, metavar="FILE.html", help="also write the sweep's HTML report here")
    w.add_argument("--baseline", default=None,
                   help="with --report: the baseline run (name, label or fingerprint prefix)")
    w.set_defaults(handler=cmd_sweep)
