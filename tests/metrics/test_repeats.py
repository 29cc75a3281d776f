"""pass@k, pass^k and majority vote over repeats (scope = "group")."""

import itertools
import random
from math import comb

import pytest

from auditkit_ray import ConfigError, Generation, Sample, Status
from auditkit_ray.core.registry import build_metric
from auditkit_ray.metrics.repeats import pass_at_k, pass_hat_k

SAMPLE = Sample(id="1", input="q", target="42")


def _group(metric, texts, sample=SAMPLE, errors=()):
    gens = [Generation(text=t, error="boom" if i in errors else None) for i, t in enumerate(texts)]
    ctxs = [{"repeat": i, "annotations": {}} for i in range(len(texts))]
    [[*scores]] = metric.evaluate_groups([(sample, gens, ctxs)])
    return scores


def test_pass_at_k_equals_the_unbiased_estimator_and_its_combinatorial_meaning():
    rng = random.Random(1)
    for _ in range(200):
        n = rng.randint(1, 12)
        c, k = rng.randint(0, n), rng.randint(1, n)
        assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-15)
        assert pass_hat_k(n, c, k) == pytest.approx(comb(c, k) / comb(n, k), abs=1e-15)
    # meaning: over all k-subsets of the n repeats, the share with >= 1 success / all successes
    outcomes = [1, 0, 1, 1, 0, 0, 0]
    for k in range(1, 8):
        subsets = list(itertools.combinations(outcomes, k))
        assert pass_at_k(7, 3, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
        assert pass_hat_k(7, 3, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def test_pass_at_k_and_pass_hat_k_over_repeats_with_a_criterion():
    texts = ["42", "41", "The answer is 42", "42", "7"]
    [s] = _group(build_metric("pass_at_k", {"k": 2}), texts)
    assert s.value == pytest.approx(1 - comb(3, 2) / comb(5, 2)) and s.metadata == {
        "n": 5,
        "c": 2,
        "k": 2,
        "left_out": 0,
    }
    [s] = _group(build_metric("pass_at_k", {"k": 2, "criterion": "numeric_match"}), texts)
    assert s.metadata["c"] == 3
    [s] = _group(build_metric("pass_hat_k", {"k": 2, "criterion": "numeric_match"}), texts)
    assert s.value == pytest.approx(comb(3, 2) / comb(5, 2))
    [s] = _group(build_metric("pass_at_k", {"k": 1, "criterion": "token_f1", "threshold": 0.5}), texts)
    assert s.metadata["c"] == 3  # "The answer is 42" has token F1 0.5 with "42"


def test_failed_repeats_are_left_out_and_too_few_repeats_are_unknown():
    m = build_metric("pass_at_k", {"k": 3})
    [s] = _group(m, ["42", "x", "42", "42"], errors=(1,))
    assert s.metadata == {"n": 3, "c": 3, "k": 3, "left_out": 1} and s.value == 1.0
    [s] = _group(m, ["42", "x", "42"], errors=(1,))
    assert s.status is Status.UNKNOWN and "k=3" in s.reason and "generation failed" in s.reason
    [s] = _group(m, ["42"], sample=Sample(id="2", input="q"))
    assert s.status is Status.NOT_TESTED and "target" in s.reason


def test_repeat_metrics_refuse_bad_params():
    for name, params in (
        ("pass_at_k", {"k": 0}),
        ("pass_hat_k", {"criterion": "nope"}),
        ("pass_at_k", {"criterion": "majority_vote"}),
        ("pass_at_k", {"criterion_params": {"bad": 1}}),
    ):
        with pytest.raises(ConfigError):
            build_metric(name, params)


def test_majority_vote_uses_the_most_common_normalised_answer_ties_to_the_first_seen():
    m = build_metric("majority_vote", {"ignore_case": True, "ignore_punctuation": True})
    [s] = _group(m, ["41", "42.", "42", "41", "42"])
    assert s.value == 1.0 and s.metadata["answer"] == "42" and s.metadata["votes"] == 3 and not s.metadata["tied"]
    [s] = _group(m, ["41", "42", "42", "41"])  # 2-2 tie: "41" occurred first
    assert s.value == 0.0 and s.metadata["answer"] == "41" and s.metadata["tied"]
    # repeat order, not arrival order, decides "first"
    gens = [Generation(text="42"), Generation(text="41")]
    [[s]] = m.evaluate_groups([(SAMPLE, gens, [{"repeat": 1}, {"repeat": 0}])])
    assert s.metadata["answer"] == "41"
    [s] = _group(m, ["x", "x", "42"], errors=(0, 1))
    assert s.value == 1.0 and s.metadata["left_out"] == 2
    [s] = _group(m, ["x"], errors=(0,))
    assert s.status is Status.UNKNOWN
