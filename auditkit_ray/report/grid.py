"""The grid a set of runs spans (pruning levels, quantizations, ...), and
retention across it.

Parameters come from run names first: a sweep names its runs
``<base>/<key>=<value>/<key>=<value>`` (``tiny/path=tiny-model-p25/quantization=None``),
and the keys whose values differ between runs are the grid. Runs not named so
fall back to their configs: the flattened config keys (``model.path``,
``model.quantization``, ...) whose values differ, leaving out bookkeeping
(name, store, tracking, experiment). Retention is drawn once per varying
parameter (the grid axis) as the x axis, with one series per combination of
the other parameters' values; an axis whose values are all numbers (a
pruning level) is a numeric x axis.

Retention of a run on a metric is ``compare.retention(reference, run)``:
direction-aware, 1.0 = as good as the reference.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..compare.comparison import retention

IGNORED_CONFIG = ("name", "store", "tracking", "experiment", "execution")


@dataclass
class Grid:
    #: varying parameter names, x axis first
    params: list[str]
    #: run label -> {param: value as text}
    values: dict[str, dict[str, str]]
    #: "names" or "config"
    source: str
    notes: list[str] = field(default_factory=list)

    @property
    def x(self) -> str:
        return self.params[0]

    def x_values(self, param: str | None = None) -> list[str]:
        """The values of ``param`` (default: the first), numeric ones in numeric order."""
        param = param or self.x
        seen = list(dict.fromkeys(v[param] for v in self.values.values() if param in v))
        nums = [_number(s) for s in seen]
        if all(n is not None for n in nums):
            return [s for _, s in sorted(zip(nums, seen), key=lambda t: t[0])]  # type: ignore[arg-type,return-value]
        return seen

    def numeric(self, param: str) -> bool:
        vals = self.x_values(param)
        return bool(vals) and all(_number(v) is not None for v in vals)

    def series(self, param: str | None = None) -> dict[str, list[str]]:
        """Series name -> run labels: one series per combination of the parameters other than ``param``
        (default: the first); one series, "all runs", when only one parameter varies."""
        param = param or self.x
        others = [p for p in self.params if p != param]
        out: dict[str, list[str]] = {}
        for label, v in self.values.items():
            key = ", ".join(f"{p}={v.get(p, '-')}" for p in others) or "all runs"
            out.setdefault(key, []).append(label)
        return out


def _number(s: str) -> float | None:
    try:
        f = float(s)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _from_names(labels: list[str], names: list[str]) -> dict[str, dict[str, str]] | None:
    out: dict[str, dict[str, str]] = {}
    for label, name in zip(labels, names):
        parts = [p for p in name.split("/")[1:] if "=" in p]
        if not parts:
            return None
        out[label] = dict(p.split("=", 1) for p in parts)
    return out


def _flatten(d: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if not prefix and k in IGNORED_CONFIG:
                continue
            out.update(_flatten(v, key))
    else:
        out[prefix] = d if isinstance(d, str) else json.dumps(d, sort_keys=True, default=str)
    return out


def _short(value: str) -> str:
    return value.rstrip("/").split("/")[-1] if "/" in value else value


def detect_grid(runs: list[Any]) -> Grid | None:
    """The grid spanned by ``runs`` (LoadedRuns), or None when nothing varies
    (or fewer than two runs)."""
    if len(runs) < 2:
        return None
    labels = [r.label for r in runs]
    named = _from_names(labels, [r.result.name or "" for r in runs])
    if named is not None:
        keys = list(dict.fromkeys(k for v in named.values() for k in v))
        varying = [k for k in keys if len({v.get(k) for v in named.values()}) > 1]
        if varying:
            return Grid(params=varying, values={lab: {k: v.get(k, "-") for k in varying} for lab, v in named.items()},
                        source="names")
    flat = {lab: _flatten(r.result.config or {}) for lab, r in zip(labels, runs)}
    keys = list(dict.fromkeys(k for v in flat.values() for k in v))
    varying = [k for k in keys if len({v.get(k) for v in flat.values()}) > 1]
    if not varying:
        return None
    notes = []
    if len(varying) > 2:
        notes.append(f"{len(varying)} config keys vary ({', '.join(varying)}); the curves use the first two")
        varying = varying[:2]
    values = {lab: {k.split(".")[-1]: _short(str(v.get(k, "-"))) for k in varying} for lab, v in flat.items()}
    return Grid(params=[k.split(".")[-1] for k in varying], values=values, source="config", notes=notes)


@dataclass
class RetentionCurve:
    metric: str
    reference: str
    x_param: str
    x_values: list[str]
    #: series name -> [(x value, retention or None, run label)]
    series: dict[str, list[tuple[str, float | None, str]]]
    notes: list[str] = field(default_factory=list)
    #: the x values are numbers (placed by value)
    x_numeric: bool = False


def retention_curves(report: Any, grid: Grid | None = None) -> list[RetentionCurve]:
    """Per metric of the report and per grid axis, the retention of every run against the reference run."""
    grid = grid if grid is not None else detect_grid(report.runs)
    if grid is None:
        return []
    ref = report.reference
    out = []
    for m in report.metrics:
        rs = ref.result.metrics.get(m)
        for param in grid.params:
            xs = grid.x_values(param)
            curve = RetentionCurve(metric=m, reference=ref.label, x_param=param, x_values=xs, series={},
                                   x_numeric=grid.numeric(param))
            for sname, labels in grid.series(param).items():
                pts = []
                for lab in labels:
                    s = report.run(lab).result.metrics.get(m)
                    if rs is None or s is None:
                        value, note = None, f"{m} missing"
                    else:
                        value, note = retention(rs.mean, s.mean, rs.direction)
                    if note:
                        curve.notes.append(f"{lab}: {note}")
                    pts.append((grid.values[lab].get(param, "-"), value, lab))
                pts.sort(key=lambda t: xs.index(t[0]) if t[0] in xs else len(xs))
                curve.series[sname] = pts
            out.append(curve)
    return out
