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
    spec = api.as_run_spec(args.file, overrides=args.set, limit=args.limit)
    with api.naming_file(args.file, spec):
        result = api.evaluate(spec, address=args.address, progress=not args.quiet, store=args.store)
    if args.json:
        emit(result.to_json())
    elif not args.quiet:
        print_run(result)
    return EXIT_OK


def cmd_generate(args: argparse.Namespace) -> int:
    """``auditkit-ray generate FILE``: store a run's outputs without scoring them."""
    spec = api.as_run_spec(args.file, overrides=args.set, limit=args.limit)
    with api.naming_file(args.file, spec):
        result = api.generate(spec, address=args.address, progress=not args.quiet, store=args.store)
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


def add_common(q: argparse.ArgumentParser, *, store: bool = True) -> None:
    """``--address``, ``--store`` and ``--quiet``, with one help text everywhere."""
    q.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else this machine's "
                                                   "warm local Ray, started by the first command and stopped after "
                                                   "10 idle minutes or by `auditkit-ray down`; AUDITKIT_RAY_WARM=0: "
                                                   "a private one per command)")
    if store:
        q.add_argument("--store", default=None, help="result store root, a folder or s3://bucket/prefix "
                                                     "(overrides the file's store.path)")
    q.add_argument("--quiet", action="store_true", help="no progress lines and no summary table")
    q.add_argument("--resident", action=argparse.BooleanOptionalAction, default=None,
                   help="keep the model loaded after the command, for the next one (default: on this machine's "
                        "clusters, off at --address; overrides execution.resident; `auditkit-ray status` lists "
                        "resident models, `evict` frees them)")


def add_overrides(q: argparse.ArgumentParser, on: str = "the file") -> None:
    """``--set KEY=VALUE`` and ``--limit N`` (lm-eval's habits); ``on``: what they apply to, for the help."""
    q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override a field of {on} (generation.temperature=0.7; repeatable); it enters the "
                        "fingerprint as the file would")
    q.add_argument("--limit", type=int, default=None, metavar="N",
                   help="only the first N samples (dataset.limit; part of the fingerprint)")


def add_run_parser(sub: Any) -> None:
    """Register ``run``."""
    r = sub.add_parser("run", help="evaluate one run file on Ray")
    r.add_argument("file")
    add_common(r)
    add_overrides(r)
    r.add_argument("--json", action="store_true", help="print the RunResult JSON")
    r.set_defaults(handler=cmd_run)


def add_stored_parsers(sub: Any) -> None:
    """Register ``generate`` and ``rescore`` (listed after ``runs`` in ``--help``)."""
    g = sub.add_parser("generate", help="generate and store outputs only (no scoring)")
    g.add_argument("file")
    add_common(g)
    add_overrides(g)
    g.set_defaults(handler=cmd_generate)

    s = sub.add_parser("rescore", help="score a stored run's outputs again with other metrics (no GPU)")
    s.add_argument("run", help="a run directory or its result.json")
    s.add_argument("--metric", action="append", default=[],
                   help="metric name, or NAME@ANNOTATION to score an annotator's output (exact_match@number), as "
                        "results name them (repeatable)")
    s.add_argument("--config", help="a run file whose metrics and annotators to apply")
    add_common(s, store=False)
    s.add_argument("--json", action="store_true", help="print the RunResult JSON")
    s.set_defaults(handler=cmd_rescore)
