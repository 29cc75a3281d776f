import random

import pytest

from auditkit_ray import Score
from auditkit_ray.core.aggregate import MeanStats, summarize, wilson_interval


def test_only_scored_values_enter_the_mean_and_every_status_is_counted():
    scores = [
        Score.scored("m", 1.0),
        Score.scored("m", 0.0),
        Score.unknown("m", "no evidence"),
        Score.not_tested("m", "no field"),
        Score.error("m", "boom"),
    ]
    s = summarize(MeanStats.of(scores))
    assert s["mean"] == 0.5  # the three unscored rows are not zeros
    assert s["n"] == 2 and s["total"] == 5 and s["unscored"] == 3
    assert s["counts"] == {"error": 1, "not_tested": 1, "scored": 2, "unknown": 1}


def test_all_unscored_gives_no_mean_rather_than_zero():
    s = summarize(MeanStats.of([Score.unknown("m", "x")] * 3))
    assert s["mean"] is None and s["n"] == 0 and s["counts"]["unknown"] == 3


def test_merge_in_any_order_equals_single_pass():
    rng = random.Random(0)
    scores = [Score.scored("m", rng.random()) for _ in range(100)] + [Score.unknown("m", "x")] * 7
    whole = summarize(MeanStats.of(scores))
    for _ in range(5):
        rng.shuffle(scores)
        cuts = sorted(rng.sample(range(1, len(scores)), 4))
        parts = [scores[a:b] for a, b in zip([0] + cuts, cuts + [len(scores)])]
        stats = [MeanStats.of(p) for p in parts]
        rng.shuffle(stats)
        merged = stats[0]
        for st in stats[1:]:
            merged = merged.merge(st)
        got = summarize(merged)
        assert got["n"] == whole["n"] and got["counts"] == whole["counts"]
        assert got["mean"] == pytest.approx(whole["mean"], rel=1e-12)
        assert got["stderr"] == pytest.approx(whole["stderr"], rel=1e-9)


def test_binary_metric_gets_wilson_interval():
    s = summarize(MeanStats.of([Score.scored("m", v) for v in [1, 1, 1, 0, 1]]))
    assert s["ci_method"] == "wilson"
    lo, hi = wilson_interval(4, 5)
    assert (s["ci_low"], s["ci_high"]) == (lo, hi)
    # known value: Wilson 95% for 4/5 is about (0.376, 0.964)
    assert lo == pytest.approx(0.3755, abs=1e-3) and hi == pytest.approx(0.9638, abs=1e-3)


def test_continuous_metric_gets_normal_interval():
    s = summarize(MeanStats.of([Score.scored("m", v) for v in [0.2, 0.4, 0.6]]))
    assert s["ci_method"] == "normal" and s["ci_low"] < 0.4 < s["ci_high"]
