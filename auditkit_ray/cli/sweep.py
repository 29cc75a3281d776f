"""``sweep``: run every run of a sweep file (or, with ``--dry-run``, show the plan)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from .. import api
from ..errors import EXIT_GATE, EXIT_OK, ConfigError, GateFailed
from .compare import add_decision_args, add_gate_args, decision_flags, gate_options, require_candidate
from .output import SweepStatus, emit, print_run
from .run import add_common, add_overrides


def cmd_sweep(args: argparse.Namespace) -> int:
    """``auditkit-ray sweep FILE``: run a sweep (or print its plan with ``--dry-run``). With a decision (the file's
    ``decision:`` section, or ``--margin``), every output leads with it and the last line is the decision. Exits
    1 when a cell failed (each is named with its reason), ``--fail-fast`` skipped some (each is named), a gate
    failed, or ``--require-candidate`` finds no candidate non-inferior; the others are finished and their
    leaderboard printed."""
    if args.dry_run:
        print(api.sweep_plan(args.file, address=args.address, store=args.store, overrides=args.set,
                             limit=args.limit).format())
        return EXIT_OK
    gates = gate_options(args)
    status = None if args.quiet else SweepStatus()
    result = api.sweep(args.file, address=args.address, progress=False, store=args.store,
                       fail_fast=args.fail_fast, events=args.events, on_event=status, overrides=args.set,
                       limit=args.limit, decision=decision_flags(args, args.baseline))
    rule = result.decision
    decision = api.decide(result.runs, rule, failed_cells=result.cells) if rule and result.runs else None
    if rule and decision is None and args.require_candidate:
        raise GateFailed(f"--require-candidate: sweep {result.name} has no finished run to decide on")
    baseline = _baseline_run(result, (rule or {}).get("baseline") or args.baseline)
    if gates["max_regression"] and baseline is None:
        raise ConfigError("--max-regression needs a baseline run (--baseline NAME, or the decision's baseline)")
    primary = (rule or {}).get("metric") or args.primary
    board = api.leaderboard(result.runs, failed_cells=result.cells, baseline=baseline,
                            metrics=_metrics(result.runs, primary), **gates) if len(result.runs) > 1 else None
    failed = bool(board is not None and board.failures) or (not board and _single_gates(result.runs, gates))
    code = EXIT_OK if result.ok and not failed else EXIT_GATE
    if args.json:
        emit(json.dumps({"name": result.name, "fingerprint": result.fingerprint, "manifest": result.manifest_uri,
                         "result": "ok" if result.ok and not failed else "failed",
                         "gpu_occupancy": result.gpu_occupancy,
                         "decision": decision.to_dict() if decision is not None else None,
                         "gates": [dataclasses.asdict(g) for g in board.gates] if board is not None else [],
                         "failed": [{"cell": c["name"], "reason": c["reason"], "attempts": c["attempts"],
                                     "runs": c["runs"]} for c in result.failed],
                         "skipped": [{"cell": c["name"], "reason": c["reason"], "runs": c["runs"]}
                                     for c in result.skipped],
                         "cells": result.cells, "runs": [json.loads(r.to_json()) for r in result.runs]}, indent=2))
        require_candidate(decision, args)
        return code
    print(sweep_header(result))
    for r in result.runs:
        print(f"  {r.name}  {r.fingerprint[:12]}  {r.perf.samples} samples")
    if decision is not None:
        print()
        print(decision.format())
        print()
    if board is not None:
        print(board.format(pairwise=args.pairwise))
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
        report = api.build_report(run_dirs, baseline=args.baseline or (rule or {}).get("baseline"),
                                  title=f"sweep {result.name}", failed_cells=result.cells,
                                  decision=rule or False, primary=primary, **gates)
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(api.render_report(report, "html"), encoding="utf-8")
        print(f"HTML report: {Path(args.report).resolve()}")
    if decision is not None:
        print(decision.headline())
    require_candidate(decision, args)
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


def _baseline_run(result: Any, name: str | None) -> Any:
    """The sweep's run named ``name`` (its name, or a fingerprint prefix), or None."""
    if not name:
        return None
    for r in result.runs:
        if name in (r.name, r.run_id) or (len(name) >= 6 and r.fingerprint.startswith(name)):
            return r
    return None


def _metrics(runs: list[Any], primary: str | None) -> list[str] | None:
    """Every metric of the runs, the primary one first (None: as the runs order them)."""
    if not primary:
        return None
    have = list(dict.fromkeys(m for r in runs for m in r.metrics))
    return [primary] + [m for m in have if m != primary] if primary in have else None


def _single_gates(runs: list[Any], gates: dict[str, Any]) -> bool:
    """A one-run sweep's threshold gates (a leaderboard needs two runs): whether one failed, each printed."""
    if not runs or not (gates["fail_under"] or gates["fail_over"]):
        return False
    board = api.leaderboard(runs, fail_under=gates["fail_under"], fail_over=gates["fail_over"])
    for g in board.gates:
        print(f"{'ok  ' if g.passed else 'FAIL'}  {g.reason}")
    return bool(board.failures)


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    w = sub.add_parser("sweep", help="run every run of a sweep file on Ray (resumes finished shards)")
    w.add_argument("file")
    w.add_argument("--dry-run", action="store_true", help="print the plan (runs, GPUs, what is done) without running")
    add_common(w)
    add_overrides(w, on="every run of the sweep (on its base; a grid key that sets the same field wins)")
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
                   help="the baseline run (its name in the sweep, or a fingerprint prefix): the report's, the "
                        "gates' and the decision's (over the decision: section's)")
    add_gate_args(w)
    add_decision_args(w, stored=True)
    w.set_defaults(handler=cmd_sweep)
