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


def tick_labels(ticks: Sequence[float], scale: float = 1.0, suffix: str = "") -> list[str]:
    """Tick labels with as many decimals as it takes for neighbours to differ
    (``99.8%, 99.9%, 100.0%`` rather than ``100%, 100%, 100%``)."""
    if not ticks:
        return []
    vals = [t * scale for t in ticks]
    steps = [abs(b - a) for a, b in zip(vals, vals[1:]) if b != a]
    step = min(steps) if steps else abs(vals[0]) or 1.0
    if max(abs(v) for v in vals) >= 1e6 and step >= 1:
        return [f"{v:.3g}{suffix}" for v in vals]
    # the fewest decimals that write every tick exactly (0.25 as 0.25, not 0.2)
    digits = next((d for d in range(7) if all(abs(float(f"{v:.{d}f}") - v) <= step * 1e-3 for v in vals)), 6)
    return [f"{v:.{digits}f}{suffix}" for v in vals]


def text_width(s: str, size: float = 11) -> float:
    """A generous estimate of a label's rendered width (sans-serif), for laying labels out without a browser."""
    return sum(size * (0.36 if c in "il.,:;|!' " else 0.95 if c in "mwMW@%" else 0.68) for c in s) + 2


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
    shown = {label: short(names.get(label, label), 30) for label, *_ in entries}
    values = [f"{mean:.3f}" + (f" {mark}" if mark else "") for _, mean, _, _, _, mark in entries]
    left = int(min(280, max(80, max(text_width(t, FONT) for t in shown.values()) + 14)))
    right = int(max(60, max(text_width(v, FONT) for v in values) + 12))
    width = max(width, left + 260 + right)
    top, row = 10, 26
    bottom = 30
    height = top + row * len(entries) + bottom
    vals = [v for _, m, lo, hi, _, _ in entries for v in (m, lo, hi) if v is not None]
    lo_d, hi_d = _domain(vals, unit=unit)
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + (v - lo_d) / (hi_d - lo_d) * plot_w

    body = [f"<title>{e(title)}</title>"]
    axis_y = top + row * len(entries)
    ticks = [t for t in nice_ticks(lo_d, hi_d, 5) if lo_d <= t <= hi_d]
    for t, lab in zip(ticks, tick_labels(ticks)):
        body.append(f'<line class="grid" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{axis_y}"/>')
        body.append(f'<text class="tick" x="{x(t):.1f}" y="{axis_y + 16}" text-anchor="middle">{e(lab)}</text>')
    body.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{axis_y}" y2="{axis_y}"/>')
    for i, (label, mean, lo, hi, best, mark) in enumerate(entries):
        cy = top + row * i + row / 2
        interval = f" [{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else " (no interval)"
        tip = f"{label}: {mean:.4f}{interval}" + (f" {mark}" if mark else "")
        body.append(f'<g class="mark{" best" if best else ""}" data-run="{e(label)}"><title>{e(tip)}</title>')
        body.append(
            f'<text class="label" x="{left - 8}" y="{cy + 4:.1f}" '
            f'text-anchor="end">{e(shown[label])}</text>')
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


def _legend(names: Sequence[str], x0: float, y0: float, avail: float) -> tuple[list[str], float]:
    """Legend entries in as many columns as fit ``avail`` pixels; (svg parts, height used)."""
    shown = [short(n, 48) for n in names]
    col_w = max(text_width(t, FONT) for t in shown) + 26 if shown else avail
    cols = max(1, int(avail // col_w))
    out = []
    for k, t in enumerate(shown):
        color = PALETTE[k % len(PALETTE)]
        lx = x0 + (k % cols) * col_w
        ly = y0 + (k // cols) * 17
        out.append(f'<g class="legend"><title>{e(names[k])}</title><rect x="{lx:.1f}" y="{ly - 9}" width="10" '
                   f'height="10" fill="{color}"/><text class="legend-label" x="{lx + 14:.1f}" y="{ly:.1f}">{e(t)}'
                   "</text></g>")
    rows = (len(shown) + cols - 1) // cols
    return out, rows * 17


def line_chart(title: str, x_values: Sequence[str], series: dict[str, Sequence[tuple[str, float | None, str]]], *,
               y_label: str = "", x_label: str = "", reference: float | None = 1.0,
               y_format: Callable[[float], str] = _fmt, y_percent: bool = False, x_numeric: bool = False,
               width: int = 560) -> str:
    """One polyline per series over x; points are (x value, y, run label). ``x_numeric``: the x values are
    numbers placed by value (a pruning level), else categories spaced evenly. Tick labels differ from their
    neighbours; ``y_percent`` shows y as percentages."""
    ys = [y for pts in series.values() for _, y, _ in pts if y is not None]
    if not ys or not x_values:
        return ""
    # the first and last x labels are centred on the plot's edges: leave room for their halves
    half = [text_width(short(v, 18), 11) / 2 for v in (x_values[0], x_values[-1])]
    left, right, top = int(max(78, half[0] + 4)), int(max(30, half[1] + 4)), 16
    plot_w = width - left - right
    legend, legend_h = _legend(list(series), left, 0, plot_w)
    plot_h = 200
    base = top + plot_h
    legend_y = base + 52
    height = int(legend_y + legend_h + 4)
    lo_d, hi_d = _domain(ys + ([reference] if reference is not None else []), pad=0.1)
    n = len(x_values)
    nums = [float(v) for v in x_values] if x_numeric else []
    x_lo, x_hi = (min(nums), max(nums)) if nums else (0.0, 1.0)

    def xpos(v: str) -> float:
        if nums and x_hi > x_lo:
            return left + (float(v) - x_lo) / (x_hi - x_lo) * plot_w
        i = list(x_values).index(v)
        return left + (plot_w / 2 if n == 1 else i * plot_w / (n - 1))

    def y(v: float) -> float:
        return top + (hi_d - v) / (hi_d - lo_d) * plot_h

    body = [f"<title>{e(title)}</title>"]
    ticks = [t for t in nice_ticks(lo_d, hi_d, 5) if lo_d <= t <= hi_d]
    labels = tick_labels(ticks, 100.0, "%") if y_percent else [y_format(t) for t in ticks]
    for t, lab in zip(ticks, labels):
        body.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>')
        body.append(f'<text class="tick" x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{e(lab)}</text>')
    if reference is not None:
        body.append(
            f'<line class="reference" x1="{left}" x2="{width - right}" y1="{y(reference):.1f}" '
            f'y2="{y(reference):.1f}"/>')
    body.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base}" y2="{base}"/>')
    # x tick labels: every value when they fit, else every k-th
    xt = [(xpos(v), short(v, 18)) for v in x_values]
    widest = max(text_width(t, 11) for _, t in xt)
    gaps = [b[0] - a[0] for a, b in zip(xt, xt[1:])]
    k = 1
    while gaps and k < len(xt) and min(sum(gaps[i:i + k]) for i in range(0, len(gaps) - k + 1, k)) < widest + 6:
        k += 1
    for i, (cx, t) in enumerate(xt):
        if i % k == 0:
            body.append(f'<text class="tick" x="{cx:.1f}" y="{base + 16}" text-anchor="middle">{e(t)}</text>')
    if x_label:
        body.append(f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{base + 34}" '
                    f'text-anchor="middle">{e(x_label)}</text>')
    if y_label:
        body.append(
            f'<text class="axis-label" transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" '
            f'text-anchor="middle">{e(y_label)}</text>')
    for k2, (name, pts) in enumerate(series.items()):
        color = PALETTE[k2 % len(PALETTE)]
        coords = [(xpos(xv), y(v), xv, v, lab) for xv, v, lab in pts if v is not None and xv in x_values]
        coords.sort(key=lambda c: c[0])
        if len(coords) > 1:
            path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy, *_ in coords)
            body.append(f'<polyline class="series" points="{path}" stroke="{color}"/>')
        for cx, cy, xv, v, lab in coords:
            body.append(f'<g class="mark" data-run="{e(lab)}"><title>{e(f"{lab} ({name}): {y_format(v)}")}</title>'
                        f'<circle class="dot" cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" style="fill:{color}"/></g>')
    body.append(f'<g transform="translate(0 {legend_y:.1f})">' + "".join(legend) + "</g>")
    return _svg(width, height, body, title)


def _place_labels(points: list[tuple[float, float, str]], bounds: tuple[float, float, float, float],
                  avoid: list[tuple[float, float, float, float]],
                  far: int = 0) -> list[tuple[float, float, str, str] | None]:
    """Positions for point labels that overlap neither each other nor ``avoid`` boxes (the dots) and stay in
    ``bounds`` (x0, y0, x1, y1): tries right, left, above and below each point; the first ``far`` points (labels
    that must show) also try places further out, and at last any of those places clear of the other labels
    even where a dot lies under it. None where no place is free."""
    labels: list[tuple[float, float, float, float]] = []
    out: list[tuple[float, float, str, str] | None] = []
    h = 13.0
    near = ((8, -6, "start"), (-8, -6, "end"), (8, 14, "start"), (-8, 14, "end"))
    further = tuple((dx, dy, a) for dy in (-18, 26, -30, 38) for dx, a in ((8, "start"), (-8, "end"), (20, "start"),
                                                                            (-20, "end")))

    def hits(box: tuple[float, float, float, float], boxes: list) -> bool:
        return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes)

    for i, (px, py, text) in enumerate(points):
        w = text_width(text, 11)
        spot = None
        tries = near + ((-w / 2, -10, "start"), (-w / 2, 20, "start")) + (further if i < far else ())
        for blockers in ([avoid, labels], [labels]) if i < far else ([avoid, labels],):
            for dx, dy, anchor in tries:
                x0 = px + dx - (w if anchor == "end" else 0)
                box = (x0, py + dy - h + 3, x0 + w, py + dy + 3)
                if box[0] < bounds[0] or box[2] > bounds[2] or box[1] < bounds[1] or box[3] > bounds[3]:
                    continue
                if any(hits(box, bs) for bs in blockers):
                    continue
                spot = (px + dx, py + dy, anchor, text)
                labels.append(box)
                break
            if spot is not None:
                break
        out.append(spot)
    return out


def scatter_chart(title: str, points: Sequence[tuple[str, float, float, bool]], *, x_label: str, y_label: str,
                  x_format: Callable[[float], str] | None = None, y_format: Callable[[float], str] = _fmt,
                  unit_y: bool = False,
                  width: int = 560, names: dict[str, str] | None = None, roles: dict[str, str] | None = None) -> str:
    """Quality (y) against cost (x); points (label, x, y, on the front); the
    front is joined cheapest first. Only front points, and those given a role
    (``roles``: label -> ``recommended`` or ``baseline``, drawn apart and
    labelled first with the role's word), are labelled (where a label fits
    without overlapping another); every point names its run on hover
    (``<title>``)."""
    if not points:
        return ""
    names = names or {}
    roles = roles or {}
    left, right, top, bottom = 64, 24, 16, 48
    height = 340
    plot_w, plot_h = width - left - right, height - top - bottom
    x_lo, x_hi = _domain([p[1] for p in points], pad=0.08)
    y_lo, y_hi = _domain([p[2] for p in points], pad=0.12, unit=unit_y)

    def x(v: float) -> float:
        return left + (v - x_lo) / (x_hi - x_lo) * plot_w

    def y(v: float) -> float:
        return top + (y_hi - v) / (y_hi - y_lo) * plot_h

    body = [f"<title>{e(title)}</title>"]
    base = top + plot_h
    xt = [t for t in nice_ticks(x_lo, x_hi, 5) if x_lo <= t <= x_hi]
    for t, lab in zip(xt, [x_format(t) for t in xt] if x_format else tick_labels(xt)):
        body.append(f'<line class="grid" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{base}"/>')
        body.append(f'<text class="tick" x="{x(t):.1f}" y="{base + 16}" text-anchor="middle">{e(lab)}</text>')
    yt = [t for t in nice_ticks(y_lo, y_hi, 5) if y_lo <= t <= y_hi]
    for t, lab in zip(yt, tick_labels(yt)):
        body.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>')
        body.append(f'<text class="tick" x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{e(lab)}</text>')
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
    xf = x_format or _fmt
    dots = [(x(xv) - 6, y(yv) - 6, x(xv) + 6, y(yv) + 6) for _, xv, yv, _ in points]
    # the recommended run and the baseline are labelled first (with their role), then the front
    named = [p for p in points if p[0] in roles] + [p for p in front if p[0] not in roles]
    texts = [roles[p[0]] if p[0] in roles else short(names.get(p[0], p[0]), 30) for p in named]
    spots = dict(zip([p[0] for p in named],
                     _place_labels([(x(p[1]), y(p[2]), t) for p, t in zip(named, texts)],
                                   (left + 2, 0, width, base - 2), dots,  # clear of the y ticks
                                   far=sum(1 for p in points if p[0] in roles))))
    # dominated points first, so the front is drawn on top; the runs with a role last
    for label, xv, yv, on in sorted(points, key=lambda p: (p[0] in roles, p[3])):
        where = " (Pareto front)" if on else " (dominated)"
        role = f", {roles[label]}" if label in roles else ""
        tip = f"{label}: {y_label} {y_format(yv)}, {x_label} {xf(xv)}{where}{role}"
        spot = spots.get(label)
        text = (f'<text class="point-label" x="{spot[0]:.1f}" y="{spot[1]:.1f}" text-anchor="{spot[2]}">'
                f"{e(spot[3])}</text>") if spot else ""
        cls = "mark" + (" front" if on else "") + (f" {roles[label]}" if label in roles else "")
        body.append(f'<g class="{cls}" data-run="{e(label)}"><title>{e(tip)}</title>'
                    f'<circle class="dot" cx="{x(xv):.1f}" cy="{y(yv):.1f}" r="{6 if on or label in roles else 4.5}"/>'
                    f"{text}</g>")
    return _svg(width, height, body, title)
