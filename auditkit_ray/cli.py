"""The ``auditkit-ray`` command: a thin layer over the public functions.

``main(argv) -> int``; exit codes: 0 ok, 1 a gate failed, 2 usage or
configuration error, 130 interrupted. User mistakes print one line to
stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from typing import Callable, Sequence

from ._version import __version__
from .cli_output import emit, json_stdout
from .errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, AuditKitError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, as argparse does
        self.print_usage(sys.stderr)
        raise _UsageError(f"{self.prog}: {message}")


class _UsageError(Exception):
    pass


def _cwd_on_path() -> None:
    # custom metrics named 'module:Class' import from the working directory
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


# ----------------------------------------------------------------------------- commands
def cmd_validate(args: argparse.Namespace) -> int:
    from .config import RunSpec, expand, load_config
    from .config.identity import run_fingerprint

    spec = load_config(args.file)
    if isinstance(spec, RunSpec):
        fp = run_fingerprint(spec)
        print(f"{args.file}: valid run '{spec.name}' ({len(spec.metrics)} metrics, backend {spec.model.type}); fingerprint {fp[:12]}")
    else:
        runs = expand(spec, source=args.file)
        print(f"{args.file}: valid sweep '{spec.name}' ({len(runs)} runs)")
        for r in runs:
            print(f"  {r.name}  {run_fingerprint(r)[:12]}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from .config import json_schema

    print(json.dumps(json_schema(args.kind), indent=2))
    return EXIT_OK


def cmd_metrics(args: argparse.Namespace) -> int:
    from .core.metric import metric_info
    from .core.registry import builtin_names, resolve_metric

    rows = [metric_info(resolve_metric(n)) | {"name": n} for n in builtin_names()]
    if args.json:
        emit(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        arrow = "↑" if r["direction"] == "maximize" else "↓"
        req = ",".join(r["requires"]) or "-"
        print(f"{r['name']:<{width}}  {arrow} {r['direction']:<8}  {r['family']:<10}  requires {req:<12}  {r['description']}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from .api import evaluate
    from .config import load_run_spec
    from .report.terminal import print_run

    spec = load_run_spec(args.file)
    if args.store:
        spec.store.path = args.store
    result = evaluate(spec, address=args.address, progress=not args.quiet)
    if args.json:
        emit(result.to_json())
    elif not args.quiet:
        print_run(result)
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare
    from .compare.gates import parse_assignments, parse_max_regression

    report = compare(
        args.baseline, args.candidate, metrics=args.metric or None, warn_at=args.warn_at, fail_at=args.fail_at,
        alpha=args.alpha, n_resamples=args.resamples, seed=args.seed, confidence=args.confidence,
        fail_under=parse_assignments(args.fail_under, "--fail-under"), fail_over=parse_assignments(args.fail_over, "--fail-over"),
        max_regression=parse_max_regression(args.max_regression) or None,
    )
    emit(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) if args.json else report.format())
    report.raise_for_failures()  # GateFailed -> exit 1, reasons on stderr
    return EXIT_OK


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from .compare import leaderboard
    from .compare.gates import parse_assignments, parse_max_regression

    board = leaderboard(
        args.runs, metrics=args.metric or None, confidence=args.confidence, binary_ci=args.binary_ci, alpha=args.alpha,
        n_resamples=args.resamples, seed=args.seed, cost_axis=args.cost_axis, quality=args.quality or None,
        fail_under=parse_assignments(args.fail_under, "--fail-under"), fail_over=parse_assignments(args.fail_over, "--fail-over"),
        baseline=args.baseline, max_regression=parse_max_regression(args.max_regression) or None,
    )
    emit(json.dumps(board.to_dict(), indent=2, ensure_ascii=False) if args.json else board.format())
    board.raise_for_failures()
    return EXIT_OK


def _add_gate_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("--fail-under", action="append", metavar="METRIC=VALUE",
                   help="fail (exit 1) when METRIC's mean is under VALUE; only for higher-is-better metrics")
    q.add_argument("--fail-over", action="append", metavar="METRIC=VALUE",
                   help="fail (exit 1) when METRIC's mean is over VALUE; only for lower-is-better metrics")
    q.add_argument("--max-regression", action="append", metavar="[METRIC=]X",
                   help="fail (exit 1) when a metric got worse than the baseline (direction-aware) by more than X; "
                        "X absolute (0.02) or relative to the baseline (2%%); repeatable")


def _add_stats_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("--metric", action="append", metavar="NAME", help="only these metrics (repeatable; default: all)")
    q.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    q.add_argument("--confidence", type=float, default=0.95, help="interval confidence (default 0.95)")
    q.add_argument("--resamples", type=int, default=10_000, help="bootstrap / permutation resamples (default 10000)")
    q.add_argument("--seed", type=int, default=0, help="resampling seed (default 0)")
    q.add_argument("--json", action="store_true", help="print the report as JSON")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "validate": cmd_validate,
    "schema": cmd_schema,
    "metrics": cmd_metrics,
    "run": cmd_run,
    "compare": cmd_compare,
    "leaderboard": cmd_leaderboard,
}


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="auditkit-ray", description="Distributed batch evaluation of language models and agents on Ray.")
    p.add_argument("--version", action="version", version=f"auditkit-ray {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    v = sub.add_parser("validate", help="check a run or sweep file and print its fingerprint(s)")
    v.add_argument("file")

    s = sub.add_parser("schema", help="print the JSON Schema of run or sweep files")
    s.add_argument("--kind", choices=["run", "sweep"], default="run")

    m = sub.add_parser("metrics", help="list the registered metrics with direction and requirements")
    m.add_argument("--json", action="store_true")

    r = sub.add_parser("run", help="evaluate one run file on Ray")
    r.add_argument("file")
    r.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else a local Ray)")
    r.add_argument("--store", default=None, help="result store root (overrides store.path)")
    r.add_argument("--quiet", action="store_true")
    r.add_argument("--json", action="store_true", help="print the RunResult JSON")

    c = sub.add_parser("compare", help="compare a candidate run with a baseline (direction-aware, paired tests, gates)",
                       description="Compare run B (candidate) with run A (baseline). Exit 0 when every metric passes its grade "
                                   "and every gate holds, 1 when a metric grades fail or a gate fails, 2 on a usage error.")
    c.add_argument("baseline", help="baseline result.json or run directory")
    c.add_argument("candidate", help="candidate result.json or run directory")
    c.add_argument("--warn-at", default="1%", metavar="X", help="grade warn when the regression exceeds X (absolute, or N%% of the baseline; default 1%%)")
    c.add_argument("--fail-at", default="5%", metavar="X", help="grade fail (exit 1) when the regression exceeds X (default 5%%)")
    _add_stats_args(c)
    _add_gate_args(c)

    lb = sub.add_parser("leaderboard", help="rank runs per metric with intervals, pairwise tests and quality vs cost",
                        description="Rank runs per metric (direction-aware) with intervals, winners and ties, Holm-adjusted "
                                    "pairwise paired tests, and quality vs cost. Exit 0, 1 when a gate fails, 2 on a usage error.")
    lb.add_argument("runs", nargs="+", metavar="RUN", help="result.json files or run directories")
    lb.add_argument("--binary-ci", choices=["wilson", "clopper-pearson"], default="wilson", help="interval for binary metrics (default wilson)")
    lb.add_argument("--cost-axis", default="auto", help="Pareto cost axis: auto, cost, latency_p50_s, latency_p95_s, latency_p99_s, "
                                                        "model_size_bytes, tokens, completion_tokens, wall_s")
    lb.add_argument("--quality", action="append", metavar="METRIC", help="metric(s) for the Pareto front (default: all)")
    lb.add_argument("--baseline", default=None, metavar="FILE", help="baseline run for --max-regression")
    _add_stats_args(lb)
    _add_gate_args(lb)
    from . import cli_lmeval, cli_report, cli_runs

    COMMANDS.update(cli_runs.add_parsers(sub))
    COMMANDS.update(cli_report.add_parsers(sub))
    COMMANDS.update(cli_lmeval.add_parsers(sub))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        if not args.command:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        _cwd_on_path()
        with json_stdout(bool(getattr(args, "json", False))):
            return COMMANDS[args.command](args)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except AuditKitError as exc:
        from .core.secrets import scrub_text

        print(f"error: {scrub_text(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # argparse --help / --version
        return int(exc.code or 0)


def entrypoint() -> None:  # console script
    code = main()
    sys.stdout.flush()
    sys.stdout = sys.stderr  # what Ray prints while it shuts down at exit is not the command's output
    # The interpreter's last garbage collection walks every object the run left (Ray, Arrow, pandas,
    # metrics): ~0.4 s at the exit of each command. Nothing is left to collect that a finished command
    # needs collected: freeze them out of it. The exit hooks (Ray's shutdown) still run.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # python -m auditkit_ray.cli
    entrypoint()
