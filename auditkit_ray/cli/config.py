"""Commands about run and sweep files: ``validate``, ``schema``, ``metrics`` and ``init``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import api
from ..errors import EXIT_OK
from .output import emit
from .run import add_overrides


def cmd_validate(args: argparse.Namespace) -> int:
    """``auditkit-ray validate FILE``: check a run or sweep file and print its fingerprint(s)."""
    v = api.validate(args.file, read_data=not args.no_data, overrides=args.set, limit=args.limit)
    for where, n in v.datasets:
        print(f"{where}: {n} samples, every prompt built")
    if v.kind == "run":
        print(f"{args.file}: valid run '{v.name}' ({v.metrics} metrics, backend {v.backend}); "
              f"fingerprint {v.fingerprint[:12]}")
    else:
        print(f"{args.file}: valid sweep '{v.name}' ({len(v.runs)} runs)")
        for name, fp in v.runs:
            print(f"  {name}  {fp[:12]}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    """``auditkit-ray schema``: print the JSON Schema of run or sweep files."""
    print(json.dumps(api.schema(args.kind), indent=2))
    return EXIT_OK


def cmd_metrics(args: argparse.Namespace) -> int:
    """``auditkit-ray metrics``: list the built-in metrics with direction and requirements."""
    rows = api.list_metrics()
    if args.json:
        emit(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        arrow = "↑" if r["direction"] == "maximize" else "↓"
        req = ",".join(r["requires"]) or "-"
        print(f"{r['name']:<{width}}  {arrow} {r['direction']:<8}  {r['family']:<10}  requires {req:<12}  "
              f"{r['description']}")
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    """``auditkit-ray init [DIR]``: write the starter files and print the next steps."""
    written = api.init_project(args.dir, force=args.force)
    for p in written:
        print(f"wrote {p}")
    here = Path.cwd()
    cd = "" if Path(args.dir).resolve() == here.resolve() else f"cd {args.dir} && "
    print("next steps:")
    print(f"  {cd}auditkit-ray validate {api.STARTER_RUN_FILE}")
    print(f"  {cd}auditkit-ray run {api.STARTER_RUN_FILE}")
    print(f"  {cd}auditkit-ray sweep {api.STARTER_SWEEP_FILE}")
    print(f"  {cd}auditkit-ray report starter-sweep --format html --output report.html  # the sweep, by its name")
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    v = sub.add_parser("validate", help="check a run or sweep file and its data, and print its fingerprint(s)",
                       description="Check a run or sweep file, read each dataset and build every prompt as the run "
                                   "will, and print the fingerprint(s). Relative input paths (dataset.path, "
                                   "model.path, prompt.few_shot.path, retrieval.corpus) resolve against the file's "
                                   "folder, else the working directory.")
    v.add_argument("file")
    v.add_argument("--no-data", action="store_true",
                   help="check the file alone, without reading the datasets (for very large ones)")
    add_overrides(v)
    v.set_defaults(handler=cmd_validate)

    s = sub.add_parser("schema", help="print the JSON Schema of run or sweep files")
    s.add_argument("--kind", choices=["run", "sweep"], default="run")
    s.set_defaults(handler=cmd_schema)

    m = sub.add_parser("metrics", help="list the registered metrics with direction and requirements")
    m.add_argument("--json", action="store_true")
    m.set_defaults(handler=cmd_metrics)


def add_init_parser(sub: Any) -> None:
    """Register ``init`` (listed after ``report`` in ``--help``)."""
    i = sub.add_parser("init", help="write a starter run file, sweep file and tiny dataset that run with no model",
                       description="Write run.yaml, sweep.yaml and data/tiny.jsonl under DIR (default: the current "
                                   "directory). They use the echo backend, so they validate and run without a model.")
    i.add_argument("dir", nargs="?", default=".", metavar="DIR")
    i.add_argument("--force", action="store_true", help="overwrite existing files")
    i.set_defaults(handler=cmd_init)
