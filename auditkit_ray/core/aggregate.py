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
    #: repeated samples: clusters (samples) with a scored value, and over them the sums of s_g**2, s_g*n_g and
    #: n_g**2 (s_g, n_g: a sample's sum and count of scored values), which give the cluster-robust error at merge
    clusters: int = 0
    c_ss: float = 0.0
    c_sn: float = 0.0
    c_nn: float = 0.0

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
            clusters=self.clusters + other.clusters,  # a sample's repeats are in one shard: clusters add up
            c_ss=self.c_ss + other.c_ss,
            c_sn=self.c_sn + other.c_sn,
            c_nn=self.c_nn + other.c_nn,
        )
        out.counts = {k: self.counts.get(k, 0) + other.counts.get(k, 0) for k in set(self.counts) | set(other.counts)}
        return out

    @classmethod
    def of(cls, scores: Iterable[Score]) -> "MeanStats":
        st = cls()
        for s in scores:
            st.add(s)
        return st


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _t_cdf(t: float, df: int) -> float:
    if t == 0:
        return 0.5
    x = df / (df + t * t)
    if x <= 0.0:
        return 1.0 if t > 0 else 0.0
    a, b = df / 2.0, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    ib = front * _betacf(a, b, x) / a if x < (a + 1) / (a + b + 2) else 1.0 - front * _betacf(b, a, 1 - x) / b
    return 1.0 - 0.5 * ib if t >= 0 else 0.5 * ib


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (stdlib only: the core does not import scipy; agrees with scipy to ~1e-10)."""
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


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
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / denom  # max: rounding below 0
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
    if 2 <= stats.clusters < n:
        # repeated samples: the repeats of one sample are not independent, so the cluster-robust error and
        # t(G - 1), as the leaderboard computes it from the per-sample table (one interval everywhere)
        g = stats.clusters
        resid = max(0.0, stats.c_ss - 2 * mean * stats.c_sn + mean * mean * stats.c_nn)
        cse = math.sqrt(g / (g - 1) * resid) / n
        t = t_quantile(1 - (1 - confidence) / 2, g - 1)
        lo, hi = mean - t * cse, mean + t * cse
        if stats.binary:
            lo, hi = max(0.0, lo), min(1.0, hi)
        out.update(ci_low=lo, ci_high=hi, ci_method=f"clustered t ({g} clusters, repeats clustered by sample_id)")
    elif stats.binary:
        lo, hi = wilson_interval(stats.total, n)
        out.update(ci_low=lo, ci_high=hi, ci_method="wilson")
    elif n > 1:
        out.update(ci_low=mean - Z95 * se, ci_high=mean + Z95 * se, ci_method="normal")
    return out
