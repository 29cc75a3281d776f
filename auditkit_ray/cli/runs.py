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
    table = [("fingerprint", "created", "name", "model", "dataset", "metrics")]
    for r in rows:
        metrics = "  ".join(f"{k}={v['mean']:.4f}" for k, v in r["metrics"].items() if v["mean"] is not None)
        table.append((r["fingerprint"][:12], r["created_at"] or "-", r["name"] or "-", r["model"] or "-",
                      r["dataset"] or "-", metrics))
    widths = [max(len(str(row[i])) for row in table) for i in range(5)]  # columns padded to their widest cell
    for row in table:
        print("  ".join([f"{c:<{w}}" for c, w in zip(row, widths)] + [row[5]]).rstrip())


def _print_run(row: dict[str, Any]) -> None:
    """One run for a person: what it is, where it is, its metrics and tags (``--json`` has the config too)."""
    print(f"run {row['name']}  (fingerprint {row['fingerprint'][:12]}, created {row.get('created_at') or '-'})")
    for key in ("model", "dataset", "experiment", "result_uri", "store_uri", "generation_fingerprint"):
        if row.get(key):
            print(f"  {key.replace('_', ' ')}: {row[key]}")
    if row.get("metrics"):
        print("  metrics:")
        width = max(len(k) for k in row["metrics"])
        for k, v in row["metrics"].items():
            mean = "-" if v["mean"] is None else f"{v['mean']:.4f}"
            ci = "" if v.get("ci_low") is None else f"  [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
            print(f"    {k:<{width}}  {mean}{ci}  n={v['n']}  ({v['direction']})")
    if row.get("tags"):
        print("  tags: " + ", ".join(f"{k}={v}" for k, v in sorted(row["tags"].items())))


def _tags(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs or []:
        if "=" not in p:
            raise ConfigError(f"--tag {p!r}: write KEY=VALUE")
        k, v = p.split("=", 1)
        out[k] = v
    return out


def cmd_sync(args: argparse.Namespace) -> int:
    db = api.experiment_db(args.db)
    n = api.sync_runs(args.store, db=db)
    print(f"indexed {n} runs from {args.store} into {db.path}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    row = api.show_run(args.run, db=api.experiment_db(args.db))
    if args.json:
        emit(json.dumps(row, indent=2, default=str))
    else:
        _print_run(row)
    return EXIT_OK


def cmd_query(args: argparse.Namespace) -> int:
    rows = api.query_runs(db=api.experiment_db(args.db), model=args.model, dataset=args.dataset, name=args.name,
                          experiment=args.experiment, tags=_tags(args.tag), metrics=args.metric, since=args.since,
                          until=args.until)
    _print_runs(rows, args.json)
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    import argparse as _argparse

    common = _argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=None,
                        help="index path (default: $AUDITKIT_RAY_DB or ~/.auditkit-ray/experiments.sqlite)")
    common.add_argument("--json", action="store_true", help="print JSON")
    filters = _argparse.ArgumentParser(add_help=False)
    filters.add_argument("--model", help="model (substring)")
    filters.add_argument("--dataset", help="dataset (substring)")
    filters.add_argument("--name", help="run name (substring)")
    filters.add_argument("--experiment", help="experiment name")
    filters.add_argument("--tag", action="append", default=[], help="KEY=VALUE (repeatable)")
    filters.add_argument("--metric", action="append", default=[],
                         help="condition such as 'exact_match>=0.5' (repeatable)")
    filters.add_argument("--since", help="ISO date or time")
    filters.add_argument("--until", help="ISO date or time")

    r = sub.add_parser("runs", help="query the ExperimentDB index of runs",
                       description="The ExperimentDB: the SQLite index of every stored run.")
    actions = r.add_subparsers(dest="action", required=True, metavar="{list,query,show,sync}",
                               parser_class=type(r))
    for name, what in (("list", "every indexed run, oldest first (the same filters as query)"),
                       ("query", "the runs matching every filter")):
        q = actions.add_parser(name, parents=[common, filters], help=what, description=what)
        q.set_defaults(handler=cmd_query)
    s = actions.add_parser("show", parents=[common], help="one run: its metrics, tags and where it is",
                           description="One run of the index, named by a fingerprint prefix, run id or name; "
                                       "--json adds its configuration (secrets redacted).")
    s.add_argument("run", help="fingerprint prefix, run id or name")
    s.set_defaults(handler=cmd_show)
    y = actions.add_parser("sync", parents=[common], help="index every finished run of a result store",
                           description="Index every finished run of a result store (local or s3://).")
    y.add_argument("--store", default="results", help="result store to index (default: results)")
    y.set_defaults(handler=cmd_sync)
