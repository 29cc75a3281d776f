"""The one-sided non-inferiority test (compare/noninferiority.py) against reference implementations, to 1e-9,
on random paired data: the paired t against scipy's ``ttest_1samp``; Tango's score test against an independent
implementation (the restricted MLE found by a root finder on the profile likelihood's score equation as the
likelihood gives it, the multinomial variance of the difference there, scipy's normal tail, and bounds found
by inverting that statistic with a root finder), cross-checked against a constrained maximisation of the full
four-cell likelihood; the studentized bootstrap against a plain loop over the same resamples. Then the
stated conventions for degenerate data, and the direction."""

from __future__ import annotations

import math
import random

import pytest

from auditkit_ray.compare.noninferiority import n_needed, noninferiority, tango_restricted_q, tango_z
from auditkit_ray.core.metric import Direction
from auditkit_ray.errors import ConfigError

scipy_stats = pytest.importorskip("scipy.stats")
np = pytest.importorskip("numpy")
TOL = 1e-9


def _paired(rng: random.Random, n: int, binary: bool) -> tuple[list[float], list[float]]:
    if binary:
        p, flip = rng.uniform(0.2, 0.9), rng.uniform(0.02, 0.4)
        a = [float(rng.random() < p) for _ in range(n)]
        b = [1.0 - x if rng.random() < flip else x for x in a]
        return a, b
    skill = rng.uniform(-0.1, 0.1)
    a = [rng.betavariate(2, 3) for _ in range(n)]
    return a, [min(1.0, max(0.0, x + skill + rng.gauss(0, 0.15))) for x in a]


def test_paired_t_p_values_and_bounds_equal_scipy_ttest_1samp_to_1e_9():
    rng = random.Random(52)
    for trial in range(60):
        n = rng.choice([3, 7, 20, 50, 137, 500, 1000])
        a, b = _paired(rng, n, binary=False)
        margin, alpha = rng.uniform(0.001, 0.2), rng.choice([0.01, 0.025, 0.05, 0.1])
        res = noninferiority(a, b, margin=margin, alpha=alpha, method="t")
        d = np.asarray(b) - np.asarray(a)
        ref = scipy_stats.ttest_1samp(d, popmean=-margin, alternative="greater")
        low = ref.confidence_interval(confidence_level=1 - alpha).low
        high = scipy_stats.ttest_1samp(d, popmean=-margin, alternative="less").confidence_interval(1 - alpha).high
        assert res.method == "t" and res.n == n
        assert abs(res.p_value - ref.pvalue) <= TOL, (trial, res.p_value, ref.pvalue)
        assert abs(res.statistic - ref.statistic) <= TOL * max(1.0, abs(ref.statistic))
        assert abs(res.lower - low) <= TOL and abs(res.upper - high) <= TOL, (trial, res.lower, low)
        assert (res.p_value <= alpha) == (res.lower > -margin)


def _ref_restricted_q(b: int, c: int, n: int, d0: float) -> float:
    """P(worse) maximising b log(q + d0) + c log(q) + (n - b - c) log(1 - 2q - d0) (the multinomial likelihood
    with P(better) - P(worse) = d0 and the two concordant cells merged), by a root finder on its derivative."""
    from scipy.optimize import brentq

    lo, hi = max(0.0, -d0), (1.0 - d0) / 2.0

    def score(q: float) -> float:
        s = -2.0 * (n - b - c) / (1.0 - 2.0 * q - d0)
        if b:
            s += b / (q + d0)
        if c:
            s += c / q
        return s

    eps = 1e-15
    if score(lo + eps) <= 0:
        return lo  # the maximum sits on the boundary (no pair on the side that would lift it)
    if score(hi - eps) >= 0:
        return hi
    return brentq(score, lo + eps, hi - eps, xtol=1e-16, rtol=1e-15, maxiter=1000)


def _ref_z(b: int, c: int, n: int, d0: float) -> float:
    q = _ref_restricted_q(b, c, n, d0)
    p_better, p_worse = q + d0, q
    var = (p_better + p_worse - (p_better - p_worse) ** 2) / n  # the variance of (b - c) / n at the restricted MLE
    return ((b - c) / n - d0) / math.sqrt(var)


def _ref_bound(b: int, c: int, n: int, alpha: float, upper: bool) -> float:
    from scipy.optimize import brentq

    z = scipy_stats.norm.ppf(1 - alpha)
    est = (b - c) / n
    f = (lambda d: _ref_z(b, c, n, d) + z) if upper else (lambda d: _ref_z(b, c, n, d) - z)
    end = 1.0 - 1e-12 if upper else -1.0 + 1e-12
    if (f(end) >= 0) if upper else (f(end) <= 0):
        return 1.0 if upper else -1.0
    start = est + 1e-13 if upper else est - 1e-13  # at the estimate itself the statistic is 0 (or 0/0)
    return brentq(f, start, end, xtol=1e-16, rtol=1e-15, maxiter=1000) if upper else brentq(
        f, end, start, xtol=1e-16, rtol=1e-15, maxiter=1000)


def test_tango_p_values_and_bounds_equal_an_independent_implementation_to_1e_9():
    rng = random.Random(1998)
    checked = 0
    for trial in range(80):
        n = rng.choice([10, 20, 33, 50, 100, 250, 1000])
        a, b = _paired(rng, n, binary=True)
        if trial % 10 == 0:
            b = list(a)  # no discordant pair at all
        margin, alpha = rng.choice([0.01, 0.02, 0.05, 0.1, 0.2]), rng.choice([0.025, 0.05, 0.1])
        res = noninferiority(a, b, margin=margin, alpha=alpha)
        better = sum(y > x for x, y in zip(a, b))
        worse = sum(y < x for x, y in zip(a, b))
        assert res.method == "tango" and (res.better, res.worse) == (better, worse)
        z = _ref_z(better, worse, n, -margin)
        assert abs(res.statistic - z) <= TOL * max(1.0, abs(z)), (trial, res.statistic, z)
        assert abs(res.p_value - scipy_stats.norm.sf(z)) <= TOL, (trial, res.p_value)
        assert abs(res.lower - _ref_bound(better, worse, n, alpha, upper=False)) <= TOL, trial
        assert abs(res.upper - _ref_bound(better, worse, n, alpha, upper=True)) <= TOL, trial
        assert (res.p_value <= alpha) == (res.lower > -margin)
        checked += 1
    assert checked == 80


def test_tangos_restricted_mle_maximises_the_full_four_cell_likelihood():
    """A second, structurally different reference: maximise the multinomial likelihood over all four cells
    under the constraint, with no merging of the concordant cells and no derivative taken by hand."""
    from scipy.optimize import minimize

    for n11, b, c, n00, d0 in [(1, 1, 7, 12, -0.1), (43, 0, 1, 6, -0.05), (30, 9, 2, 21, -0.2), (50, 3, 3, 44, -0.02),
                               (10, 0, 0, 10, -0.1)]:
        n = n11 + b + c + n00

        def nll(p):  # p = (p11, p_better, p_worse); p00 = 1 - sum
            p00 = 1 - p.sum()
            cells = [(n11, p[0]), (b, p[1]), (c, p[2]), (n00, p00)]
            return -sum(k * math.log(max(v, 1e-300)) for k, v in cells if k)

        cons = [{"type": "eq", "fun": lambda p: p[1] - p[2] - d0}, {"type": "ineq", "fun": lambda p: 1 - p.sum()}]
        best = minimize(nll, x0=np.array([0.3, 0.2, 0.2 - d0]), constraints=cons, bounds=[(0, 1)] * 3,
                        method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000})
        assert abs(best.x[2] - tango_restricted_q(b, c, n, d0)) < 1e-5, (n11, b, c, n00, best.x)


def test_tango_at_a_zero_margin_is_mcnemars_score_statistic():
    for b, c, n in [(9, 2, 44), (1, 7, 21), (30, 30, 100), (0, 5, 50)]:
        assert abs(tango_z(b, c, n, 0.0) - (b - c) / math.sqrt(b + c)) < 1e-12


def test_the_studentized_bootstrap_equals_a_plain_loop_over_the_same_resamples():
    rng = random.Random(7)
    for n, seed in [(12, 0), (40, 3), (97, 11)]:
        a, b = _paired(rng, n, binary=False)
        res = noninferiority(a, b, margin=0.03, alpha=0.05, method="bootstrap-t", n_resamples=2000, seed=seed)
        d = [y - x for x, y in zip(a, b)]
        mean, se = sum(d) / n, (sum((v - sum(d) / n) ** 2 for v in d) / (n - 1) / n) ** 0.5
        draws = np.random.default_rng(seed).integers(0, n, size=(2000, n))
        ts = []
        for row in draws:
            x = [d[i] for i in row]
            m = sum(x) / n
            s = (sum((v - m) ** 2 for v in x) / (n - 1) / n) ** 0.5
            ts.append((m - mean) / s if s > 0 else (0.0 if m == mean else math.copysign(math.inf, m - mean)))
        t_obs = (mean + 0.03) / se
        p = (1 + sum(t >= t_obs for t in ts)) / 2001
        hi, lo = np.quantile(np.clip(ts, -1e300, 1e300), [0.95, 0.05])
        assert abs(res.p_value - p) <= TOL
        assert abs(res.lower - (mean - hi * se)) <= TOL and abs(res.upper - (mean - lo * se)) <= TOL
        assert res.n_resamples == 2000 and res.seed == seed and res.name == "paired studentized bootstrap"


def test_auto_picks_tango_for_binary_and_the_bootstrap_for_continuous_scores():
    assert noninferiority([1, 0, 1], [1, 1, 0], margin=0.1).method == "tango"
    assert noninferiority([0.5, 0.2, 0.9], [0.4, 0.3, 0.9], margin=0.1).method == "bootstrap-t"
    with pytest.raises(ConfigError, match="binary"):
        noninferiority([0.5, 0.2], [0.4, 0.3], margin=0.1, method="tango")
    with pytest.raises(ConfigError, match="positive"):
        noninferiority([1.0], [1.0], margin=0.0)


def test_degenerate_data_get_the_stated_conventions_and_never_a_nan():
    # every pair agrees on a binary metric: Tango's statistic stays defined (Wald would say p = 0)
    r = noninferiority([1.0] * 20, [1.0] * 20, margin=0.05)
    assert r.p_value == pytest.approx(scipy_stats.norm.sf(math.sqrt(20 * 0.05 / 0.95)), abs=1e-12)
    assert r.p_value > 0.05 and "no discordant pair" in r.note
    assert n_needed(r) == math.ceil(scipy_stats.norm.ppf(0.95) ** 2 * 0.95 / 0.05)
    r = noninferiority([1.0] * 60, [1.0] * 60, margin=0.05)
    assert r.p_value < 0.05  # past that n the agreement is evidence enough
    # constant continuous differences: the exact sign test
    r = noninferiority([0.5] * 6, [0.5] * 6, margin=0.1, method="t")
    assert r.p_value == 0.5 ** 6 and r.lower == r.upper == 0.0 and "sign test" in r.note
    assert noninferiority([0.5] * 6, [0.3] * 6, margin=0.1, method="t").p_value == 1.0
    # one pair, or none: no test, no NaN
    one = noninferiority([0.5], [0.7], margin=0.1, method="t")
    assert one.p_value is None and one.lower is None and "one paired sample" in one.note
    none = noninferiority([], [], margin=0.1)
    assert none.p_value is None and none.difference is None and "no paired sample" in none.note
    # a binary margin of 1 or more cannot be reached
    assert noninferiority([1.0, 0.0], [0.0, 0.0], margin=1.0).p_value == 0.0
    for res in (noninferiority([1.0, 0.0, 1.0], [0.0, 0.0, 0.0], margin=0.05),
                noninferiority([0.0] * 5, [1.0] * 5, margin=0.05)):
        assert all(v is None or math.isfinite(v) for v in (res.p_value, res.lower, res.upper, res.statistic))


def test_a_lower_is_better_metric_reads_the_difference_the_other_way():
    rng = random.Random(3)
    a = [rng.uniform(10, 40) for _ in range(50)]
    shorter = [x - rng.uniform(0, 4) for x in a]
    down = noninferiority(a, shorter, margin=1.0, direction=Direction.MINIMIZE, method="t")
    up = noninferiority(a, shorter, margin=1.0, direction=Direction.MAXIMIZE, method="t")
    assert down.difference > 0 > up.difference  # shorter is better when lower is better
    assert down.p_value < 0.001 and up.p_value > 0.99
    # the same test as the negated scores read higher-is-better
    neg = noninferiority([-x for x in a], [-x for x in shorter], margin=1.0, method="t")
    assert abs(neg.p_value - down.p_value) < 1e-12 and abs(neg.lower - down.lower) < 1e-12
