"""Deterministic text metrics: exact match, contains, token F1, non-degeneracy."""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

from ..core.metric import Direction, Metric
from ..core.types import Generation, Sample, Score

_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
_WS = re.compile(r"\s+")


class TextMetric(Metric, abstract=True):
    family = "generation"
    requires = ("target",)

    def __init__(
        self,
        *,
        ignore_case: bool = False,
        ignore_punctuation: bool = False,
        ignore_whitespace: bool = False,
        strip: bool = True,
        ignore_regexes: list[str] | None = None,
        on: str | None = None,
    ) -> None:
        super().__init__(
            ignore_case=ignore_case,
            ignore_punctuation=ignore_punctuation,
            ignore_whitespace=ignore_whitespace,
            strip=strip,
            ignore_regexes=list(ignore_regexes or []),
            on=on,
        )
        try:
            self._ignore = [re.compile(r) for r in ignore_regexes or []]
        except re.error as exc:
            raise TypeError(f"ignore_regexes: invalid regular expression ({exc})") from None

    def norm(self, text: str) -> str:
        p = self.params
        for rx in self._ignore:
            text = rx.sub("", text)
        if p["ignore_case"]:
            text = text.lower()
        if p["ignore_punctuation"]:
            text = _PUNCT.sub("", text)
        if p["ignore_whitespace"]:
            text = _WS.sub("", text)
        elif p["strip"]:
            text = _WS.sub(" ", text).strip()
        return text


class ExactMatch(TextMetric):
    """1 when the prediction equals a target after the chosen normalisation."""

    name = "exact_match"
    direction = Direction.MAXIMIZE

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        pred = self.norm(self.prediction(generation, context))
        hit = any(pred == self.norm(t) for t in sample.targets)
        return Score.scored(self.name, 1.0 if hit else 0.0)


class Contains(TextMetric):
    """1 when a (normalised) target occurs inside the prediction."""

    name = "contains"
    direction = Direction.MAXIMIZE

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        pred = self.norm(self.prediction(generation, context))
        hit = any(self.norm(t) and self.norm(t) in pred for t in sample.targets)
        return Score.scored(self.name, 1.0 if hit else 0.0)


def _tokens(text: str) -> list[str]:
    text = _PUNCT.sub(" ", text.lower())
    return [t for t in text.split() if t not in ("a", "an", "the")]


class TokenF1(TextMetric):
    """SQuAD-style token F1 (lower-cased, punctuation and articles removed), max over targets."""

    name = "token_f1"
    direction = Direction.MAXIMIZE

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        pred = _tokens(self.prediction(generation, context))
        best = 0.0
        for t in sample.targets:
            gold = _tokens(t)
            if not gold and not pred:
                best = max(best, 1.0)
                continue
            common = sum((Counter(pred) & Counter(gold)).values())
            if common == 0:
                continue
            p, r = common / len(pred), common / len(gold)
            best = max(best, 2 * p * r / (p + r))
        return Score.scored(self.name, best)


class NonDegenerate(Metric):
    """1 unless the output is empty or dominated by one repeated n-gram."""

    name = "non_degenerate"
    direction = Direction.MAXIMIZE
    family = "generation"

    def __init__(self, *, n: int = 3, max_repeat_fraction: float = 0.5, on: str | None = None) -> None:
        super().__init__(n=n, max_repeat_fraction=max_repeat_fraction, on=on)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        toks = self.prediction(generation, context).split()
        if not toks:
            return Score.scored(self.name, 0.0, reason="empty output")
        n = self.params["n"]
        grams = [tuple(toks[i : i + n]) for i in range(max(1, len(toks) - n + 1))]
        top = Counter(grams).most_common(1)[0][1]
        frac = top / len(grams)
        if len(grams) > 2 and frac > self.params["max_repeat_fraction"]:
            return Score.scored(self.name, 0.0, reason=f"repeated {n}-gram covers {frac:.0%} of the output")
        return Score.scored(self.name, 1.0)


class OutputLength(Metric):
    """Completion length in whitespace tokens (a diagnostic; shorter is cheaper)."""

    name = "output_length"
    direction = Direction.MINIMIZE
    family = "generation"

    def __init__(self, *, on: str | None = None) -> None:
        super().__init__(on=on)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Any:
        return float(len(self.prediction(generation, context).split()))
