"""Golden tests: the statistics against scipy and hand computations on fixed data."""

import itertools
import math

import pytest

from auditkit_ray.compare import stats as st

scipy_stats = pytest.importorskip("scipy.stats")
np = pytest.importorskip("numpy")


def test_mcnemar_exact_b10_c3_matches_binomtest_and_hand_value():
    p = st.mcnemar_exact(10, 3)
    # 2 * P(X <= 3), X ~ Binomial(13, 1/2) = 2 * (1 + 13 + 78 + 286) / 2**13
    assert p == pytest.approx(2 * 378 / 8192, abs=1e-12)
    assert p == pytest.approx(0.0923, abs=5e-5)
    assert p == pytest.approx(scipy_stats.binomtest(3, 13, 0.5).pvalue, abs=1e-15)


def test_mcnemar_is_symmetric_and_one_without_discordant_pairs():
    assert st.mcnemar_exact(3, 10) == st.mcnemar_exact(10, 3)
    assert st.mcnemar_exact(0, 0) == 1.0
    assert st.mcnemar_exact(5, 5) == 1.0
    with pytest.raises(ValueError):
        st.mcnemar_exact(-1, 2)


@pytest.mark.parametrize("k,n", [(0, 5), (1, 5), (3, 10), (8, 10), (10, 10), (17, 40), (450, 1000)])
def test_wilson_matches_scipy_and_core(k, n):
    from auditkit_ray.core.aggregate import wilson_interval

    lo, hi = st.wilson(k, n)
    ref = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert (lo, hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
    assert (lo, hi) == pytest.approx(wilson_interval(k, n), abs=1e-12)


def test_wilson_golden_value_8_of_10():
    assert st.wilson(8, 10) == pytest.approx((0.4901625, 0.9433178), abs=1e-6)
    # a 90% interval is narrower
    lo90, hi90 = st.wilson(8, 10, 0.90)
    assert 0.4901625 < lo90 and hi90 < 0.9433178


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (9, 10), (10, 10), (3, 7), (120, 400)])
@pytest.mark.parametrize("conf", [0.95, 0.99])
def test_clopper_pearson_matches_scipy_exact(k, n, conf):
    lo, hi = st.clopper_pearson(k, n, conf)
    ref = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=conf, method="exact")
    assert (lo, hi) == pytest.approx((ref.low, ref.high), abs=1e-10)


def test_clopper_pearson_hand_value_zero_successes():
    # upper bound for 0/n solves (1 - p)^n = alpha / 2
    lo, hi = st.clopper_pearson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-12)
    assert hi == pytest.approx(0.3084971, abs=1e-6)


def test_holm_against_hand_computation():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> running max 0.06
    assert st.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_matches_the_statsmodels_definition_and_skips_missing_tests():
    rng = np.random.default_rng(7)
    for _ in range(50):
        m = int(rng.integers(1, 9))
        p = list(rng.uniform(0, 0.3, m))
        order = np.argsort(p, kind="stable")
        ref = np.empty(m)
        running = 0.0
        for rank, i in enumerate(order):  # statsmodels multipletests(method="holm")
            running = max(running, min(1.0, (m - rank) * p[i]))
            ref[i] = running
        assert st.holm(p) == pytest.approx(list(ref))
    assert st.holm([0.02, None, 0.04]) == pytest.approx([0.04, None, 0.04])
    assert st.holm([]) == []
    assert st.holm([0.9, 0.8]) == [1.0, 1.0]


def test_exact_paired_permutation_matches_hand_enumeration_and_scipy():
    a = [0.1, 0.5, 0.3, 0.9, 0.2, 0.4, 0.7]
    b = [0.3, 0.6, 0.3, 0.6, 0.5, 0.9, 0.8]
    d = [y - x for x, y in zip(a, b) if y != x]
    obs = abs(sum(d))
    hits = sum(
        abs(sum(s * v for s, v in zip(signs, d))) >= obs - 1e-12 for signs in itertools.product((1, -1), repeat=len(d))
    )
    res = st.paired_permutation(a, b, n_resamples=10_000, seed=0)
    assert res.exact and res.p_value == pytest.approx(hits / 2 ** len(d))
    ref = scipy_stats.permutation_test(
        (np.array(a), np.array(b)),
        lambda x, y: np.mean(y - x),
        permutation_type="samples",
        alternative="two-sided",
        n_resamples=10_000,
    )
    assert res.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_monte_carlo_permutation_is_seeded_symmetric_and_detects_a_shift():
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, 200)
    b = a + 0.3 + rng.normal(0, 0.5, 200)
    r1 = st.paired_permutation(a, b, n_resamples=2000, seed=5)
    r2 = st.paired_permutation(a, b, n_resamples=2000, seed=5)
    swapped = st.paired_permutation(b, a, n_resamples=2000, seed=5)
    assert not r1.exact and r1.n_resamples == 2000 and r1.seed == 5
    assert r1.p_value == r2.p_value == swapped.p_value
    assert r1.p_value == pytest.approx(1 / 2001)  # nothing as extreme: the (1 + k) / (1 + R) floor
    null = st.paired_permutation(a, a + rng.normal(0, 1, 200), n_resamples=2000, seed=5)
    assert null.p_value > 0.01
    assert st.paired_permutation(a, a).p_value == 1.0


def test_bootstrap_intervals_are_seeded_and_cover_the_mean():
    x = [0.2, 0.4, 0.5, 0.9, 0.1, 0.3, 0.8, 0.6]
    ci = st.bootstrap_mean_ci(x, n_resamples=2000, seed=3)
    assert ci == st.bootstrap_mean_ci(x, n_resamples=2000, seed=3)
    assert ci[0] < sum(x) / len(x) < ci[1]
    assert st.paired_bootstrap_ci(x, x) == (0.0, 0.0)
    lo, hi = st.paired_bootstrap_ci(x, [v + 1 for v in x], n_resamples=500)
    assert lo == pytest.approx(1.0) and hi == pytest.approx(1.0)


def test_clustered_se_reduces_to_the_plain_standard_error_and_matches_a_hand_value():
    x = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    se, g = st.clustered_se(x, list(range(6)))
    n, m = 6, sum(x) / 6
    assert g == 6 and se == pytest.approx(math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1) / n))
    # two clusters {1,0,1} and {1,0,1}: residual sums both 0 -> se 0; {1,1,1},{0,0,0}: large
    se2, g2 = st.clustered_se([1, 1, 1, 0, 0, 0], ["a", "a", "a", "b", "b", "b"])
    # residuals +0.5 * 3 and -0.5 * 3: sum of squares 2 * 1.5**2 = 4.5; G/(G-1) = 2; / n**2 = 36
    assert g2 == 2 and se2 == pytest.approx(math.sqrt(2 * 4.5 / 36))
    assert st.clustered_se([1.0, 2.0], ["a", "a"]) is None


def _ratio(stats):
    return stats[0] / stats[1] if stats[1] else None


def test_corpus_permutation_is_symmetric_and_clean_on_identical_statistics():
    rng = np.random.default_rng(2)
    tot = rng.integers(1, 20, 40)
    sa = np.stack([rng.integers(0, tot + 1), tot], axis=1)
    sb = np.stack([np.minimum(tot, sa[:, 0] + rng.integers(0, 4, 40)), tot], axis=1)
    r = st.corpus_permutation(sa, sb, _ratio, n_resamples=500, seed=1)
    r2 = st.corpus_permutation(sb, sa, _ratio, n_resamples=500, seed=1)
    assert r.p_value == r2.p_value and r.p_value < 0.05
    same = st.corpus_permutation(sa, sa, _ratio, n_resamples=500, seed=1)
    assert same.p_value == 1.0
    ci, undefined = st.corpus_bootstrap_ci(sa, _ratio, n_resamples=300, seed=0)
    value = sa[:, 0].sum() / sa[:, 1].sum()
    assert ci[0] <= value <= ci[1] and undefined == 0
