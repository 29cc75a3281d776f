"""One-sided non-inferiority of a candidate against a baseline on paired per-sample scores.

The hypotheses, read through the metric's direction: with ``x_i`` the candidate's advantage on sample ``i``
(``candidate - baseline`` for a higher-is-better metric, ``baseline - candidate`` for a lower-is-better one)
and ``margin > 0`` in the metric's units,

    H0: mean(x) <= -margin   (the candidate is worse by the margin or more)
    H1: mean(x) >  -margin   (non-inferior)

``noninferiority`` takes the two arrays of paired scores (the samples both runs scored, in one order) and
returns the one-sided p-value of H0, the one-sided lower confidence bound of ``mean(x)`` (non-inferior at
``alpha`` exactly when the bound lies above ``-margin``) and the upper bound (the candidate is shown worse than
the margin when it lies below ``-margin``). Methods:

- ``tango`` (binary scores, the default for them): Tango's (1998) asymptotic score test for the difference of
  paired proportions, its variance taken at the restricted maximum-likelihood estimate of the discordant cell
  under H0; the bounds invert the same score statistic. Unlike the Wald test it does not collapse when few or
  no pairs are discordant (Wald's variance is then 0 and it declares non-inferiority with p = 0).
- ``t`` (continuous scores, the default for them): the one-sample t test of the differences against
  ``-margin``, and its t bounds. benchmarks/RESULTS.md ("issue 52") gives the region where it holds its level:
  it is liberal on strongly skewed differences at small n.
- ``bootstrap-t``: the studentized bootstrap of the differences (``n_resamples`` resamples, ``seed``), which
  corrects for skewness where the plain t does not; slower, and random (deterministic given the seed).

Degenerate cases get a stated convention (``note`` says which applied), never a NaN:

- no paired sample: no test (``p_value`` None);
- one paired sample of a continuous metric: no variance, no test;
- constant differences (every pair differs by the same amount, ties included): no variance for a t statistic,
  so the exact sign test decides: ``p = 0.5 ** n`` when the common difference lies above ``-margin``, else 1;
  the bounds are the common difference itself;
- binary scores with no discordant pair: Tango's statistic stays defined (its restricted variance is positive
  for 0 < margin < 1): no convention needed, and it needs about ``z**2 (1 - margin) / margin`` pairs to declare
  non-inferiority;
- a binary margin of 1 or more: the difference of two proportions cannot reach it: ``p = 0`` by convention.

``n_needed`` is the number of paired samples at which the test would decide (either way) if the observed
difference and spread held: ``z**2 var / (diff + margin)**2`` with the normal quantile at the level given.

numpy and scipy load inside the functions that need them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

from ..core.metric import Direction
from ..errors import ConfigError

METHODS = ("auto", "tango", "t", "bootstrap-t")
#: the smallest n at which each continuous method was measured to hold its level (benchmarks/RESULTS.md, issue 52)
BOOTSTRAP_MIN_N = 50
T_MIN_N = 500
#: cells of one chunk of bootstrap resamples (resamples x pairs), as ``stats`` bounds its own
_CHUNK_CELLS = 2_000_000
#: the methods' names in outputs
METHOD_NAMES = {"tango": "Tango score test (restricted MLE)", "t": "paired t test",
                "bootstrap-t": "paired studentized bootstrap"}


@dataclass
class NIResult:
    """One candidate against the baseline. Differences are the candidate's advantage (positive: better)."""

    method: str
    n: int
    margin: float
    alpha: float
    #: mean advantage over the paired samples (None without a pair)
    difference: float | None = None
    statistic: float | None = None
    #: one-sided p-value of H0: mean advantage <= -margin
    p_value: float | None = None
    #: one-sided (1 - alpha) bounds of the mean advantage
    lower: float | None = None
    upper: float | None = None
    #: pairs where the candidate is better, worse, equal
    better: int = 0
    worse: int = 0
    same: int = 0
    #: the per-pair variance ``n_needed`` scales (Tango: at the restricted MLE; t: the sample variance)
    variance: float | None = None
    n_resamples: int | None = None
    seed: int | None = None
    #: the degenerate-case convention that applied, or why there is no test
    note: str | None = None

    @property
    def name(self) -> str:
        return METHOD_NAMES.get(self.method, self.method)


def _z(alpha: float) -> float:
    return NormalDist().inv_cdf(1 - alpha)


def _check(margin: float, alpha: float) -> None:
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise ConfigError(f"non-inferiority margin must be a positive number, got {margin!r}")
    if not 0 < alpha < 0.5:
        raise ConfigError(f"non-inferiority alpha must be in (0, 0.5), got {alpha!r}")


def advantages(baseline: Sequence[float], candidate: Sequence[float], direction: Direction) -> list[float]:
    """The candidate's per-sample advantage, read through the direction (positive: better)."""
    if len(baseline) != len(candidate):
        raise ValueError(f"paired scores of different lengths ({len(baseline)} vs {len(candidate)})")
    sign = 1.0 if direction is Direction.MAXIMIZE else -1.0
    return [sign * (float(c) - float(b)) for b, c in zip(baseline, candidate)]


def is_binary(*arrays: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for a in arrays for v in a) and any(len(a) for a in arrays)


def noninferiority(baseline: Sequence[float], candidate: Sequence[float], *, margin: float,
                   direction: Direction = Direction.MAXIMIZE, alpha: float = 0.05, method: str = "auto",
                   n_resamples: int = 10_000, seed: int = 0) -> NIResult:
    """The one-sided non-inferiority test of ``candidate`` against ``baseline`` (paired, same order)."""
    _check(margin, alpha)
    if method not in METHODS:
        raise ConfigError(f"non-inferiority method must be one of {', '.join(METHODS)}, got {method!r}")
    x = advantages(baseline, candidate, direction)
    binary = is_binary(baseline, candidate)
    if method == "auto":
        method = "tango" if binary else "bootstrap-t"
    if method == "tango" and not binary and x:
        raise ConfigError("the Tango score test is for binary (0/1) scores; use t or bootstrap-t")
    n = len(x)
    out = NIResult(method=method, n=n, margin=float(margin), alpha=alpha,
                   better=sum(v > 0 for v in x), worse=sum(v < 0 for v in x), same=sum(v == 0 for v in x))
    if n == 0:
        out.note = "no paired sample: no test"
        return out
    out.difference = sum(x) / n
    if method == "tango":
        return _tango(out)
    return _continuous(out, x, method, n_resamples=n_resamples, seed=seed)


# ----------------------------------------------------------------------------- binary: Tango's score test
def tango_restricted_q(b: int, c: int, n: int, delta0: float) -> float:
    """The restricted MLE of P(worse) under ``P(better) - P(worse) = delta0``: the root in [0, 1] of
    ``2n q**2 + (-(b + c) + (2n - b + c) delta0) q - c delta0 (1 - delta0) = 0`` (Tango 1998, the profile
    likelihood's score equation), with ``b`` pairs better and ``c`` worse."""
    wa = 2.0 * n
    wb = -b - c + (2.0 * n - b + c) * delta0
    wc = -c * delta0 * (1.0 - delta0)
    disc = max(0.0, wb * wb - 4.0 * wa * wc)
    # the numerically stable root: (-B + sqrt(D)) / 2A, written without cancellation when B > 0
    if wb <= 0:
        return (math.sqrt(disc) - wb) / (2.0 * wa)
    return (-2.0 * wc) / (wb + math.sqrt(disc)) if (wb + math.sqrt(disc)) > 0 else 0.0


def tango_z(b: int, c: int, n: int, delta0: float) -> float:
    """Tango's score statistic for H0: P(better) - P(worse) = delta0, large when the difference is above it."""
    q = tango_restricted_q(b, c, n, delta0)
    var = 2.0 * q + delta0 * (1.0 - delta0)
    num = b - c - n * delta0
    if var <= 0:  # only at delta0 = 0 with no discordant pair: nothing to test against
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(n * var)


def _solve(f, lo: float, hi: float) -> float:
    """The root of a monotone ``f`` on [lo, hi] (``f(lo)`` and ``f(hi)`` of opposite signs), to 1e-13."""
    from scipy.optimize import brentq

    return float(brentq(f, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=500))


def tango_bounds(b: int, c: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided (1 - alpha) bounds of P(better) - P(worse): where Tango's statistic crosses -/+ z."""
    z = _z(alpha)
    est = (b - c) / n
    eps = 1e-12
    f_lo = lambda d: tango_z(b, c, n, d) - z  # noqa: E731 - decreasing in d: positive below the bound
    f_hi = lambda d: tango_z(b, c, n, d) + z  # noqa: E731
    lower = -1.0 if f_lo(-1.0 + eps) <= 0 else (est if f_lo(est) >= 0 else _solve(f_lo, -1.0 + eps, est))
    upper = 1.0 if f_hi(1.0 - eps) >= 0 else (est if f_hi(est) <= 0 else _solve(f_hi, est, 1.0 - eps))
    return lower, upper


def _tango(out: NIResult) -> NIResult:
    b, c, n, m = out.better, out.worse, out.n, out.margin
    out.lower, out.upper = tango_bounds(b, c, n, out.alpha)
    if m >= 1.0:
        out.statistic, out.p_value = math.inf, 0.0
        out.note = "a margin of 1 or more cannot be reached by a difference of proportions: p = 0 by convention"
        return out
    out.statistic = tango_z(b, c, n, -m)
    out.p_value = 1.0 - NormalDist().cdf(out.statistic) if math.isfinite(out.statistic) else (
        0.0 if out.statistic > 0 else 1.0)
    q = tango_restricted_q(b, c, n, -m)
    out.variance = 2.0 * q - m - m * m
    if b + c == 0:
        out.note = "no discordant pair: Tango's restricted variance is still positive; the test stands as computed"
    return out


# ----------------------------------------------------------------------------- continuous
def _continuous(out: NIResult, x: list[float], method: str, *, n_resamples: int, seed: int) -> NIResult:
    n, m, alpha = out.n, out.margin, out.alpha
    mean = out.difference
    assert mean is not None
    if n < 2:
        out.note = "one paired sample: no variance, no test"
        return out
    if all(v == x[0] for v in x):
        out.lower = out.upper = x[0]
        out.p_value = 0.5 ** n if x[0] > -m else 1.0
        out.note = ("constant differences: no variance for a t statistic; the exact sign test decides "
                    "(p = 0.5^n when the common difference lies above -margin, else 1)")
        return out
    var = sum((v - mean) ** 2 for v in x) / (n - 1)
    se = math.sqrt(var / n)
    out.variance = var
    out.statistic = (mean + m) / se
    if method == "bootstrap-t" and n < BOOTSTRAP_MIN_N:
        out.note = (f"n = {n}: below the n = {BOOTSTRAP_MIN_N} from which the studentized bootstrap was measured to "
                    "hold its level (it rejected up to 0.068 at alpha 0.05 with n = 20: benchmarks/RESULTS.md)")
    elif method == "t" and n < T_MIN_N:
        out.note = (f"n = {n}: the paired t holds its level on symmetric or bounded differences; on skewed ones it "
                    f"was measured liberal below n = {T_MIN_N} (benchmarks/RESULTS.md)")
    if method == "t":
        from scipy.stats import t as student

        out.p_value = float(student.sf(out.statistic, n - 1))
        q = float(student.ppf(1 - alpha, n - 1))
        out.lower, out.upper = mean - q * se, mean + q * se
        return out
    return _bootstrap_t(out, x, se, n_resamples=n_resamples, seed=seed)


def _bootstrap_t(out: NIResult, x: list[float], se: float, *, n_resamples: int, seed: int) -> NIResult:
    """Studentized bootstrap: the distribution of ``(mean* - mean) / se*`` over resamples of the pairs stands for
    that of ``(mean - mu) / se``; p = (1 + #{T* >= t}) / (1 + R) and the bounds are its quantiles."""
    from ..errors import require

    np = require("numpy", "stats")
    v = np.asarray(x, dtype=float)
    n = v.size
    mean = float(v.mean())
    rng = np.random.default_rng(seed)
    ts = np.empty(n_resamples)
    step = max(1, min(n_resamples, _CHUNK_CELLS // n))  # resamples drawn at once, bounded in memory
    for start in range(0, n_resamples, step):
        k = min(step, n_resamples - start)
        res = v[rng.integers(0, n, size=(k, n))]
        m = res.mean(axis=1)
        s = res.std(axis=1, ddof=1) / math.sqrt(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (m - mean) / s
        # a resample of one repeated value has no spread: its statistic is 0 (it sits at the mean) or infinite
        t[(s == 0) & (m == mean)] = 0.0
        t[(s == 0) & (m > mean)] = np.inf
        t[(s == 0) & (m < mean)] = -np.inf
        ts[start:start + k] = t
    t_obs = out.statistic
    assert t_obs is not None
    out.p_value = float((1 + np.sum(ts >= t_obs)) / (1 + n_resamples))
    hi_q, lo_q = np.quantile(np.clip(ts, -1e300, 1e300), [1 - out.alpha, out.alpha])
    out.lower, out.upper = mean - float(hi_q) * se, mean - float(lo_q) * se
    out.n_resamples, out.seed = n_resamples, seed
    return out


# ----------------------------------------------------------------------------- planning
def n_needed(result: NIResult, alpha: float | None = None) -> int | None:
    """Paired samples at which the test would decide, either way, if the observed difference and spread held
    (normal approximation at one-sided ``alpha``, default the result's); None when the difference sits on the
    margin or there is no spread to scale."""
    a = result.alpha if alpha is None else alpha
    if result.difference is None or result.variance is None or result.variance <= 0:
        return None
    gap = result.difference + result.margin
    if gap == 0:
        return None
    return max(2, math.ceil(_z(a) ** 2 * result.variance / gap ** 2))
