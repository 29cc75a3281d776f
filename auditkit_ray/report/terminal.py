"""A summary table per run: metric, direction arrow, mean, CI, n, unscored."""

from __future__ import annotations

import sys
from typing import TextIO

from ..core.result import RunResult


def _f(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def format_run(result: RunResult) -> str:
    head = ["metric", "dir", "mean", "95% CI", "n", "unscored", "(unknown/not_tested/error)"]
    rows = []
    for name, m in result.metrics.items():
        ci = f"[{_f(m.ci_low, 3)}, {_f(m.ci_high, 3)}]" if m.ci_low is not None else "-"
        c = m.counts
        rows.append([name, m.direction.arrow, _f(m.mean), ci, str(m.n), str(m.unscored),
                     f"{c.get('unknown', 0)}/{c.get('not_tested', 0)}/{c.get('error', 0)}"])
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    lines = [f"run {result.name}  fingerprint {result.fingerprint[:12]}  samples {result.perf.samples}  errors {result.error_count}"]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    p = result.perf
    perf = [f"wall {p.wall_s:.1f}s" if p.wall_s else None,
            f"{p.throughput_samples_per_s:.1f} samples/s" if p.throughput_samples_per_s else None,
            f"latency p50 {p.latency_p50_s * 1000:.0f} ms ({p.latency_scope})" if p.latency_p50_s is not None else None,
            f"tokens {result.tokens.prompt}+{result.tokens.completion}"]
    lines.append("  ".join(x for x in perf if x))
    if result.samples_path:
        lines.append(f"per-sample table: {result.samples_path}")
    return "\n".join(lines)


def print_run(result: RunResult, file: TextIO | None = None) -> None:
    print(format_run(result), file=file or sys.stdout)
