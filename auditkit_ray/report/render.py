"""One entry point for every report format: ``render(report, fmt, ...)``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .._version import __version__
from ..errors import ConfigError

FORMATS = ("text", "md", "junit", "html", "json", "badge")


def report_dict(report: Any) -> dict[str, Any]:
    """The whole report as plain JSON (the leaderboard as ``Leaderboard.to_dict()``)."""
    from ..compare.report import gate_summary, jsonable
    from .grid import retention_curves

    return {
        "format": "auditkit-ray-report",
        "version": 1,
        "package_version": __version__,
        "title": report.title,
        "generated_at": report.generated_at,
        "sweeps": [dataclasses.asdict(s) for s in report.sweeps],
        "baseline": report.baseline.label if report.baseline is not None else None,
        "reference": report.reference.label,
        "notes": report.notes,
        "runs": [{"label": r.label, "run_id": r.result.run_id, "name": r.result.name,
                  "fingerprint": r.result.fingerprint,
                  "dataset_fingerprint": r.result.dataset_fingerprint, "source": r.source,
                  "metrics": {m: s.model_dump(mode="json") for m, s in r.result.metrics.items()},
                  "perf": r.result.perf.model_dump(mode="json")} for r in report.runs],
        "significance": {m: report.significance(m) for m in report.metrics},
        "regressions": [{"run": label, **jsonable(mc)} for label, mc in report.regressions()],
        "retention": [jsonable(c) for c in retention_curves(report)],
        "leaderboard": report.board.to_dict(),
        "failed_cells": [jsonable(c) for c in report.failed_cells],
        "primary": report.primary,
        "ship_decision": report.decision.to_dict() if report.decision is not None else None,
        "fronts": {axis: jsonable(pf) for axis, pf in report.fronts.items()},
        "decision": gate_summary(report.board),
        "ok": report.ok,
        "failures": report.failures,
    }


def render(report: Any, fmt: str, *, junit_per: str = "metric", metric: str | None = None, label: str | None = None,
           max_samples: int = 10, color: bool = False) -> str:
    if fmt == "md":
        from .markdown import format_markdown

        return format_markdown(report, max_samples=max_samples)
    if fmt == "junit":
        from .junit import format_junit

        return format_junit(report, per=junit_per)
    if fmt == "html":
        from .html import format_html

        return format_html(report, max_samples=max_samples)
    if fmt == "json":
        return json.dumps(report_dict(report), indent=2, ensure_ascii=False) + "\n"
    if fmt == "badge":
        from .badge import format_badge

        return format_badge(report, metric, label)
    if fmt == "text":
        from .terminal import format_run, format_sweep

        if len(report.runs) == 1:
            text = format_run(report.runs[0].result, color=color)
        else:
            text = format_sweep([r.result for r in report.runs], labels=[r.label for r in report.runs],
                                title=report.title, color=color)
        lines = [report.decision.format(), "", text] if report.decision is not None else [text]
        if report.baseline is not None:
            regs = report.regressions()
            lines.append("")
            found = f"{len(regs)} regression(s)" if regs else "no regressions"
            lines.append(f"against baseline {report.baseline.label}: {found}")
            for lab, mc in regs:
                lines.append(f"  {lab}: {mc.name} {mc.direction.arrow} {mc.grade}: " + "; ".join(mc.reasons))
        for g in report.board.gates:
            lines.append(f"{'ok  ' if g.passed else 'FAIL'}  {g.reason}")
        if report.failed_cells:
            lines.append(f"failed cells: {len(report.failed_cells)} (no result; not ranked)")
            for c in report.failed_cells:
                tries = f" after {c.attempts} attempt(s)" if c.attempts else ""
                lines.append(f"  FAILED {c.name}{tries}: {c.reason}")
        from ..compare.report import gate_summary, verdict

        for axis, pf in report.fronts.items():
            lines.append(f"Pareto front, {pf.metric} {pf.direction.arrow} vs {axis} ↓: {', '.join(pf.front) or '-'}")
        lines.append(f"result: {verdict(report.board)} ({gate_summary(report.board)})")
        if report.decision is not None:
            lines.append(report.decision.headline())
        return "\n".join(lines) + "\n"
    raise ConfigError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")
