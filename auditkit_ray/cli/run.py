"""Commands that evaluate runs: ``run``, and over stored outputs ``generate`` and ``rescore``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import api
from ..errors import EXIT_OK
from .output import emit, print_run


def cmd_run(args: argparse.Namespace) -> int:
    """``auditkit-ray run FILE``: evaluate one run and print its summary (or its JSON)."""
    result = api.evaluate(args.file, address=args.address, progress=not args.quiet, store=args.store)
    if args.json:
        emit(result.to_json())
    elif not args.quiet:
        print_run(result)
    return EXIT_OK


def cmd_generate(args: argparse.Namespace) -> int:
    """``auditkit-ray generate FILE``: store a run's outputs without scoring them."""
    result = api.generate(args.file, address=args.address, progress=not args.quiet, store=args.store)
    path = result.samples_path
    run_dir = path.rsplit("/", 1)[0] if path.startswith("s3://") else Path(path).parent
    print(f"stored {result.perf.samples} outputs of '{result.name}' "
          f"(generation fingerprint {result.generation_fingerprint[:12]})")
    print(f"rescore them with: auditkit-ray rescore {run_dir} --metric exact_match")
    return EXIT_OK


def cmd_rescore(args: argparse.Namespace) -> int:
    """``auditkit-ray rescore RUN``: score a stored run's outputs again with other metrics."""
    result = api.rescore(args.run, metrics=args.metric, config=args.config, address=args.address,
                         progress=not args.quiet)
    if args.json:
        emit(result.to_json())
    else:
        print_run(result)
    return EXIT_OK


def add_run_parser(sub: Any) -> None:
    """Register ``run``."""
    r = sub.add_parser("run", help="evaluate one run file on Ray")
    r.add_argument("file")
    r.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else a local Ray)")
    r.add_argument("--store", default=None, help="result store root (overrides store.path)")
    r.add_argument("--quiet", action="store_true")
    r.add_argument("--json", action="store_true", help="print the RunResult JSON")
    r.set_defaults(handler=cmd_run)


def add_stored_parsers(sub: Any) -> None:
    """Register ``generate`` and ``rescore`` (listed after ``runs`` in ``--help``)."""
    g = sub.add_parser("generate", help="generate and store outputs only (no scoring)")
    g.add_argument("file")
    g.add_argument("--address", default=None)
    g.add_argument("--store", default=None)
    g.add_argument("--quiet", action="store_true")
    g.set_defaults(handler=cmd_generate)

    s = sub.add_parser("rescore", help="score a stored run's outputs again with other metrics (no GPU)")
    s.add_argument("run", help="a run directory or its result.json")
    s.add_argument("--metric", action="append", default=[], help="metric name (repeatable)")
    s.add_argument("--config", help="a run file whose metrics and annotators to apply")
    s.add_argument("--address", default=None)
    s.add_argument("--quiet", action="store_true")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_rescore)
