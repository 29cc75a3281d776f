"""Commands over stored runs' results: ``compare`` (two runs) and ``leaderboard`` (N runs)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import api
from ..errors import EXIT_OK, ConfigError, GateFailed
from .output import emit


def gate_options(args: argparse.Namespace) -> dict[str, Any]:
    """The gates of the command line (``--fail-under``, ``--fail-over``, ``--max-regression``) as keyword arguments."""
    return {"fail_under": api.parse_assignments(args.fail_under, "--fail-under"),
            "fail_over": api.parse_assignments(args.fail_over, "--fail-over"),
            "max_regression": api.parse_max_regression(args.max_regression) or None}


def cmd_compare(args: argparse.Namespace) -> int:
    """``auditkit-ray compare A B``: a candidate against a baseline; exit 1 when a grade or gate fails."""
    report = api.compare(
        args.baseline, args.candidate, metrics=args.metric or None, warn_at=args.warn_at, fail_at=args.fail_at,
        alpha=args.alpha, n_resamples=args.resamples, seed=args.seed, confidence=args.confidence, **gate_options(args),
    )
    emit(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) if args.json else report.format())
    report.raise_for_failures()  # GateFailed -> exit 1, reasons on stderr
    return EXIT_OK


def decision_flags(args: argparse.Namespace, baseline: str | None = None) -> dict[str, Any]:
    """The decision's fields the command line sets (``--primary``, ``--margin``, ``--prefer``,
    ``--decision-confidence``, ``--ni-method``; ``baseline``), to go over a sweep's stored rule."""
    return {"metric": args.primary, "margin": args.margin, "prefer": args.prefer, "method": args.ni_method,
            "confidence": args.decision_confidence, "baseline": baseline}


def require_candidate(decision: Any, args: argparse.Namespace) -> None:
    """``--require-candidate``: GateFailed (exit 1) naming the closest candidate and its bound when none qualifies."""
    if not getattr(args, "require_candidate", False):
        return
    if decision is None:
        raise ConfigError("--require-candidate needs a decision: --primary METRIC --margin X (or a sweep file's "
                          "decision: section)")
    if not decision.ok:
        raise GateFailed("--require-candidate: " + decision.headline().removeprefix("decision: "))


def ordered_metrics(primary: str | None, metrics: list[str] | None) -> list[str] | None:
    """The metrics with the primary one first (None: every metric, in the runs' order)."""
    if primary is None:
        return metrics
    return [primary] + [m for m in metrics or [] if m != primary] if metrics else None


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """``auditkit-ray leaderboard RUN...``: rank runs per metric, led by the decision when one is asked for; exit
    1 when a gate fails or ``--require-candidate`` finds no qualifying run."""
    rule = api.decision_rule(None, **decision_flags(args, args.baseline)) if args.margin is not None else None
    if rule is None and args.require_candidate:
        require_candidate(None, args)
    metrics = ordered_metrics(args.primary, args.metric)
    board = api.leaderboard(
        args.runs, metrics=metrics, confidence=args.confidence, binary_ci=args.binary_ci, alpha=args.alpha,
        n_resamples=args.resamples, seed=args.seed, cost_axis=args.cost_axis, quality=args.quality or None,
        baseline=args.baseline, **gate_options(args),
    )
    if args.primary is not None and metrics is None:  # every metric, the primary one first
        board.metrics = {args.primary: board.metrics[args.primary]} | board.metrics
    decision = api.decide(args.runs, rule, n_resamples=args.resamples, seed=args.seed) if rule else None
    if args.json:
        emit(json.dumps(board.to_dict() | ({"decision": decision.to_dict()} if decision else {}), indent=2,
                        ensure_ascii=False))
    else:
        emit((decision.format() + "\n\n" if decision else "") + board.format(pairwise=args.pairwise)
             + ("\n" + decision.headline() if decision else ""))
    board.raise_for_failures()
    require_candidate(decision, args)
    return EXIT_OK


def add_decision_args(q: argparse.ArgumentParser, *, stored: bool = False) -> None:
    """The decision's flags (sweep, leaderboard, report); ``stored``: the command reads a rule a sweep file or
    directory may hold, which they go over."""
    over = " (over the sweep's decision: section)" if stored else ""
    q.add_argument("--primary", default=None, metavar="METRIC",
                   help="the metric that matters (exact_match@number): ranks first everywhere, and the decision "
                        "tests it" + over)
    q.add_argument("--margin", default=None, metavar="X",
                   help="decide which run to ship: a candidate within X of the baseline (absolute, 0.02, or "
                        "relative, 2%%) by a one-sided paired non-inferiority test, Holm across candidates" + over)
    q.add_argument("--prefer", default=None, metavar="LIST",
                   help="among non-inferior runs prefer, in order: size, latency, cost, quality (default "
                        "size,latency,cost)")
    q.add_argument("--decision-confidence", type=float, default=None, metavar="C",
                   help="one-sided confidence of the decision (default 0.95: alpha 0.05)")
    q.add_argument("--ni-method", choices=["auto", "tango", "t", "bootstrap-t"], default=None,
                   help="the non-inferiority test (auto: Tango's score test for 0/1 scores, the studentized "
                        "bootstrap otherwise)")
    q.add_argument("--require-candidate", action="store_true",
                   help="exit 1 when no candidate is non-inferior (naming the closest and its bound)")


def add_gate_args(q: argparse.ArgumentParser) -> None:
    """The gates (``--fail-under``, ``--fail-over``, ``--max-regression``), declared here for every command that
    has them (compare, leaderboard, report); ``gate_options`` reads them back."""
    q.add_argument("--fail-under", action="append", metavar="METRIC=VALUE",
                   help="fail (exit 1) when METRIC's mean is under VALUE; only for higher-is-better metrics")
    q.add_argument("--fail-over", action="append", metavar="METRIC=VALUE",
                   help="fail (exit 1) when METRIC's mean is over VALUE; only for lower-is-better metrics")
    q.add_argument("--max-regression", action="append", metavar="[METRIC=]X",
                   help="fail (exit 1) when a metric got worse than the baseline (direction-aware) by more than X; "
                        "X absolute (0.02) or relative to the baseline (2%%); repeatable")


def add_stats_args(q: argparse.ArgumentParser) -> None:
    """The statistics' settings (``--alpha``, ``--confidence``, ``--resamples``, ``--seed``) of compare,
    leaderboard and report."""
    q.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    q.add_argument("--confidence", type=float, default=0.95, help="interval confidence (default 0.95)")
    q.add_argument("--resamples", type=int, default=10_000, help="bootstrap / permutation resamples (default 10000)")
    q.add_argument("--seed", type=int, default=0, help="resampling seed (default 0)")


def _add_selection_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("--metric", action="append", metavar="NAME", help="only these metrics (repeatable; default: all)")
    q.add_argument("--json", action="store_true", help="print the report as JSON")


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    c = sub.add_parser("compare", help="compare a candidate run with a baseline (direction-aware, paired tests, gates)",
                       description="Compare run B (candidate) with run A (baseline). Exit 0 when every metric passes "
                                   "its grade and every gate holds, 1 when a metric grades fail, a gate fails or no "
                                   "metric is comparable (different datasets, say), 2 on a usage error.")
    c.add_argument("baseline", help="baseline result.json or run directory")
    c.add_argument("candidate", help="candidate result.json or run directory")
    c.add_argument("--warn-at", default="1%", metavar="X",
                   help="grade warn when the regression exceeds X (absolute, or N%% of the baseline; default 1%%)")
    c.add_argument("--fail-at", default="5%", metavar="X",
                   help="grade fail (exit 1) when the regression exceeds X (default 5%%)")
    _add_selection_args(c)
    add_stats_args(c)
    add_gate_args(c)
    c.set_defaults(handler=cmd_compare)

    lb = sub.add_parser("leaderboard", help="rank runs per metric with intervals, pairwise tests and quality vs cost",
                        description="Rank runs per metric (direction-aware) with intervals, winners and ties, "
                                    "Holm-adjusted pairwise paired tests, and quality vs cost. Exit 0, 1 when a gate "
                                    "fails, 2 on a usage error.")
    lb.add_argument("runs", nargs="+", metavar="RUN", help="result.json files or run directories")
    lb.add_argument("--binary-ci", choices=["wilson", "clopper-pearson"], default="wilson",
                    help="interval for binary metrics (default wilson)")
    lb.add_argument("--cost-axis", default="auto",
                    help="Pareto cost axis: auto, cost, latency_p50_s, latency_p95_s, latency_p99_s, "
                         "model_size_bytes, tokens, completion_tokens, wall_s")
    lb.add_argument("--quality", action="append", metavar="METRIC",
                    help="metric(s) for the Pareto front (default: all)")
    lb.add_argument("--baseline", default=None, metavar="FILE",
                    help="baseline run: each run's paired test against it, --max-regression, and the decision")
    lb.add_argument("--pairwise", action="store_true",
                    help="also print the full matrix of Holm-adjusted pairwise p-values (always in --json)")
    _add_selection_args(lb)
    add_stats_args(lb)
    add_gate_args(lb)
    add_decision_args(lb)
    lb.set_defaults(handler=cmd_leaderboard)
