import random

import pytest

from auditkit_ray import Direction, Metric, Score
from auditkit_ray.core.summary import Accumulator


class CharRatio(Metric):
    """Toy corpus metric: total matching chars / total chars (not a mean of ratios)."""

    name = "char_ratio"
    direction = Direction.MAXIMIZE
    aggregation = "corpus"

    def score(self, sample, generation, context):
        hit = sum(a == b for a, b in zip(generation.text, sample.targets[0]))
        total = max(len(sample.targets[0]), 1)
        return Score.scored(self.name, hit / total, metadata={"stats": [hit, total]})

    def finalize(self, stats):
        return stats[0] / stats[1] if stats[1] else None

    def signature(self):
        return "char_ratio|v1"


def _scores(rng, n):
    out = []
    for _ in range(n):
        total = rng.randint(1, 20)
        hit = rng.randint(0, total)
        out.append(Score.scored("char_ratio", hit / total, metadata={"stats": [hit, total]}))
    return out + [Score.unknown("char_ratio", "x")]


def test_corpus_metric_is_finalized_from_merged_statistics_in_any_order_and_split():
    rng = random.Random(3)
    scores = _scores(rng, 200)
    whole = Accumulator([CharRatio()]).add_all(scores).summaries()["char_ratio"]
    hits = sum(s.metadata["stats"][0] for s in scores if s.value is not None)
    totals = sum(s.metadata["stats"][1] for s in scores if s.value is not None)
    assert whole.mean == pytest.approx(hits / totals)
    assert whole.aggregation == "corpus" and whole.signature == "char_ratio|v1"
    assert whole.n == 200 and whole.counts["unknown"] == 1
    for _ in range(10):
        rng.shuffle(scores)
        cuts = sorted(rng.sample(range(1, len(scores)), rng.randint(1, 6)))
        parts = [Accumulator([CharRatio()]).add_all(scores[a:b]) for a, b in zip([0] + cuts, cuts + [len(scores)])]
        rng.shuffle(parts)
        merged = parts[0]
        for p in parts[1:]:
            merged = merged.merge(p)
        got = merged.summaries()["char_ratio"]
        assert got.mean == pytest.approx(whole.mean, rel=1e-12) and got.n == whole.n and got.counts == whole.counts


def test_mean_metrics_and_direction_flow_into_summaries():
    from auditkit_ray.core.registry import build_metric

    acc = Accumulator([build_metric("output_length")]).add_all([Score.scored("output_length", v) for v in (1, 2, 3)])
    s = acc.summaries()["output_length"]
    assert s.mean == 2 and s.direction is Direction.MINIMIZE and s.aggregation == "mean"
