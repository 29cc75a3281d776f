"""token_f1 and exact_match's `squad` preset equal the official SQuAD v1.1 and
v2.0 evaluation functions.

The reference functions are written here from their published definition
(the official evaluation scripts' normalize_answer, f1_score / compute_f1 and
exact_match_score / compute_exact, and v2's rule for empty references); the
scripts are not a package, so they cannot be imported."""

import random
import re
import string
from collections import Counter

import pytest

from auditkit_ray import ConfigError, Generation, Sample, Status
from auditkit_ray.core.registry import build_metric


# --------------------------------------------------------------------------- published definitions
def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def v11_f1(prediction, ground_truth):
    pred, gold = normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
    num_same = sum((Counter(pred) & Counter(gold)).values())
    if num_same == 0:
        return 0.0
    p, r = num_same / len(pred), num_same / len(gold)
    return 2 * p * r / (p + r)


def v11_exact(prediction, ground_truth):
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def v11_max(fn, prediction, ground_truths):
    return max(fn(prediction, g) for g in ground_truths)


def v2_f1(a_gold, a_pred):
    gold, pred = normalize_answer(a_gold).split(), normalize_answer(a_pred).split()
    if len(gold) == 0 or len(pred) == 0:
        return float(gold == pred)
    num_same = sum((Counter(gold) & Counter(pred)).values())
    if num_same == 0:
        return 0.0
    p, r = num_same / len(pred), num_same / len(gold)
    return 2 * p * r / (p + r)


def v2_exact(a_gold, a_pred):
    return float(normalize_answer(a_gold) == normalize_answer(a_pred))


def v2_max(fn, prediction, answers):
    golds = [a for a in answers if normalize_answer(a)] or [""]
    return max(fn(g, prediction) for g in golds)


# --------------------------------------------------------------------------- random pairs
WORDS = ["cat", "Cat's", "the", "The", "a", "an", "An", "and", "1,000", "1000", "1.000", "3.5", "-7", "50%", "U.S.",
         "u.s", "rock-n-roll", "e-mail", "email", "New", "York", "new-york", "(1999)", "1999", "isn't", "isnt",
         "theater", "anthem", "a.m.", "São", "Paulo", "naïve", "don't", "\"quoted\"", "x_y", "£5", "$5", "5"]
PUNCT = list(string.punctuation)


def _text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.08:
        return ""
    if kind < 0.14:
        return "".join(rng.choice(PUNCT + [" ", "the ", "a "]) for _ in range(rng.randint(1, 6)))  # normalises away
    out = []
    for _ in range(rng.randint(1, 7)):
        w = rng.choice(WORDS)
        if rng.random() < 0.2:
            w = rng.choice(PUNCT) + w
        if rng.random() < 0.2:
            w += rng.choice(PUNCT)
        out.append(w)
    sep = rng.choice([" ", "  ", "\t", " \n "])
    return sep.join(out)


def _pairs(seed: int, n: int):
    rng = random.Random(seed)
    for _ in range(n):
        pred = _text(rng)
        golds = [_text(rng) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.15:  # a near copy of a reference: partial overlaps and exact hits
            pred = rng.choice(golds).replace(",", "").upper()
        yield pred, golds


def _score(metric, pred, golds):
    [s] = metric.evaluate(Sample(id="s", input="q", target=golds), Generation(text=pred), {})
    assert s.status is Status.SCORED, s
    return s.value


def test_token_f1_equals_squad_official_f1_on_random_pairs():
    m = build_metric("token_f1")
    v1_differs = both_empty = partial = 0
    for pred, golds in _pairs(1101, 3000):
        ours = _score(m, pred, golds)
        assert ours == pytest.approx(v2_max(v2_f1, pred, golds), abs=1e-12), (pred, golds)
        v1 = v11_max(v11_f1, pred, golds)
        if not normalize_answer(pred) and not any(normalize_answer(g) for g in golds):
            # documented: v2's rule (both empty -> 1); v1.1 gives 0 there
            assert ours == 1.0 and v1 == 0.0
            both_empty += 1
        elif ours != pytest.approx(v1, abs=1e-12):
            v1_differs += 1
        partial += 0.0 < ours < 1.0
    assert v1_differs == 0 and both_empty >= 5 and partial >= 200


def test_exact_match_squad_preset_equals_squad_official_exact_match_on_random_pairs():
    m = build_metric("exact_match", {"preset": "squad"})
    hits = v1_differs = 0
    for pred, golds in _pairs(2002, 3000):
        ours = _score(m, pred, golds)
        assert ours == v2_max(v2_exact, pred, golds), (pred, golds)
        v1 = v11_max(v11_exact, pred, golds)
        if ours != v1:
            # documented: v2 drops references that normalise to nothing unless all do
            norm = [normalize_answer(g) for g in golds]
            assert not normalize_answer(pred) and "" in norm and any(norm), (pred, golds)
            v1_differs += 1
        hits += ours == 1.0
    assert hits >= 300 and v1_differs >= 1


@pytest.mark.parametrize("pred, gold, f1", [
    ("1000", "1,000", 1.0),  # punctuation deleted, not replaced by a space
    ("cats", "cat's", 1.0),
    ("the cat's toy", "a cats toy!", 1.0),
    ("1,000 people", "1000", 2 / 3),
    ("U.S. army", "us army", 1.0),
])
def test_token_f1_deletes_punctuation_like_squad(pred, gold, f1):
    assert _score(build_metric("token_f1"), pred, [gold]) == pytest.approx(f1)


def test_squad_preset_is_named_once_and_does_not_combine_with_the_flags():
    em = build_metric("exact_match", {"preset": "squad"})
    assert em.identity()["params"]["preset"] == "squad"
    assert _score(em, "The  1,000 Cats!", ["1000 cats"]) == 1.0
    # without a preset the identity (and so every stored fingerprint) is what it was
    assert "preset" not in build_metric("exact_match").identity()["params"]
    with pytest.raises(ConfigError, match="preset must be one of squad"):
        build_metric("exact_match", {"preset": "squad2"})
    with pytest.raises(ConfigError, match="replaces ignore_case"):
        build_metric("exact_match", {"preset": "squad", "ignore_case": True})
    # ignore_regexes still run first (e.g. to drop an "Answer:" prefix)
    em = build_metric("exact_match", {"preset": "squad", "ignore_regexes": [r"^Answer:"]})
    assert _score(em, "Answer: the Eiffel tower.", ["eiffel Tower"]) == 1.0
