"""Plain aligned text tables and number formatting for humans."""

from __future__ import annotations

import math
from typing import Any, Sequence


def num(v: float | None, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}"


def pval(p: float | None) -> str:
    if p is None:
        return "-"
    if p < 1e-4:
        return f"{p:.1e}"
    return f"{p:.4f}"


def pct(v: float | None, digits: int = 1) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{100 * v:.{digits}f}%"


def signed(v: float | None, digits: int = 4) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:+.{digits}f}"


def interval(lo: float | None, hi: float | None, digits: int = 3) -> str:
    if lo is None or hi is None:
        return "-"
    return f"[{num(lo, digits)}, {num(hi, digits)}]"


def size(v: int | float | None) -> str:
    if v is None:
        return "-"
    v = float(v)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(v) < 1000 or unit == "TB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1000
    return "-"  # pragma: no cover


def _is_numeric(cell: str) -> bool:
    c = cell.strip().rstrip("%*").replace("[", "").replace("]", "")
    if c in ("-", ""):
        return False
    try:
        float(c.split()[0].rstrip(","))
        return True
    except ValueError:
        return False


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> list[str]:
    """Aligned columns: numbers right-aligned, text left-aligned."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    numeric = [bool(cells) and all(_is_numeric(r[i]) or r[i] == "-" for r in cells)
               and any(_is_numeric(r[i]) for r in cells)
               for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        out = [c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        return (indent + "  ".join(out)).rstrip()

    return [line(list(headers)), indent + "  ".join("-" * w for w in widths)] + [line(r) for r in cells]


def short_labels(labels: Sequence[str], width: int) -> tuple[dict[str, str], str | None]:
    """Run labels that fit ``width`` columns, and a line saying how they were shortened (None: unchanged).

    Sweep runs are named ``<sweep>/<key>=<value>/...``: when a label is too long they are shown as the values of
    the keys that vary, joined by ``/`` (``gemma-9b/0.1/int8`` for ``family/pruning/quantization``); other labels
    lose their common ``/``-separated prefix; whatever is still too long is cut in the middle.
    """
    labels = list(dict.fromkeys(labels))
    if all(len(lab) <= width for lab in labels):
        return {lab: lab for lab in labels}, None
    parsed = {lab: dict(p.split("=", 1) for p in lab.split("/")[1:] if "=" in p) for lab in labels}
    how = None
    names: dict[str, str] = {}
    if len(labels) > 1 and all(parsed.values()):
        keys = list(dict.fromkeys(k for v in parsed.values() for k in v))
        varying = [k for k in keys if len({v.get(k) for v in parsed.values()}) > 1]
        names = {lab: "/".join(parsed[lab].get(k, "-") for k in varying) for lab in labels}
        if varying and len(set(names.values())) == len(labels):
            how = f"runs shown as {'/'.join(varying)} (the values of the sweep parameters that vary)"
        else:
            names = {}
    if not names:
        split = [lab.split("/") for lab in labels]
        common = 0
        while len(labels) > 1 and all(len(p) > common + 1 for p in split) and len({p[common] for p in split}) == 1:
            common += 1
        names = {lab: "/".join(p[common:]) for lab, p in zip(labels, split)}
        if common:
            how = f"runs shown without their common prefix {'/'.join(split[0][:common])}/"
    out = {}
    for lab, n in names.items():
        if len(n) > width:
            head = (width - 1) // 2
            n = n[:head] + "…" + n[len(n) - (width - 1 - head):]
            how = how or "long run names cut in the middle"
        out[lab] = n
    return out, how
