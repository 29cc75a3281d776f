"""``runs``: query the ExperimentDB, the SQLite index of stored runs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import api
from ..errors import EXIT_OK, ConfigError
from .output import emit


def _print_runs(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        emit(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        print("no runs")
        return
    for r in rows:
        metrics = "  ".join(f"{k}={v['mean']:.4f}" for k, v in r["metrics"].items() if v["mean"] is not None)
        print(f"{r['fingerprint'][:12]}  {r['created_at'] or '-':<25}  {r['name']:<30}  {r['model'] or '-'}  "
              f"{r['dataset'] or '-'}  {metrics}")


def _tags(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs or []:
        if "=" not in p:
            raise ConfigError(f"--tag {p!r}: write KEY=VALUE")
        k, v = p.split("=", 1)
        out[k] = v
    return out


def cmd_runs(args: argparse.Namespace) -> int:
    """``auditkit-ray runs list|query|show|sync``: the ExperimentDB index of runs."""
    db = api.experiment_db(args.db)
    if args.action == "sync":
        n = api.sync_runs(args.store, db=db)
        print(f"indexed {n} runs from {args.store} into {db.path}")
        return EXIT_OK
    if args.action == "show":
        if not args.run:
            raise ConfigError("runs show: give a fingerprint prefix, run id or name")
        emit(json.dumps(api.show_run(args.run, db=db), indent=2, default=str))
        return EXIT_OK
    rows = api.query_runs(db=db, model=args.model, dataset=args.dataset, name=args.name, experiment=args.experiment,
                          tags=_tags(args.tag), metrics=args.metric, since=args.since, until=args.until)
    _print_runs(rows, args.json)
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    r = sub.add_parser("runs", help="query the ExperimentDB index of runs")
    r.add_argument("action", choices=["list", "query", "show", "sync"])
    r.add_argument("run", nargs="?", help="fingerprint prefix, run id or name (show)")
    r.add_argument("--db", default=None,
                   help="index path (default: $AUDITKIT_RAY_DB or ~/.auditkit-ray/experiments.sqlite)")
    r.add_argument("--store", default="results", help="result store to index (sync)")
    r.add_argument("--model")
    r.add_argument("--dataset")
    r.add_argument("--name")
    r.add_argument("--experiment")
    r.add_argument("--tag", action="append", default=[], help="KEY=VALUE (repeatable)")
    r.add_argument("--metric", action="append", default=[], help="condition such as 'exact_match>=0.5' (repeatable)")
    r.add_argument("--since", help="ISO date or time")
    r.add_argument("--until", help="ISO date or time")
    r.add_argument("--json", action="store_true")
    r.set_defaults(handler=cmd_runs)
