"""Metrics over the repeats of one sample (scope = "group"): pass@k, pass^k
and majority vote.

Repeats are taken in repeat order (``context["repeat"]``). A repeat whose
correctness cannot be decided (generation error, criterion ``unknown`` /
``not_tested`` / ``error``) is left out of ``n``; the number left out is in
the score's metadata. When fewer than ``k`` repeats remain the score is
``unknown``.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from math import comb
from typing import Any

from ..core.metric import Direction, Metric, MissingEvidence
from ..core.types import Generation, Sample, Score, Status
from .text import TextMetric


def _in_repeat_order(generations: list[Generation], contexts: list[dict]) -> list[tuple[Generation, dict]]:
    pairs = list(zip(generations, contexts or [{}] * len(generations)))
    reps = [(c or {}).get("repeat") for _, c in pairs]
    if all(isinstance(r, int) for r in reps):
        pairs = [p for _, p in sorted(zip(reps, pairs), key=lambda t: t[0])]
    return pairs


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), exact."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return float(1 - Fraction(comb(n - c, k), comb(n, k)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that k draws without replacement all succeed, C(c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return float(Fraction(comb(c, k), comb(n, k)))


class _RepeatCorrectness(Metric, abstract=True):
    family = "repeats"
    scope = "group"
    _formula = staticmethod(pass_at_k)
    _symbol = "pass@k"

    def __init__(self, *, k: int = 1, criterion: str = "exact_match", criterion_params: dict | None = None,
                 threshold: float = 1.0) -> None:
        from ..core.registry import build_metric

        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise TypeError(f"k must be a positive integer, not {k!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise TypeError(f"threshold must be a number, not {threshold!r}")
        super().__init__(k=k, criterion=criterion, criterion_params=dict(criterion_params or {}),
                         threshold=float(threshold))
        self.k = k
        self.criterion = build_metric(criterion, criterion_params or {})
        if self.criterion.scope != "sample":
            raise TypeError(f"criterion {criterion!r} must be a per-sample metric, not scope={self.criterion.scope!r}")
        self.requires = self.criterion.requires

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        raise TypeError(f"{self.name} scores all repeats at once: use score_group()")

    def score_group(self, sample: Sample, generations: list[Generation], contexts: list[dict]) -> Score:
        verdicts: list[bool] = []
        left_out: list[str] = []
        for gen, ctx in _in_repeat_order(generations, contexts):
            scores = self.criterion.evaluate(sample, gen, ctx)
            s = next((x for x in scores if x.name == self.criterion.output_name), scores[0] if scores else None)
            if s is None or s.status is not Status.SCORED:
                left_out.append(f"{s.status.value}: {s.reason}" if s is not None else "no score")
                continue
            verdicts.append(s.value >= self.params["threshold"])  # type: ignore[operator]
        n, c, k = len(verdicts), sum(verdicts), self.k
        meta: dict[str, Any] = {"n": n, "c": c, "k": k, "left_out": len(left_out)}
        if n < k:
            why = f"; left out: {left_out[0]}" if left_out else ""
            raise MissingEvidence(f"{self._symbol} needs at least k={k} decided repeats, got {n} of "
                                  f"{len(generations)}{why}")
        return Score.scored(self.name, self._formula(n, c, k), metadata=meta)


class PassAtK(_RepeatCorrectness):
    """Unbiased pass@k over the repeats (Chen et al. 2021)."""

    name = "pass_at_k"
    direction = Direction.MAXIMIZE
    description = (
        "unbiased pass@k over repeats, 1 - C(n-c,k)/C(n,k) (Chen et al. 2021); correctness by a criterion metric"
    )


class PassHatK(_RepeatCorrectness):
    """pass^k: all of k draws from the repeats succeed (C(c,k)/C(n,k))."""

    name = "pass_hat_k"
    direction = Direction.MAXIMIZE
    description = "pass^k over repeats: probability that k draws all succeed, C(c,k)/C(n,k); reliability across repeats"
    _formula = staticmethod(pass_hat_k)
    _symbol = "pass^k"


class MajorityVote(TextMetric):
    """Exact match of the most common normalised prediction across repeats
    (ties: the answer that occurred first in repeat order)."""

    name = "majority_vote"
    direction = Direction.MAXIMIZE
    family = "repeats"
    scope = "group"
    description = "exact match of the most common normalised prediction across repeats (ties: first to occur)"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        raise TypeError("majority_vote scores all repeats at once: use score_group()")

    def score_group(self, sample: Sample, generations: list[Generation], contexts: list[dict]) -> Score:
        votes: list[str] = []
        left_out = 0
        for gen, ctx in _in_repeat_order(generations, contexts):
            if gen.error:
                left_out += 1
                continue
            try:
                votes.append(self.norm(self.prediction(gen, ctx)))
            except MissingEvidence:
                left_out += 1
        if not votes:
            raise MissingEvidence(f"no usable repeat ({left_out} failed or lacked the annotation)")
        counts = Counter(votes)
        top = max(counts.values())
        winner = next(v for v in votes if counts[v] == top)  # first to occur among the tied
        hit = any(winner == self.norm(t) for t in sample.targets)
        return Score.scored(self.name, 1.0 if hit else 0.0, metadata={
            "answer": winner, "votes": top, "n": len(votes), "left_out": left_out,
            "tied": sum(1 for v in counts.values() if v == top) > 1})


__all__ = ["MajorityVote", "PassAtK", "PassHatK", "pass_at_k", "pass_hat_k"]
