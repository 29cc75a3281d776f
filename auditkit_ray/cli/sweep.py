"""``sweep``: run every run of a sweep file (or, with ``--dry-run``, show the plan)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import api
from ..errors import EXIT_OK
from .output import emit, print_run


def cmd_sweep(args: argparse.Namespace) -> int:
    """``auditkit-ray sweep FILE``: run a sweep (or print its plan with ``--dry-run``)."""
    if args.dry_run:
        print(api.sweep_plan(args.file, address=args.address, store=args.store).format())
        return EXIT_OK
    result = api.sweep(args.file, address=args.address, progress=not args.quiet, store=args.store)
    if args.json:
        emit(json.dumps({"name": result.name, "fingerprint": result.fingerprint, "manifest": result.manifest_uri,
                         "cells": result.cells, "runs": [json.loads(r.to_json()) for r in result.runs]}, indent=2))
        return EXIT_OK
    print(f"sweep {result.name}: {len(result.runs)} runs, manifest {result.manifest_uri}")
    if len(result.runs) > 1:
        print(api.leaderboard(result.runs).format())
    else:
        for r in result.runs:
            print_run(r)
    if args.report:
        run_dirs = [str(Path(r.samples_path).parent) for r in result.runs if not r.samples_path.startswith("s3://")]
        report = api.build_report(run_dirs, baseline=args.baseline, title=f"sweep {result.name}")
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(api.render_report(report, "html"), encoding="utf-8")
        print(f"HTML report: {Path(args.report).resolve()}")
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    w = sub.add_parser("sweep", help="run every run of a sweep file on Ray (resumes finished shards)")
    w.add_argument("file")
    w.add_argument("--dry-run", action="store_true", help="print the plan (runs, GPUs, what is done) without running")
    w.add_argument("--address", default=None)
    w.add_argument("--store", default=None, help="result store root (overrides base.store.path)")
    w.add_argument("--quiet", action="store_true")
    w.add_argument("--json", action="store_true")
    w.add_argument("--report", default=None, metavar="FILE.html", help="also write the sweep's HTML report here")
    w.add_argument("--baseline", default=None,
                   help="with --report: the baseline run (name, label or fingerprint prefix)")
    w.set_defaults(handler=cmd_sweep)
