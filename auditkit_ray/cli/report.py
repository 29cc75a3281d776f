"""``report``: Markdown, JUnit XML, HTML, JSON, badge or text from stored runs and sweeps.

The report is written first (stdout, or ``--output FILE`` atomically), then
the command exits 1 when a gate (``--fail-under``, ``--fail-over``,
``--max-regression``) fails, like ``compare`` and ``leaderboard``; 2 on a
usage error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import api
from ..errors import EXIT_OK, ConfigError
from .compare import add_decision_args, add_gate_args, add_stats_args, decision_flags, gate_options, require_candidate
from .output import write_output


def cmd_report(args: argparse.Namespace) -> int:
    """``auditkit-ray report RUN...``: write a report (led by the decision when a sweep's rule or ``--margin`` asks
    for one), then exit 1 when a gate fails or ``--require-candidate`` finds no qualifying run."""
    if args.resamples < 1:
        raise ConfigError("--resamples must be at least 1")
    if args.samples < 0:
        raise ConfigError("--samples must be 0 or more")
    report = api.build_report(
        args.runs, stores=args.store, metrics=args.metric or None, baseline=args.baseline, title=args.title,
        **gate_options(args),
        confidence=args.confidence, alpha=args.alpha, n_resamples=args.resamples, seed=args.seed,
        cost_axis=args.cost_axis, decision=decision_flags(args, args.baseline), primary=args.primary,
    )
    fmt = args.format
    color = fmt == "text" and not args.output and api.use_color(sys.stdout)
    text = api.render_report(report, fmt, junit_per=args.junit_per, metric=(args.metric or [None])[0],
                             label=args.label, max_samples=args.samples, color=color)
    if args.output:
        write_output(args.output, text)
        print(f"wrote {args.output} ({fmt}, {len(report.runs)} run(s))", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    report.board.raise_for_failures()  # GateFailed -> exit 1, reasons on stderr
    require_candidate(report.decision, args)
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    r = sub.add_parser(
        "report", help="write a report (Markdown, JUnit XML, HTML, JSON, badge or text) for runs or a sweep",
        description="Report on stored runs: RUN is a run directory or its result.json, or a run's name, run id or "
                    "unique fingerprint prefix; a sweep directory (<store>/sweeps/<fingerprint>), a sweep's name or "
                    "a unique prefix of its fingerprint stands for its runs. Names and prefixes are looked for in "
                    "./results and the stores the ExperimentDB knows (or --store). Exit 0, 1 when a gate fails (the "
                    "report is still written), 2 on a usage error (a name that matches nothing, or several).")
    r.add_argument("runs", nargs="+", metavar="RUN_OR_SWEEP",
                   help="run or sweep directories, result.json files, sweep names, run names, fingerprint prefixes")
    r.add_argument("--store", action="append", default=None, metavar="DIR",
                   help="look for the sweep and run names and prefixes in this result store (repeatable; default: "
                        "./results and every local store the ExperimentDB has a run of)")
    r.add_argument("--format", "-f", choices=list(api.REPORT_FORMATS), default="text",
                   help="text (terminal tables; default), md (pull requests), junit (CI), html (one self-contained "
                        "file), json, badge (a shields.io endpoint JSON)")
    r.add_argument("--output", "-o", default=None, metavar="FILE", help="write to FILE instead of stdout")
    r.add_argument("--baseline", default=None, metavar="RUN",
                   help="baseline run (a path, or the name/label/fingerprint prefix of one of the runs): regressions, "
                        "retention and newly-wrong samples are read against it")
    r.add_argument("--metric", action="append", metavar="NAME",
                   help="only these metrics (repeatable; default: all); the first ranks the leaderboard and is the "
                        "badge's metric")
    r.add_argument("--junit-per", choices=["metric", "sample"], default="metric",
                   help="JUnit test cases: one per metric (gates fail them; default) or one per sample of each "
                        "binary metric")
    r.add_argument("--title", default=None, help="report title (default: the sweep's or run's name)")
    r.add_argument("--label", default=None, help="badge label (default: the metric name)")
    r.add_argument("--samples", type=int, default=10, metavar="N",
                   help="HTML drill-down: samples listed per run and per list (default 10)")
    r.add_argument("--cost-axis", default="auto",
                   help="quality-vs-cost axis: auto, cost, latency_p50_s, model_size_bytes, tokens, wall_s, ...")
    add_gate_args(r)  # --max-regression needs --baseline here
    add_stats_args(r)
    add_decision_args(r, stored=True)
    r.set_defaults(handler=cmd_report)
