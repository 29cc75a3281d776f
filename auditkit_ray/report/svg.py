"""Inline SVG charts for the HTML report (no JavaScript needed to draw them).

Every text from the data goes through ``e`` (HTML/XML escaping). Each chart
is one ``<svg class="chart">`` with a ``<title>`` per mark for hover text and
``data-run`` on the marks of a run, so the page script can highlight a run
across charts.
"""

from __future__ import annotations

import html
import math
from typing import Callable, Sequence

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
FONT = 12


def e(v: object) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def short(s: str, n: int = 28) -> str:
    """At most ``n`` characters, cut in the middle (run names differ at both ends)."""
    if len(s) <= n:
        return s
    head = (n - 1) // 2
    return s[:head] + "…" + s[len(s) - (n - 1 - head):]


def display_names(labels: Sequence[str]) -> dict[str, str]:
    """Short names for chart labels: for runs named ``head/key=value/...``
    the values of the keys that differ (``tiny-model-p25 · int8-dynamic``);
    otherwise the labels less their common ``/``-separated prefix."""
    labels = list(labels)
    parsed = {}
    for lab in labels:
        parts = [p for p in lab.split("/")[1:] if "=" in p]
        parsed[lab] = dict(p.split("=", 1) for p in parts)
    if len(labels) > 1 and all(parsed.values()):
        keys = list(dict.fromkeys(k for v in parsed.values() for k in v))
        varying = [k for k in keys if len({v.get(k) for v in parsed.values()}) > 1]
        names = {lab: " · ".join(parsed[lab].get(k, "-") for k in varying) for lab in labels}
        if varying and len(set(names.values())) == len(labels):
            return names
    split = [lab.split("/") for lab in labels]
    common = 0
    if len(labels) > 1:
        while all(len(p) > common + 1 for p in split) and len({p[common] for p in split}) == 1:
            common += 1
    return {lab: "/".join(p[common:]) for lab, p in zip(labels, split)}


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    out = []
    v = start
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    return out


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000 or a < 0.001:
        return f"{v:.3g}"
    return f"{v:.4g}"


def _domain(values: Sequence[float], pad: float = 0.06, unit: bool = False) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if unit and lo >= 0 and hi <= 1:
        lo, hi = (0.0, 1.0) if hi - lo > 0.25 else (lo, hi)
    if hi == lo:
        d = abs(hi) * 0.1 or 0.5
        return lo - d, hi + d
    span = hi - lo
    return lo - span * pad, hi + span * pad


def _svg(width: int, height: int, body: list[str], label: str, cls: str = "chart") -> str:
    return (f'<svg class="{cls}" role="img" aria-label="{e(label)}" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" '
            f'font-size="{FONT}">' + "".join(body) + "</svg>")


def ci_chart(title: str, entries: Sequence[tuple[str, float, float | None, float | None, bool, str]], *,
             unit: bool = False,
             width: int = 560, names: dict[str, str] | None = None) -> str:
    """Dot-and-whisker: one row per run (label, mean, ci_low, ci_high,
    best-or-tied, marks), in the order given."""
    if not entries:
        return ""
    names = names or {}
    left, right, top, row = 200, 70, 10, 26
    bottom = 30
    height = top + row * len(entries) + bottom
    vals = [v for _, m, lo, hi, _, _ in entries for v in (m, lo, hi) if v is not None]
    lo_d, hi_d = _domain(vals, unit=unit)
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + (v - lo_d) / (hi_d - lo_d) * plot_w

    body = [f"<title>{e(title)}</title>"]
    axis_y = top + row * len(entries)
    for t in nice_ticks(lo_d, hi_d, 5):
        if lo_d <= t <= hi_d:
            body.append(f'<line class="grid" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{axis_y}"/>')
            body.append(f'<text class="tick" x="{x(t):.1f}" y="{axis_y + 16}" text-anchor="middle">{e(_fmt(t))}</text>')
    body.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{axis_y}" y2="{axis_y}"/>')
    for i, (label, mean, lo, hi, best, mark) in enumerate(entries):
        cy = top + row * i + row / 2
        interval = f" [{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else " (no interval)"
        tip = f"{label}: {mean:.4f}{interval}" + (f" {mark}" if mark else "")
        body.append(f'<g class="mark{" best" if best else ""}" data-run="{e(label)}"><title>{e(tip)}</title>')
        body.append(
            f'<text class="label" x="{left - 8}" y="{cy + 4:.1f}" '
            f'text-anchor="end">{e(short(names.get(label, label), 30))}</text>')
        if lo is not None and hi is not None:
            body.append(f'<line class="whisker" x1="{x(lo):.1f}" x2="{x(hi):.1f}" y1="{cy:.1f}" y2="{cy:.1f}"/>')
            for v in (lo, hi):
                body.append(
                    f'<line class="whisker" x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{cy - 5:.1f}" y2="{cy + 5:.1f}"/>')
        body.append(f'<circle class="dot" cx="{x(mean):.1f}" cy="{cy:.1f}" r="5"/>')
        body.append(
            f'<text class="value" x="{width - right + 6}" '
            f'y="{cy + 4:.1f}">{e(f"{mean:.3f}")}{e(" " + mark if mark else "")}</text>')
        body.append("</g>")
    return _svg(width, height, body, title)


def line_chart(title: str, x_values: Sequence[str], series: dict[str, Sequence[tuple[str, float | None, str]]], *,
               y_label: str = "", reference: float | None = 1.0, y_format: Callable[[float], str] = _fmt,
               width: int = 560) -> str:
    """Categorical x, one polyline per series; points are (x value, y, run label)."""
    ys = [y for pts in series.values() for _, y, _ in pts if y is not None]
    if not ys or not x_values:
        return ""
    left, right, top, bottom = 60, 50, 16, 62 + 16 * ((len(series) + 1) // 2)
    height = 300
    plot_h = height - top - bottom
    lo_d, hi_d = _domain(ys + ([reference] if reference is not None else []), pad=0.1)
    n = len(x_values)
    plot_w = width - left - right

    def x(i: int) -> float:
        return left + (plot_w / 2 if n == 1 else i * plot_w / (n - 1))

    def y(v: float) -> float:
        return top + (hi_d - v) / (hi_d - lo_d) * plot_h

    body = [f"<title>{e(title)}</title>"]
    for t in nice_ticks(lo_d, hi_d, 5):
        if lo_d <= t <= hi_d:
            body.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>')
            body.append(
                f'<text class="tick" x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{e(y_format(t))}</text>')
    if reference is not None:
        body.append(
            f'<line class="reference" x1="{left}" x2="{width - right}" y1="{y(reference):.1f}" '
            f'y2="{y(reference):.1f}"/>')
    base = top + plot_h
    body.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base}" y2="{base}"/>')
    for i, xv in enumerate(x_values):
        body.append(f'<text class="tick" x="{x(i):.1f}" y="{base + 16}" text-anchor="middle">{e(short(xv, 22))}</text>')
    if y_label:
        body.append(
            f'<text class="axis-label" transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" '
            f'text-anchor="middle">{e(y_label)}</text>')
    index = {v: i for i, v in enumerate(x_values)}
    legend_y = base + 38
    for k, (name, pts) in enumerate(series.items()):
        color = PALETTE[k % len(PALETTE)]
        coords = [(x(index[xv]), y(v), xv, v, lab) for xv, v, lab in pts if v is not None and xv in index]
        if len(coords) > 1:
            path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy, *_ in coords)
            body.append(f'<polyline class="series" points="{path}" stroke="{color}"/>')
        for cx, cy, xv, v, lab in coords:
            body.append(f'<g class="mark" data-run="{e(lab)}"><title>{e(f"{lab} ({name}): {y_format(v)}")}</title>'
                        f'<circle class="dot" cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" style="fill:{color}"/></g>')
        lx = left + (k % 2) * (plot_w / 2)
        ly = legend_y + (k // 2) * 16
        body.append(f'<g class="legend"><rect x="{lx:.1f}" y="{ly - 9}" width="10" height="10" fill="{color}"/>'
                    f'<text x="{lx + 14:.1f}" y="{ly:.1f}">{e(short(name, 40))}</text></g>')
    return _svg(width, height, body, title)


def scatter_chart(title: str, points: Sequence[tuple[str, float, float, bool]], *, x_label: str, y_label: str,
                  x_format: Callable[[float], str] = _fmt, y_format: Callable[[float], str] = _fmt,
                  unit_y: bool = False,
                  width: int = 560, names: dict[str, str] | None = None) -> str:
    """Quality (y) against cost (x); points (label, x, y, on the front); the
    front is joined cheapest first."""
    if not points:
        return ""
    names = names or {}
    left, right, top, bottom = 64, 110, 16, 48
    height = 320
    plot_w, plot_h = width - left - right, height - top - bottom
    x_lo, x_hi = _domain([p[1] for p in points], pad=0.08)
    y_lo, y_hi = _domain([p[2] for p in points], pad=0.12, unit=unit_y)

    def x(v: float) -> float:
        return left + (v - x_lo) / (x_hi - x_lo) * plot_w

    def y(v: float) -> float:
        return top + (y_hi - v) / (y_hi - y_lo) * plot_h

    body = [f"<title>{e(title)}</title>"]
    base = top + plot_h
    for t in nice_ticks(x_lo, x_hi, 5):
        if x_lo <= t <= x_hi:
            body.append(f'<line class="grid" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{base}"/>')
            body.append(
                f'<text class="tick" x="{x(t):.1f}" y="{base + 16}" text-anchor="middle">{e(x_format(t))}</text>')
    for t in nice_ticks(y_lo, y_hi, 5):
        if y_lo <= t <= y_hi:
            body.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>')
            body.append(
                f'<text class="tick" x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{e(y_format(t))}</text>')
    body.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base}" y2="{base}"/>')
    body.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{base}"/>')
    body.append(
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{height - 8}" '
        f'text-anchor="middle">{e(x_label)}</text>')
    body.append(
        f'<text class="axis-label" transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{e(y_label)}</text>')
    front = sorted((p for p in points if p[3]), key=lambda p: (p[1], p[2]))
    if len(front) > 1:
        path = " ".join(f"{x(p[1]):.1f},{y(p[2]):.1f}" for p in front)
        body.append(f'<polyline class="front-line" points="{path}"/>')
    for label, xv, yv, on in points:
        where = " (Pareto front)" if on else " (dominated)"
        tip = f"{label}: {y_label} {y_format(yv)}, {x_label} {x_format(xv)}{where}"
        body.append(f'<g class="mark{" front" if on else ""}" data-run="{e(label)}"><title>{e(tip)}</title>'
                    f'<circle class="dot" cx="{x(xv):.1f}" cy="{y(yv):.1f}" r="{6 if on else 4.5}"/>'
                    f'<text class="point-label" x="{x(xv) + 8:.1f}" '
                    f'y="{y(yv) - 6:.1f}">{e(short(names.get(label, label), 30))}</text></g>')
    return _svg(width, height, body, title)
