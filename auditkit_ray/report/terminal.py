"""Terminal tables: a summary per run and per sweep (metric, direction arrow,
mean, confidence interval, n, unscored counts by status).

Coloured only where the output is a terminal that wants colour
(``use_color``: a TTY, ``NO_COLOR`` unset, ``TERM`` not ``dumb``;
``FORCE_COLOR`` forces it); plain text when piped or written to a file.
Columns are padded before colouring, so they align either way.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Sequence, TextIO

from ..core.result import RunResult

RESET = "\033[0m"
STYLES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36",
          "best": "1;32"}


def use_color(stream: Any = None) -> bool:
    """Whether to colour output written to ``stream`` (default stdout)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # closed stream
        return False


def _paint(text: str, style: str | None, color: bool) -> str:
    if not color or not style or not text.strip():
        return text
    return f"\033[{STYLES[style]}m{text}{RESET}"


def _f(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _ci(lo: float | None, hi: float | None) -> str:
    return f"[{_f(lo, 3)}, {_f(hi, 3)}]" if lo is not None and hi is not None else "-"


def _unscored(m: Any) -> str:
    c = m.counts
    return f"{m.unscored} ({c.get('unknown', 0)}/{c.get('not_tested', 0)}/{c.get('error', 0)})"


def _flaky(m: Any) -> str:
    return str(getattr(m, "flaky", 0))


def _table(head: Sequence[str], rows: Sequence[Sequence[tuple[str, str | None]]], right: set[int],
           color: bool) -> list[str]:
    """Rows of (text, style) cells; columns padded on the plain text."""
    widths = [len(h) for h in head]
    for r in rows:
        for i, (c, _) in enumerate(r):
            widths[i] = max(widths[i], len(c))

    last = len(head) - 1

    def pad(i: int, c: str) -> str:
        if i in right:
            return c.rjust(widths[i])
        return c if i == last else c.ljust(widths[i])  # no trailing blanks

    out = ["  ".join(_paint(pad(i, h), "bold", color) for i, h in enumerate(head)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out.append("  ".join(_paint(pad(i, c), s, color) for i, (c, s) in enumerate(r)).rstrip())
    return out


def _perf_line(result: RunResult) -> str:
    """What the invocation that made ``result`` did: what it generated, re-scored and found stored, its own
    wall time, and the generation's figures only where it generated (a figure it does not have is left out,
    never printed as zero)."""
    p = result.perf
    made = p.generated or not (p.rescored or p.stored)  # a result of an older format counts none of them
    did = [f"generated {p.generated}" if p.generated else None,
           f"re-scored {p.rescored} stored outputs" if p.rescored else None,
           f"reused {p.stored} stored results" if p.stored else None,
           "nothing generated" if not made else None]
    perf = [", ".join(x for x in did if x),
            f"wall {p.wall_s:.1f}s" if p.wall_s else None,
            f"{p.throughput_samples_per_s:.1f} samples/s" if made and p.throughput_samples_per_s else None,
            f"latency p50 {p.latency_p50_s * 1000:.0f} ms ({p.latency_scope})"
            if made and p.latency_p50_s is not None else None,
            f"tokens {result.tokens.prompt}+{result.tokens.completion}"
            if made and (result.tokens.prompt or result.tokens.completion) else None]
    return "  ".join(x for x in perf if x)


def format_run(result: RunResult, *, color: bool = False) -> str:
    """One run: a row per metric. ``color`` adds ANSI styles (plain by default)."""
    head = ["metric", "dir", "mean", "95% CI", "n", "unscored (unknown/not_tested/error)"]
    flaky = any(m.flaky for m in result.metrics.values())  # a column only for runs with repeats that disagree
    if flaky:
        head.append("flaky")
    rows = []
    for name, m in result.metrics.items():
        ci = _ci(m.ci_low, m.ci_high)
        if m.ci_low is not None and abs(m.confidence - 0.95) > 1e-9:
            ci += f" ({m.confidence:.0%})"
        rows.append([(name, "bold"), (m.direction.arrow, "cyan"), (_f(m.mean), None), (ci, "dim"), (str(m.n), None),
                     (_unscored(m), "yellow" if m.unscored else "dim")]
                    + ([(_flaky(m), "yellow" if m.flaky else "dim")] if flaky else []))
    errors = _paint(f"errors {result.error_count}", "red" if result.error_count else None, color)
    lines = [f"run {_paint(result.name, 'bold', color)}  fingerprint {result.fingerprint[:12]}  samples "
             f"{result.perf.samples}  {errors}"]
    lines += _table(head, rows, {2, 4}, color)
    lines.append(_perf_line(result))
    if result.samples_path:
        lines.append(f"per-sample table: {result.samples_path}")
    return "\n".join(lines)


def print_run(result: RunResult, file: TextIO | None = None) -> None:
    out = file or sys.stdout
    print(format_run(result, color=use_color(out)), file=out)


def format_sweep(results: Iterable[RunResult], *, title: str | None = None, color: bool = False,
                 labels: Sequence[str] | None = None) -> str:
    """Several runs (a sweep): per metric, a row per run with mean, interval,
    n and unscored counts; the best mean per metric (direction-aware) is
    marked ``*`` (and green when coloured)."""
    runs = list(results)
    labels = list(labels) if labels is not None else [r.name or r.run_id for r in runs]
    metrics = list(dict.fromkeys(m for r in runs for m in r.metrics))
    head = ["metric", "dir", "run", "mean", "95% CI", "n", "unscored (unknown/not_tested/error)"]
    flaky = any(m.flaky for r in runs for m in r.metrics.values())
    if flaky:
        head.append("flaky")
    rows = []
    for name in metrics:
        have = [(lab, r.metrics[name]) for lab, r in zip(labels, runs) if name in r.metrics]
        means = [s.mean for _, s in have if s.mean is not None]
        direction = have[0][1].direction
        best = (max(means) if direction.value == "maximize" else min(means)) if means else None
        for i, (lab, s) in enumerate(have):
            is_best = best is not None and s.mean == best
            rows.append([(name if i == 0 else "", "bold"), (direction.arrow if i == 0 else "", "cyan"), (lab, None),
                         (_f(s.mean) + (" *" if is_best else "  "), "best" if is_best else None),
                         (_ci(s.ci_low, s.ci_high), "dim"),
                         (str(s.n), None), (_unscored(s), "yellow" if s.unscored else "dim")]
                        + ([(_flaky(s), "yellow" if s.flaky else "dim")] if flaky else []))
    errors = sum(r.error_count for r in runs)
    if title == f"{len(runs)} runs":  # the report's default title says what the count says: once is enough
        title = None
    head_line = f"{_paint(title, 'bold', color) + '  ' if title else ''}{len(runs)} runs  {len(metrics)} metrics  " \
                f"{_paint(f'errors {errors}', 'red' if errors else None, color)}"
    lines = [head_line] + _table(head, rows, {3, 5}, color)
    lines.append("* best mean per metric (direction-aware; see `auditkit-ray report` for intervals and paired tests)")
    return "\n".join(lines)


def print_sweep(results: Iterable[RunResult], file: TextIO | None = None, title: str | None = None) -> None:
    out = file or sys.stdout
    print(format_sweep(results, title=title, color=use_color(out)), file=out)
