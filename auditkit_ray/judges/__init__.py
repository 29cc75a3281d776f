"""Judges: a backend (api or hf) + a prompt + a parser, as Metric subclasses
of family ``"judge"``. Built-ins (registered names): ``g_eval``,
``factual_correctness``, ``grounding``. Subclass ``JudgeMetric`` for more."""

from .base import JudgeMetric, JudgeReplyError
from .builtin import FactualCorrectness, GEval, Grounding

__all__ = ["FactualCorrectness", "GEval", "Grounding", "JudgeMetric", "JudgeReplyError"]
