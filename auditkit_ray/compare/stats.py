"""Statistics behind comparisons and leaderboards.

- ``mcnemar_exact``: two-sided exact McNemar test (scipy ``binomtest`` on the
  discordant pairs) for binary metrics.
- ``wilson`` / ``clopper_pearson``: binomial intervals for binary means;
  with n = 0 there is no interval: ``(None, None)``, as a summary with no
  scored sample stores it (``core.aggregate.wilson_interval`` too).
- ``holm``: Holm's step-down adjustment of a family of p-values.
- ``paired_permutation``: paired sign-flip (approximate randomization) test of
  the mean difference; exact enumeration when ``2**m <= n_resamples`` (``m``
  = pairs that differ), Monte Carlo otherwise with ``p = (1 + k) / (1 + R)``.
- ``corpus_permutation`` / ``corpus_bootstrap_*``: the same for corpus
  metrics, finalizing summed sufficient statistics on every resample.
- ``bootstrap_mean_ci`` / ``paired_bootstrap_ci``: percentile bootstrap.
- ``clustered_se``: cluster-robust standard error of a mean.

Every resampling function takes ``seed`` and ``n_resamples`` and is
deterministic given them. numpy and scipy are imported inside the functions
(``import auditkit_ray`` stays light); they come with the ``stats`` extra.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Callable, Sequence

from ..core.aggregate import wilson_interval
from ..errors import require

#: resamples processed per vectorized chunk are bounded by this many cells
_CHUNK_CELLS = 2_000_000


def _np():
    return require("numpy", "stats")


def _scipy_stats():
    return require("scipy.stats", "stats")


def z_value(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


# ----------------------------------------------------------------------------- binary
def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs:
    a binomial test of ``min(b, c)`` successes in ``b + c`` trials at 1/2.
    1.0 when there are no discordant pairs. Symmetric in ``b`` and ``c``."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative (b={b}, c={c})")
    n = b + c
    if n == 0:
        return 1.0
    return float(min(1.0, _scipy_stats().binomtest(min(b, c), n, 0.5).pvalue))


def wilson(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float] | tuple[None, None]:
    """Wilson score interval (no continuity correction) at ``confidence``; ``(None, None)`` when n = 0. The
    interval itself is ``core.aggregate.wilson_interval``'s, the one a run's summary stores."""
    return wilson_interval(successes, n, z_value(confidence))


def clopper_pearson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | tuple[None, None]:
    """Clopper-Pearson ("exact") interval from beta quantiles; ``(None, None)`` when n = 0."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n < 0:
        raise ValueError(f"clopper-pearson interval needs n >= 0, got {n}")
    if n == 0:
        return (None, None)
    x = int(round(successes))
    a = 1 - confidence
    beta = _scipy_stats().beta
    lo = 0.0 if x == 0 else float(beta.ppf(a / 2, x, n - x + 1))
    hi = 1.0 if x == n else float(beta.ppf(1 - a / 2, x + 1, n - x))
    return (lo, hi)


# ----------------------------------------------------------------------------- multiple testing
def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values, in the input order. ``None`` entries
    (tests that could not run) are not part of the family and stay ``None``.

    For the m p-values sorted ascending, ``p_adj(i) = max_{j<=i} min(1,
    (m - j + 1) * p(j))`` (1-based), as statsmodels' ``multipletests(method="holm")``."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    order = sorted(idx, key=lambda i: (pvalues[i], i))
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        adj = min(1.0, (m - rank) * float(pvalues[i]))  # type: ignore[arg-type]
        running = max(running, adj)
        out[i] = running
    return out


# ----------------------------------------------------------------------------- resampling
@dataclass
class TestResult:
    """A p-value with what produced it."""

    test: str
    p_value: float | None
    n_resamples: int | None = None
    seed: int | None = None
    exact: bool = False
    #: resamples whose statistic was undefined (a corpus finalize returned None)
    undefined: int = 0
    note: str | None = None


def _chunk_rows(width: int, n_resamples: int) -> int:
    return max(1, min(n_resamples, _CHUNK_CELLS // max(1, width)))


def _all_bit_rows(m: int):
    np = _np()
    codes = np.arange(2**m, dtype=np.int64)[:, None]
    bits = (codes >> np.arange(m, dtype=np.int64)[None, :]) & 1
    return bits


def paired_permutation(a: Sequence[float], b: Sequence[float], *, n_resamples: int = 10_000,
                       seed: int = 0) -> TestResult:
    """Two-sided paired sign-flip test of ``mean(b - a) == 0``.

    Pairs that do not differ carry no information and are left out of the
    enumeration; with ``m`` differing pairs and ``2**m <= n_resamples`` the
    p-value is exact, otherwise Monte Carlo with ``(1 + k) / (1 + R)``.
    Swapping ``a`` and ``b`` gives the same p-value (same draws, negated
    statistic)."""
    np = _np()
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    nz = d[d != 0]
    m = int(nz.size)
    if m == 0:
        return TestResult("paired permutation", 1.0, 0, seed, exact=True, note="no pair differs")
    obs = abs(float(nz.sum()))
    tol = 1e-9 * max(1.0, float(np.abs(nz).sum()))
    if 2**m <= n_resamples:
        signs = 1 - 2 * _all_bit_rows(m)
        stats = np.abs(signs @ nz)
        return TestResult("paired permutation", float(np.mean(stats >= obs - tol)), 2**m, seed, exact=True)
    rng = np.random.default_rng(seed)
    count = 0
    done = 0
    step = _chunk_rows(m, n_resamples)
    total = float(nz.sum())
    while done < n_resamples:
        k = min(step, n_resamples - done)
        # one random byte gives eight fair signs; with b the 0/1 bits the flipped
        # sum is sum((1 - 2b) d) = sum(d) - 2 (b . d): a float matmul, no int64 matrix
        bits = np.unpackbits(rng.integers(0, 256, size=(k, (m + 7) // 8), dtype=np.uint8), axis=1, count=m)
        count += int(np.sum(np.abs(total - 2.0 * (bits.astype(np.float64) @ nz)) >= obs - tol))
        done += k
    return TestResult("paired permutation", (1 + count) / (1 + n_resamples), n_resamples, seed)


def _percentile_ci(samples, confidence: float) -> tuple[float, float] | None:
    np = _np()
    s = np.asarray(samples, dtype=float)
    s = s[np.isfinite(s)]
    if s.size == 0:
        return None
    a = (1 - confidence) / 2
    lo, hi = np.quantile(s, [a, 1 - a])
    return (float(lo), float(hi))


def bootstrap_mean_ci(x: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 10_000,
                      seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of a mean."""
    np = _np()
    v = np.asarray(x, dtype=float)
    n = v.size
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    step = _chunk_rows(n, n_resamples)
    for start in range(0, n_resamples, step):
        k = min(step, n_resamples - start)
        means[start:start + k] = v[rng.integers(0, n, size=(k, n))].mean(axis=1)
    return _percentile_ci(means, confidence)


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 10_000,
                        seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``mean(b - a)`` resampling pairs."""
    np = _np()
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if d.size == 0:
        return None
    if not np.any(d):
        return (0.0, 0.0)
    return bootstrap_mean_ci(d, confidence=confidence, n_resamples=n_resamples, seed=seed)


# ----------------------------------------------------------------------------- corpus metrics
def _finalize_rows(finalize: Callable[[list[float]], Any], rows) -> Any:
    np = _np()
    out = np.empty(len(rows))
    for i, r in enumerate(rows):
        v = finalize([float(x) for x in r])
        out[i] = float(v) if v is not None else np.nan
    return out


def corpus_value(finalize: Callable[[list[float]], Any], stats) -> float | None:
    np = _np()
    s = np.asarray(stats, dtype=float)
    if s.size == 0:
        return None
    v = finalize([float(x) for x in s.sum(axis=0)])
    return None if v is None else float(v)


def corpus_permutation(sa, sb, finalize: Callable[[list[float]], Any], *, n_resamples: int = 10_000,
                       seed: int = 0) -> TestResult:
    """Paired approximate randomization for a corpus metric (as sacrebleu's
    paired test): each pair's sufficient statistics are swapped between the
    two systems with probability 1/2, the totals finalized, and the absolute
    difference compared with the observed one."""
    np = _np()
    A = np.asarray(sa, dtype=float)
    B = np.asarray(sb, dtype=float)
    if A.shape != B.shape or A.ndim != 2:
        raise ValueError(f"statistics of different shapes {A.shape} vs {B.shape}")
    totA, totB = A.sum(axis=0), B.sum(axis=0)
    fa, fb = finalize([float(x) for x in totA]), finalize([float(x) for x in totB])
    if fa is None or fb is None:
        return TestResult("paired approximate randomization (corpus)", None, n_resamples, seed,
                          note="corpus score undefined")
    obs = abs(float(fb) - float(fa))
    D = B - A
    rows = np.any(D != 0, axis=1)
    Dn = D[rows]
    m = int(Dn.shape[0])
    if m == 0:
        return TestResult("paired approximate randomization (corpus)", 1.0, 0, seed, exact=True, note="no pair differs")
    tol = 1e-9 * max(1.0, obs)

    def count_chunk(mask) -> tuple[int, int]:
        shift = mask @ Dn
        da = _finalize_rows(finalize, totA + shift)
        db = _finalize_rows(finalize, totB - shift)
        delta = np.abs(db - da)
        ok = np.isfinite(delta)
        return int(np.sum(delta[ok] >= obs - tol)), int(np.sum(~ok))

    if 2**m <= n_resamples:
        count, undefined = count_chunk(_all_bit_rows(m).astype(float))
        total = 2**m
        return TestResult("paired approximate randomization (corpus)",
                          count / max(1, total - undefined) if total > undefined else None,
                          total, seed, exact=True, undefined=undefined)
    rng = np.random.default_rng(seed)
    count = undefined = done = 0
    step = _chunk_rows(m * A.shape[1], n_resamples)
    while done < n_resamples:
        k = min(step, n_resamples - done)
        c, u = count_chunk(rng.integers(0, 2, size=(k, m)).astype(float))
        count, undefined, done = count + c, undefined + u, done + k
    valid = n_resamples - undefined
    return TestResult("paired approximate randomization (corpus)", (1 + count) / (1 + valid), n_resamples, seed,
                      undefined=undefined)


def _bootstrap_sums(S, n_resamples: int, seed: int):
    """Yield chunks of resampled column sums (rows drawn with replacement)."""
    np = _np()
    n, k = S.shape
    rng = np.random.default_rng(seed)
    step = _chunk_rows(n * k, n_resamples)
    for start in range(0, n_resamples, step):
        c = min(step, n_resamples - start)
        idx = rng.integers(0, n, size=(c, n))
        yield idx


def corpus_bootstrap_ci(stats, finalize: Callable[[list[float]], Any], *, confidence: float = 0.95,
                        n_resamples: int = 1_000, seed: int = 0) -> tuple[tuple[float, float] | None, int]:
    """Percentile bootstrap interval of a corpus score: resample samples,
    sum their statistics, finalize. Returns (interval, undefined resamples)."""
    np = _np()
    S = np.asarray(stats, dtype=float)
    if S.ndim != 2 or S.shape[0] == 0:
        return None, 0
    vals = []
    for idx in _bootstrap_sums(S, n_resamples, seed):
        vals.append(_finalize_rows(finalize, S[idx].sum(axis=1)))
    v = np.concatenate(vals)
    return _percentile_ci(v, confidence), int(np.sum(~np.isfinite(v)))


def corpus_paired_bootstrap_ci(sa, sb, finalize: Callable[[list[float]], Any], *, confidence: float = 0.95,
                               n_resamples: int = 1_000, seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``finalize(B) - finalize(A)``, resampling pairs."""
    np = _np()
    A = np.asarray(sa, dtype=float)
    B = np.asarray(sb, dtype=float)
    if A.ndim != 2 or A.shape[0] == 0:
        return None
    if np.array_equal(A, B):
        return (0.0, 0.0)
    vals = []
    for idx in _bootstrap_sums(A, n_resamples, seed):
        vals.append(_finalize_rows(finalize, B[idx].sum(axis=1)) - _finalize_rows(finalize, A[idx].sum(axis=1)))
    return _percentile_ci(np.concatenate(vals), confidence)


# ----------------------------------------------------------------------------- clustered errors
def clustered_se(x: Sequence[float], clusters: Sequence[Any]) -> tuple[float, int] | None:
    """Cluster-robust (CR1-style) standard error of the mean and the number
    of clusters G: ``sqrt(G / (G - 1) * sum_g (sum_{i in g} (x_i - mean))**2) / n``.
    With one observation per cluster this is the ordinary standard error.
    ``None`` with fewer than two clusters."""
    n = len(x)
    if n == 0 or len(clusters) != n:
        return None
    mean = sum(x) / n
    sums: dict[Any, float] = {}
    for v, g in zip(x, clusters):
        sums[g] = sums.get(g, 0.0) + (v - mean)
    G = len(sums)
    if G < 2:
        return None
    var = G / (G - 1) * sum(s * s for s in sums.values()) / (n * n)
    return math.sqrt(var), G


def t_value(confidence: float, df: int) -> float:
    return float(_scipy_stats().t.ppf(1 - (1 - confidence) / 2, df))
