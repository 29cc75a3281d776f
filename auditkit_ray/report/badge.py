"""A shields.io endpoint badge for one metric.

``{"schemaVersion": 1, "label": ..., "message": ..., "color": ...}``, served
from anywhere shields.io can fetch it
(``https://img.shields.io/endpoint?url=...``).

- The run: the only run, else the best-ranked run on the metric (the message
  then says "best of N").
- The message: a percentage for a metric whose values lie in [0, 1], else
  four significant digits; ``n/a`` without a scored sample.
- The colour: red when a gate on the metric fails; with a baseline, the
  comparison's grade (pass: brightgreen, warn: yellow, fail: red); else, for
  a metric in [0, 1], a scale read through its direction (0.9 and better
  brightgreen, ... under 0.2 red); otherwise blue.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConfigError

SCALE = ((0.9, "brightgreen"), (0.75, "green"), (0.6, "yellowgreen"), (0.4, "yellow"), (0.2, "orange"),
         (float("-inf"), "red"))
GRADE_COLOR = {"pass": "brightgreen", "warn": "yellow", "fail": "red", "not comparable": "lightgrey"}


def _unit(report: Any, metric: str) -> bool:
    """Every run's mean and interval on ``metric`` lie in [0, 1]."""
    vals = []
    for r in report.runs:
        s = r.result.metrics.get(metric)
        if s is not None:
            vals += [v for v in (s.mean, s.ci_low, s.ci_high) if v is not None]
    return bool(vals) and all(0.0 <= v <= 1.0 for v in vals)


def badge(report: Any, metric: str | None = None, label: str | None = None) -> dict[str, Any]:
    if not report.metrics:
        raise ConfigError("badge: the runs have no metric")
    metric = metric or report.metrics[0]
    if metric not in report.board.metrics:
        raise ConfigError(f"badge: metric {metric!r} is not in the report (metrics: {', '.join(report.metrics)})")
    board = report.board.metrics[metric]
    if len(report.runs) == 1:
        run = report.runs[0].label
    elif board.ranked:
        run = board.ranked[0].run
    else:
        run = report.runs[0].label
    s = report.run(run).result.metrics.get(metric)
    mean = s.mean if s is not None else None
    unit = _unit(report, metric)
    if mean is None:
        message, color = "n/a", "lightgrey"
    else:
        message = f"{100 * mean:.1f}%" if unit else f"{mean:.4g}"
        if len(report.runs) > 1:
            message += f" (best of {len(report.runs)})"
        if unit:
            goodness = mean if board.direction.value == "maximize" else 1.0 - mean
            color = next(c for t, c in SCALE if goodness >= t)
        else:
            color = "blue"
        if report.baseline is not None and run != report.baseline.label:
            cmp = report.board.comparisons.get(run)
            mc = cmp.metrics.get(metric) if cmp is not None else None
            if mc is not None:
                color = GRADE_COLOR.get(mc.grade, color)
    if any(not g.passed for g in report.board.gates if g.metric == metric and g.run == run):
        color = "red"
    return {"schemaVersion": 1, "label": label or metric, "message": message, "color": color}


def format_badge(report: Any, metric: str | None = None, label: str | None = None) -> str:
    return json.dumps(badge(report, metric, label), ensure_ascii=False) + "\n"
