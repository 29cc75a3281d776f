"""CLI commands ``report`` (Markdown, JUnit XML, HTML, JSON, badge or text
from stored runs and sweeps) and ``init`` (starter run and sweep files).
Registered by ``auditkit_ray.cli``.

``report`` writes its output (stdout, or ``--output FILE`` atomically), then
exits 1 when a gate (``--fail-under``, ``--fail-over``, ``--max-regression``)
fails, like ``compare`` and ``leaderboard``; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .errors import EXIT_OK, ConfigError


def _write(path: str, text: str) -> None:
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"--output {path}: cannot write ({exc.strerror or exc})") from None


def cmd_report(args: argparse.Namespace) -> int:
    from .compare.gates import parse_assignments, parse_max_regression
    from .report.loader import build_report, expand_inputs
    from .report.render import render
    from .report.terminal import use_color

    if args.resamples < 1:
        raise ConfigError("--resamples must be at least 1")
    if args.samples < 0:
        raise ConfigError("--samples must be 0 or more")
    inputs = expand_inputs(args.runs)
    report = build_report(
        inputs, metrics=args.metric or None, baseline=args.baseline, title=args.title,
        fail_under=parse_assignments(args.fail_under, "--fail-under"), fail_over=parse_assignments(args.fail_over, "--fail-over"),
        max_regression=parse_max_regression(args.max_regression) or None, confidence=args.confidence, alpha=args.alpha,
        n_resamples=args.resamples, seed=args.seed, cost_axis=args.cost_axis,
    )
    fmt = args.format
    color = fmt == "text" and not args.output and use_color(sys.stdout)
    text = render(report, fmt, junit_per=args.junit_per, metric=(args.metric or [None])[0], label=args.label,
                  max_samples=args.samples, color=color)
    if args.output:
        _write(args.output, text)
        print(f"wrote {args.output} ({fmt}, {len(report.runs)} run(s))", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    report.board.raise_for_failures()  # GateFailed -> exit 1, reasons on stderr
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    from .config import load_config
    from .init_templates import RUN_FILE, SWEEP_FILE, write_starter

    written = write_starter(args.dir, force=args.force)
    for p in written:
        print(f"wrote {p}")
    # the starter must validate; check it where it was written (paths are relative to it)
    here = os.getcwd()
    try:
        os.chdir(args.dir)
        load_config(RUN_FILE)
        load_config(SWEEP_FILE)
    finally:
        os.chdir(here)
    cd = "" if Path(args.dir).resolve() == Path(here).resolve() else f"cd {args.dir} && "
    print("next steps:")
    print(f"  {cd}auditkit-ray validate {RUN_FILE}")
    print(f"  {cd}auditkit-ray run {RUN_FILE}")
    print(f"  {cd}auditkit-ray sweep {SWEEP_FILE}")
    print(f"  {cd}auditkit-ray report results/sweeps/<fingerprint> --format html --output report.html")
    return EXIT_OK


def add_parsers(sub: Any) -> dict[str, Any]:
    r = sub.add_parser(
        "report", help="write a report (Markdown, JUnit XML, HTML, JSON, badge or text) for runs or a sweep",
        description="Report on stored runs: RUN is a run directory or its result.json; a sweep directory "
                    "(<store>/sweeps/<fingerprint>) stands for its runs. Exit 0, 1 when a gate fails (the report is "
                    "still written), 2 on a usage error.")
    r.add_argument("runs", nargs="+", metavar="RUN_OR_SWEEP", help="run directories, result.json files or sweep directories")
    r.add_argument("--format", "-f", choices=["text", "md", "junit", "html", "json", "badge"], default="text",
                   help="text (terminal tables; default), md (pull requests), junit (CI), html (one self-contained file), "
                        "json, badge (a shields.io endpoint JSON)")
    r.add_argument("--output", "-o", default=None, metavar="FILE", help="write to FILE instead of stdout")
    r.add_argument("--baseline", default=None, metavar="RUN",
                   help="baseline run (a path, or the name/label/fingerprint prefix of one of the runs): regressions, "
                        "retention and newly-wrong samples are read against it")
    r.add_argument("--metric", action="append", metavar="NAME",
                   help="only these metrics (repeatable; default: all); the first ranks the leaderboard and is the badge's metric")
    r.add_argument("--junit-per", choices=["metric", "sample"], default="metric",
                   help="JUnit test cases: one per metric (gates fail them; default) or one per sample of each binary metric")
    r.add_argument("--title", default=None, help="report title (default: the sweep's or run's name)")
    r.add_argument("--label", default=None, help="badge label (default: the metric name)")
    r.add_argument("--samples", type=int, default=10, metavar="N", help="HTML drill-down: samples listed per run and per list (default 10)")
    r.add_argument("--cost-axis", default="auto", help="quality-vs-cost axis: auto, cost, latency_p50_s, model_size_bytes, tokens, wall_s, ...")
    r.add_argument("--fail-under", action="append", metavar="METRIC=VALUE",
                   help="gate: fail when METRIC's mean is under VALUE (higher-is-better metrics)")
    r.add_argument("--fail-over", action="append", metavar="METRIC=VALUE",
                   help="gate: fail when METRIC's mean is over VALUE (lower-is-better metrics)")
    r.add_argument("--max-regression", action="append", metavar="[METRIC=]X",
                   help="gate (needs --baseline): fail when a metric got worse than the baseline by more than X (0.02 or 2%%)")
    r.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    r.add_argument("--confidence", type=float, default=0.95, help="interval confidence (default 0.95)")
    r.add_argument("--resamples", type=int, default=10_000, help="bootstrap / permutation resamples (default 10000)")
    r.add_argument("--seed", type=int, default=0, help="resampling seed (default 0)")

    i = sub.add_parser("init", help="write a starter run file, sweep file and tiny dataset that run with no model",
                       description="Write run.yaml, sweep.yaml and data/tiny.jsonl under DIR (default: the current directory). "
                                   "They use the echo backend, so they validate and run without a model.")
    i.add_argument("dir", nargs="?", default=".", metavar="DIR")
    i.add_argument("--force", action="store_true", help="overwrite existing files")
    return {"report": cmd_report, "init": cmd_init}
