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
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(text: str) -> str:
    """SQuAD v1.1's ``normalize_answer``: lower case; ASCII punctuation
    (``string.punctuation``) deleted, not replaced by a space, so ``1,000``
    is ``1000`` and ``cat's`` is ``cats``; the words a/an/the removed; runs
    of whitespace collapsed to one space and the ends stripped."""
    text = _PUNCT.sub("", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_golds(normalized: list[str]) -> list[str]:
    """SQuAD v2's reference set: references that normalise to nothing are
    dropped unless all do (then the one reference is the empty answer)."""
    kept = [t for t in normalized if t]
    return kept or [""]


#: named normalisations (param ``preset``) replacing the individual flags
PRESETS = {"squad": squad_normalize}


class TextMetric(Metric, abstract=True):
    """Normalisation shared by exact_match, contains, regex_match and
    majority_vote: ``ignore_regexes`` are removed first, then either the
    named ``preset`` (``squad``: SQuAD v1.1's answer normalisation) or the
    individual flags apply; a preset does not combine with the flags."""

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
        preset: str | None = None,
    ) -> None:
        params: dict[str, Any] = dict(
            ignore_case=ignore_case,
            ignore_punctuation=ignore_punctuation,
            ignore_whitespace=ignore_whitespace,
            strip=strip,
            ignore_regexes=list(ignore_regexes or []),
            on=on,
        )
        self._preset = None
        if preset is not None:
            if preset not in PRESETS:
                raise TypeError(f"preset must be one of {', '.join(sorted(PRESETS))}, not {preset!r}")
            flags = [k for k, default in (("ignore_case", False), ("ignore_punctuation", False),
                                          ("ignore_whitespace", False), ("strip", True)) if params[k] != default]
            if flags:
                raise TypeError(f"preset {preset!r} replaces {', '.join(flags)}: give the preset or the flags")
            # only set when used, so runs without a preset keep their metric identity
            params["preset"] = preset
            self._preset = PRESETS[preset]
        super().__init__(**params)
        try:
            self._ignore = [re.compile(r) for r in ignore_regexes or []]
        except re.error as exc:
            raise TypeError(f"ignore_regexes: invalid regular expression ({exc})") from None

    def norm(self, text: str) -> str:
        p = self.params
        for rx in self._ignore:
            text = rx.sub("", text)
        if self._preset is not None:
            return self._preset(text)
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
    """1 when the prediction equals a target after the chosen normalisation.

    With `preset: squad` it is SQuAD's exact match (v2's rule: references
    that normalise to nothing are dropped unless all do)."""

    name = "exact_match"
    direction = Direction.MAXIMIZE
    description = "1 when the prediction equals a target after the chosen normalisation (preset squad: SQuAD EM)"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        pred = self.norm(self.prediction(generation, context))
        golds = [self.norm(t) for t in sample.targets]
        if self._preset is squad_normalize:
            golds = squad_golds(golds)
        return Score.scored(self.name, 1.0 if pred in golds else 0.0)


class Contains(TextMetric):
    """1 when a (normalised) target occurs inside the prediction."""

    name = "contains"
    direction = Direction.MAXIMIZE

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        pred = self.norm(self.prediction(generation, context))
        hit = any(self.norm(t) and self.norm(t) in pred for t in sample.targets)
        return Score.scored(self.name, 1.0 if hit else 0.0)


def _tokens(text: str) -> list[str]:
    return squad_normalize(text).split()


class TokenF1(TextMetric):
    """SQuAD token F1, best over the targets.

    SQuAD's normalisation (lower case, punctuation deleted, articles removed,
    whitespace collapsed) and SQuAD v2's rules: references that normalise to
    nothing are dropped unless all do, and an empty prediction against an
    empty reference scores 1 (v1.1's script gives 0 there)."""

    name = "token_f1"
    direction = Direction.MAXIMIZE
    description = "SQuAD token F1 (lower case, punctuation deleted, articles removed; v2 empty-answer rule)"
    # 2: punctuation is deleted as in SQuAD (1 replaced it by a space)
    version = "2"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        pred = _tokens(self.prediction(generation, context))
        best = 0.0
        for t in squad_golds([squad_normalize(t) for t in sample.targets]):
            gold = t.split()
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
