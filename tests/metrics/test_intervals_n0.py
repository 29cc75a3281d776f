"""n = 0 has one defined behaviour everywhere: no interval (None, None), no
error, and a summary with no mean (shown as unknown)."""

import math

import pytest

from auditkit_ray import Score
from auditkit_ray.compare import stats as st
from auditkit_ray.core.aggregate import MeanStats, summarize, wilson_interval
from auditkit_ray.core.registry import build_metric
from auditkit_ray.core.summary import Accumulator


@pytest.mark.parametrize("interval", [
    lambda: st.wilson(0, 0),
    lambda: st.wilson(0, 0, 0.9),
    lambda: st.clopper_pearson(0, 0),
    lambda: st.clopper_pearson(0, 0, 0.99),
    lambda: wilson_interval(0, 0),
], ids=["wilson", "wilson-90", "clopper_pearson", "clopper_pearson-99", "wilson_interval"])
def test_every_binomial_interval_with_n_0_is_no_interval_not_an_error(interval):
    assert interval() == (None, None)


def test_n_0_intervals_still_refuse_a_negative_n_and_keep_their_values_for_n_above_0():
    for fn in (st.wilson, st.clopper_pearson, wilson_interval):
        with pytest.raises(ValueError, match="n >= 0"):
            fn(0, -1)
    lo, hi = st.clopper_pearson(0, 1)
    assert lo == 0.0 and 0 < hi < 1 and not math.isnan(hi)
    assert wilson_interval(1, 1) == pytest.approx(st.wilson(1, 1), abs=1e-12)


def test_a_summary_with_no_scored_sample_has_no_mean_and_no_interval():
    m = build_metric("exact_match")
    acc = Accumulator([m]).add_all([Score.unknown("exact_match", "no annotation"),
                                    Score.not_tested("exact_match", "missing target")])
    s = acc.summaries()["exact_match"]
    assert s.n == 0 and s.total == 2 and s.unscored == 2
    assert (s.mean, s.stderr, s.ci_low, s.ci_high, s.ci_method) == (None, None, None, None, None)
    assert s.counts["unknown"] == 1 and s.counts["not_tested"] == 1
    # the stored summary is valid JSON (no NaN), and reads back the same
    assert "NaN" not in s.model_dump_json()
    assert summarize(MeanStats())["ci_low"] is None
