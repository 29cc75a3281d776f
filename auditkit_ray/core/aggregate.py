"""Aggregation: only ``scored`` values enter means; every status is counted.

``MeanStats`` is a mergeable sufficient statistic (n, sum, sum of squares,
status counts), so per-shard summaries merge exactly in any order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

from .types import STATUS_VALUE, Score, Status

Z95 = 1.959963984540054


@dataclass
class MeanStats:
    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    binary: bool = True
    counts: dict[str, int] = field(default_factory=lambda: {s.value: 0 for s in Status})

    def add(self, score: Score) -> None:
        self.counts[STATUS_VALUE[score.status]] += 1
        if score.status is Status.SCORED:
            v = float(score.value)  # type: ignore[arg-type]
            self.n += 1
            self.total += v
            self.total_sq += v * v
            if v not in (0.0, 1.0):
                self.binary = False

    def merge(self, other: "MeanStats") -> "MeanStats":
        out = MeanStats(
            n=self.n + other.n,
            total=self.total + other.total,
            total_sq=self.total_sq + other.total_sq,
            binary=self.binary and other.binary,
        )
        out.counts = {k: self.counts.get(k, 0) + other.counts.get(k, 0) for k in set(self.counts) | set(other.counts)}
        return out

    @classmethod
    def of(cls, scores: Iterable[Score]) -> "MeanStats":
        st = cls()
        for s in scores:
            st.add(s)
        return st


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float] | tuple[None, None]:
    """Wilson score interval at normal quantile ``z``. n = 0: no interval,
    ``(None, None)``, which is how a summary stores it (and shows unknown)."""
    if n < 0:
        raise ValueError(f"wilson interval needs n >= 0, got {n}")
    if n == 0:
        return (None, None)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def summarize(stats: MeanStats, confidence: float = 0.95) -> dict:
    """Mean, n, status counts, standard error and a 95% interval.

    Binary metrics get a Wilson interval (good at small n); others a normal
    interval on the standard error of the mean. With no scored sample
    (n = 0) mean, stderr and the interval are None: the metric is unknown."""
    n = stats.n
    total_rows = sum(stats.counts.values())
    out: dict = {
        "n": n,
        "total": total_rows,
        "counts": dict(sorted(stats.counts.items())),
        "unscored": total_rows - n,
        "mean": None,
        "stderr": None,
        "ci_low": None,
        "ci_high": None,
        "ci_method": None,
        "confidence": confidence,
    }
    if n == 0:
        return out
    mean = stats.total / n
    var = max(0.0, stats.total_sq / n - mean * mean) * (n / (n - 1)) if n > 1 else 0.0
    se = math.sqrt(var / n) if n > 1 else 0.0
    out.update(mean=mean, stderr=se)
    if stats.binary:
        lo, hi = wilson_interval(stats.total, n)
        out.update(ci_low=lo, ci_high=hi, ci_method="wilson")
    elif n > 1:
        out.update(ci_low=mean - Z95 * se, ci_high=mean + Z95 * se, ci_method="normal")
    return out
