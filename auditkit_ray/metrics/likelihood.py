"""Metrics over log-likelihood requests (``prompt.request: loglikelihood`` or
``choices``), with lm-evaluation-harness's definitions:

- ``mc_accuracy``: the choice with the highest log-likelihood is the gold one
  (lm-eval ``acc``); ``mc_accuracy_norm``: the same after dividing each
  log-likelihood by the byte length of its continuation (lm-eval
  ``acc_norm``). Ties go to the first choice (numpy argmax). The gold choice
  is the choice whose text equals the target, else the target read as an index.
- ``loglikelihood``: the continuation's log-likelihood (per sample mean).
- ``word_perplexity``: exp(-sum log-likelihood / sum of words in the
  continuations), a corpus metric (lm-eval ``word_perplexity``).
"""

from __future__ import annotations

import math
from typing import Any

from ..core.metric import Direction, Metric, MissingEvidence
from ..core.types import Generation, Sample, Score


def _ll(g: Generation) -> float:
    v = (g.metadata or {}).get("loglikelihood")
    if v is None:
        raise MissingEvidence("no log-likelihood on this output (set prompt.request: loglikelihood or choices)")
    return float(v)


def _gold(sample: Sample) -> int:
    choices = sample.choices or []
    stripped = [c.strip() for c in choices]
    for t in sample.targets:  # a choice's text first, then an index ("2" among ["2", "3"] is the text)
        if t in choices:
            return choices.index(t)
        if t.strip() in stripped:
            return stripped.index(t.strip())
    for t in sample.targets:
        if t.strip().isdigit() and int(t) < len(choices):
            return int(t)
    raise MissingEvidence("the target is neither a choice index nor one of the choices")


class _Choices(Metric, abstract=True):
    direction = Direction.MAXIMIZE
    family = "likelihood"
    scope = "group"
    requires = ("choices", "target")
    normalise = False

    def __init__(self, *, on: str | None = None) -> None:
        super().__init__(on=on)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Any:  # pragma: no cover - group metric
        raise TypeError("a group metric")

    def score_group(self, sample: Sample, generations: list[Generation], contexts: list[dict]) -> Score:
        by_choice: dict[int, float] = {}
        for g in generations:
            k = (g.metadata or {}).get("choice")
            if k is None:
                raise MissingEvidence("outputs carry no choice index (set prompt.request: choices)")
            ll = _ll(g)
            if self.normalise:
                ll /= max(1, len(g.text.encode("utf-8")))
            by_choice.setdefault(int(k), ll)
        if len(by_choice) != len(sample.choices or []):
            raise MissingEvidence(f"{len(by_choice)} of {len(sample.choices or [])} choices were scored")
        best = max(sorted(by_choice), key=lambda k: (by_choice[k], -k))
        return Score.scored(self.name, 1.0 if best == _gold(sample) else 0.0, metadata={"pick": best})


class MCAccuracy(_Choices):
    """Multiple choice: the most likely choice is the gold one (lm-eval acc)."""

    name = "mc_accuracy"


class MCAccuracyNorm(_Choices):
    """Multiple choice with log-likelihoods divided by continuation bytes (lm-eval acc_norm)."""

    name = "mc_accuracy_norm"
    normalise = True


class LogLikelihood(Metric):
    """Log-likelihood of the continuation given the prompt."""

    name = "loglikelihood"
    direction = Direction.MAXIMIZE
    family = "likelihood"

    def __init__(self, *, on: str | None = None) -> None:
        super().__init__(on=on)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        return Score.scored(self.name, _ll(generation))


class WordPerplexity(Metric):
    """exp(-total log-likelihood / total words of the continuations) (lm-eval word_perplexity)."""

    name = "word_perplexity"
    direction = Direction.MINIMIZE
    family = "likelihood"
    aggregation = "corpus"

    def __init__(self, *, on: str | None = None) -> None:
        super().__init__(on=on)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        ll = _ll(generation)
        words = len(generation.text.split())
        if words == 0:
            raise MissingEvidence("an empty continuation has no words")
        return Score.scored(self.name, math.exp(-ll / words), metadata={"stats": [-ll, float(words)]})

    def finalize(self, stats: list[float]) -> float | None:
        return math.exp(stats[0] / stats[1]) if stats and stats[1] else None
