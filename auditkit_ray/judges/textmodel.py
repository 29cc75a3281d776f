"""A ``TextModel`` (``auditkit_ray.core.textmodel``) over a judge backend:
what a model-based annotator is given, built here so that annotators never
import backends or judges. It uses the judge machinery: lazy load, ``${VAR}``
expansion when the backend loads, and the api backend's retries and cache."""

from __future__ import annotations

from typing import Any

from ..backends.base import Request
from .base import JudgeMetric


class _ExtractJudge(JudgeMetric):
    """A judge whose replies are taken as they are (never scored as a metric)."""

    name = "model_extract"

    def score(self, sample, generation, context):  # pragma: no cover - not used as a metric
        raise TypeError("the model of an annotator is not a metric")


class JudgeTextModel:
    """Prompts in, texts out, through a judge backend (``backend``: a mapping
    like a run's ``model``), greedily, at most ``max_new_tokens`` tokens each."""

    def __init__(self, backend: dict[str, Any], *, max_new_tokens: int = 16, prompt: str | None = None) -> None:
        self.judge = _ExtractJudge(judge=backend, generation={"max_new_tokens": max_new_tokens, "temperature": 0.0},
                                   prompt=prompt)

    def complete(self, prompts: list[str], ids: list[str]) -> list[str | None]:
        gens = self.judge.ask([Request(sample_id=i, prompt=p) for i, p in zip(ids, prompts)])
        return [None if g.error else g.text for g in gens]

    def close(self) -> None:
        self.judge.close()


def judge_text_model(backend: dict[str, Any], **settings: Any) -> JudgeTextModel:
    """The ``TextModelFactory`` the scoring stage gives model-based annotators."""
    return JudgeTextModel(backend, **settings)
