"""Lexical overlap metrics: BLEU, chrF and TER (sacrebleu, corpus-level),
ROUGE (rouge-score, mean of per-sample F-measure) and word error rate
(corpus-level).

Corpus metrics store sacrebleu's own per-segment sufficient statistics in
``score.metadata["stats"]``; shards sum them and ``finalize`` runs
sacrebleu's own scoring of the total (``sacrebleu_compat``), which is exactly what
``sacrebleu.corpus_bleu`` / ``corpus_chrf`` / ``corpus_ter`` compute. The
per-sample value is a diagnostic (sentence BLEU with effective order,
sentence chrF, sentence TER); summaries report the corpus score.
"""

from __future__ import annotations

import re
import string
from typing import Any

from ..core.metric import Direction, Metric
from ..core.types import Generation, Sample, Score
from ..errors import require
from . import sacrebleu_compat as sbc


def references(sample: Sample) -> list[str]:
    """The sample's references, checked: a non-empty list of strings."""
    target = sample.target
    refs = [target] if isinstance(target, str) else target
    if not isinstance(refs, (list, tuple)) or not refs:
        raise ValueError(f"references must be a string or a non-empty list of strings, got {type(target).__name__}")
    for r in refs:
        if not isinstance(r, str):
            raise ValueError(f"each reference must be a string, got {type(r).__name__} ({r!r:.40})")
    return list(refs)


def hypothesis(metric: Metric, generation: Generation, context: dict) -> str:
    hyp = metric.prediction(generation, context)
    if not isinstance(hyp, str):
        raise ValueError(f"prediction must be a string, got {type(hyp).__name__}")
    return hyp


# -- sacrebleu ---------------------------------------------------------------------


class _SacreBleuMetric(Metric, abstract=True):
    family = "lexical"
    requires = ("target",)
    aggregation = "corpus"
    _cls_name: str = ""

    def __init__(self, *, num_refs: int | None = None, on: str | None = None, **options: Any) -> None:
        if num_refs is not None and (isinstance(num_refs, bool) or not isinstance(num_refs, int) or num_refs < 1):
            raise TypeError(f"num_refs must be a positive integer, not {num_refs!r}")
        super().__init__(num_refs=num_refs, on=on, **options)
        metrics = require("sacrebleu.metrics", "metrics")
        self._sb = sbc.check(getattr(metrics, self._cls_name)(**options))
        self._sentence = sbc.check(self._sentence_metric(metrics, options))

    def _sentence_metric(self, metrics: Any, options: dict) -> Any:
        return self._sb

    def _stats(self, metric: Any, hyp: str, refs: list[str]) -> list[Any]:
        return sbc.segment_stats(metric, hyp, refs)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        refs = references(sample)
        want = self.params["num_refs"]
        if want is not None and len(refs) != want:
            raise ValueError(f"expected {want} references (param num_refs), got {len(refs)}")
        hyp = hypothesis(self, generation, context)
        stats = self._stats(self._sb, hyp, refs)
        if self._sentence is self._sb:
            value = sbc.score_from_stats(self._sb, stats).score
        else:
            value = sbc.score_from_stats(self._sentence, self._stats(self._sentence, hyp, refs)).score
        return Score.scored(self.name, float(value), metadata={"stats": [_plain(x) for x in stats], "nrefs": len(refs)})

    def finalize(self, stats: list[float]) -> float | None:
        if not stats:
            return None
        return float(sbc.score_from_stats(self._sb, stats).score)

    def corpus_score(self, stats: list[float]) -> Any:
        """sacrebleu's score object (BLEUScore, CHRFScore, TERScore) for merged stats."""
        return sbc.score_from_stats(self._sb, stats)

    def signature(self) -> str | None:
        """sacrebleu's signature of this configuration. ``nrefs`` appears only
        when the ``num_refs`` param fixes it (every sample is then checked)."""
        args = dict(self._sb.__dict__)
        args["num_refs"] = self.params["num_refs"]
        return sbc.signature(self._sb, args)


def _plain(x: Any) -> float | int:
    return int(x) if isinstance(x, int) else float(x)


class Bleu(_SacreBleuMetric):
    """Corpus BLEU (sacrebleu); per-sample value is sentence BLEU with effective order."""

    name = "bleu"
    direction = Direction.MAXIMIZE
    description = "corpus BLEU via sacrebleu (summed n-gram statistics; per-sample value is sentence BLEU)"
    _cls_name = "BLEU"

    def __init__(self, *, lowercase: bool = False, tokenize: str | None = None, smooth_method: str = "exp",
                 smooth_value: float | None = None, max_ngram_order: int = 4, effective_order: bool = False,
                 trg_lang: str = "", num_refs: int | None = None, on: str | None = None) -> None:
        super().__init__(num_refs=num_refs, on=on, lowercase=lowercase, tokenize=tokenize,
                         smooth_method=smooth_method, smooth_value=smooth_value, max_ngram_order=max_ngram_order,
                         effective_order=effective_order, trg_lang=trg_lang)

    def _sentence_metric(self, metrics: Any, options: dict) -> Any:
        if options.get("effective_order"):
            return self._sb
        return metrics.BLEU(**{**options, "effective_order": True})


class Chrf(_SacreBleuMetric):
    """Corpus chrF / chrF++ (sacrebleu)."""

    name = "chrf"
    direction = Direction.MAXIMIZE
    description = "corpus chrF (word_order=2: chrF++) via sacrebleu (summed character n-gram statistics)"
    _cls_name = "CHRF"

    def __init__(self, *, char_order: int = 6, word_order: int = 0, beta: int = 2, lowercase: bool = False,
                 whitespace: bool = False, eps_smoothing: bool = False, num_refs: int | None = None,
                 on: str | None = None) -> None:
        super().__init__(num_refs=num_refs, on=on, char_order=char_order, word_order=word_order, beta=beta,
                         lowercase=lowercase, whitespace=whitespace, eps_smoothing=eps_smoothing)


class Ter(_SacreBleuMetric):
    """Corpus translation edit rate (sacrebleu), in percent; lower is better."""

    name = "ter"
    direction = Direction.MINIMIZE
    description = "corpus TER via sacrebleu (total edits / total average reference length, in percent)"
    _cls_name = "TER"

    def __init__(self, *, normalized: bool = False, no_punct: bool = False, asian_support: bool = False,
                 case_sensitive: bool = False, num_refs: int | None = None, on: str | None = None) -> None:
        super().__init__(num_refs=num_refs, on=on, normalized=normalized, no_punct=no_punct,
                         asian_support=asian_support, case_sensitive=case_sensitive)


# -- ROUGE -------------------------------------------------------------------------

_ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
_DROPPED = ("rouge-score's default tokenizer reduced the {what} to no tokens (it keeps only ASCII letters "
            "and digits, so non-Latin text is dropped); ROUGE cannot be measured here")


class Rouge(Metric):
    """ROUGE-1/2/L/Lsum F-measure (rouge-score), best over references; one score per type."""

    name = "rouge"
    direction = Direction.MAXIMIZE
    family = "lexical"
    requires = ("target",)
    description = "ROUGE-1/2/L/Lsum via rouge-score (mean of per-sample F-measure, best reference); one score per type"
    _types: tuple[str, ...] = _ROUGE_TYPES

    def __init__(self, *, types: list[str] | None = None, use_stemmer: bool = False, measure: str = "fmeasure",
                 on: str | None = None) -> None:
        types = list(types) if types is not None else list(self._types)
        bad = [t for t in types if not re.fullmatch(r"rouge[1-9]|rougeL|rougeLsum", str(t))]
        if bad or not types:
            raise TypeError(f"types must be a non-empty list of rouge1..rouge9, rougeL, rougeLsum (got {bad or types})")
        if measure not in ("fmeasure", "precision", "recall"):
            raise TypeError(f"measure must be 'fmeasure', 'precision' or 'recall', not {measure!r}")
        if type(self)._types != _ROUGE_TYPES:  # a single-type subclass
            super().__init__(use_stemmer=use_stemmer, measure=measure, on=on)
        else:
            super().__init__(types=types, use_stemmer=use_stemmer, measure=measure, on=on)
        self._list = types
        rs = require("rouge_score.rouge_scorer", "metrics")
        tk = require("rouge_score.tokenizers", "metrics")
        self._tokenizer = tk.DefaultTokenizer(use_stemmer)
        self._scorer = rs.RougeScorer(types, tokenizer=self._tokenizer)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score | dict[str, Score]:
        refs = references(sample)
        hyp = hypothesis(self, generation, context)
        result = self._score(refs, hyp)
        if len(self._list) == 1 and type(self)._types != _ROUGE_TYPES:
            return result[self._list[0]]
        # fully qualified keys: "rouge.rouge1" (a bare "rouge1" would be taken
        # as already carrying the output name, a prefix of it)
        return {f"{self.output_name}.{t}": s for t, s in result.items()}

    def _score(self, refs: list[str], hyp: str) -> dict[str, Score]:
        def unknown(reason: str) -> dict[str, Score]:
            return {t: Score.unknown(self.name, reason) for t in self._list}

        usable = [r for r in refs if self._tokenizer.tokenize(r)]
        if not usable:
            what = "reference" if len(refs) == 1 else f"all {len(refs)} references"
            if all(not r.strip() for r in refs):
                return unknown("empty reference: ROUGE needs a reference with words")
            return unknown(_DROPPED.format(what=what))
        if not hyp.strip():
            return {t: Score.scored(self.name, 0.0, reason="empty prediction") for t in self._list}
        if not self._tokenizer.tokenize(hyp):
            return unknown(_DROPPED.format(what="prediction"))
        # a reference with no tokens scores 0 for every type and so never wins
        # the max: scoring the usable ones gives rouge-score's score_multi result
        best = self._scorer.score_multi(refs, hyp) if len(refs) > 1 else self._scorer.score(refs[0], hyp)
        measure = self.params["measure"]
        out = {}
        for t in self._list:
            s = best[t]
            out[t] = Score.scored(self.name, float(getattr(s, measure)),
                                  metadata={"precision": s.precision, "recall": s.recall, "fmeasure": s.fmeasure})
        return out


class Rouge1(Rouge):
    """ROUGE-1 F-measure (rouge-score)."""

    name = "rouge1"
    direction = Direction.MAXIMIZE
    description = "ROUGE-1 F-measure via rouge-score (unigram overlap; best reference)"
    _types = ("rouge1",)

    def __init__(self, *, use_stemmer: bool = False, measure: str = "fmeasure", on: str | None = None) -> None:
        super().__init__(types=list(self._types), use_stemmer=use_stemmer, measure=measure, on=on)


class Rouge2(Rouge1):
    """ROUGE-2 F-measure (rouge-score)."""

    name = "rouge2"
    direction = Direction.MAXIMIZE
    description = "ROUGE-2 F-measure via rouge-score (bigram overlap; best reference)"
    _types = ("rouge2",)


class RougeL(Rouge1):
    """ROUGE-L F-measure (rouge-score)."""

    name = "rougeL"
    direction = Direction.MAXIMIZE
    description = "ROUGE-L F-measure via rouge-score (longest common subsequence; best reference)"
    _types = ("rougeL",)


class RougeLsum(Rouge1):
    """ROUGE-Lsum F-measure (rouge-score; sentences split on newlines)."""

    name = "rougeLsum"
    direction = Direction.MAXIMIZE
    description = "ROUGE-Lsum F-measure via rouge-score (summary-level LCS over newline-separated sentences)"
    _types = ("rougeLsum",)


# -- word error rate -----------------------------------------------------------------

_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")


def edit_distance(a: list[str], b: list[str]) -> int:
    """Levenshtein distance between two token lists (unit costs)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


class WordErrorRate(Metric):
    """Corpus word error rate: total word edits / total reference words."""

    name = "wer"
    direction = Direction.MINIMIZE
    family = "lexical"
    requires = ("target",)
    aggregation = "corpus"
    description = "corpus word error rate: sum of word-level edit distances / sum of reference words"

    def __init__(self, *, lowercase: bool = False, remove_punctuation: bool = False, on: str | None = None) -> None:
        super().__init__(lowercase=lowercase, remove_punctuation=remove_punctuation, on=on)

    def words(self, text: str) -> list[str]:
        if self.params["lowercase"]:
            text = text.lower()
        if self.params["remove_punctuation"]:
            text = _PUNCT.sub("", text)
        return text.split()

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        refs = references(sample)
        hyp = self.words(hypothesis(self, generation, context))
        # several references: the one needing the fewest edits (ties: the first)
        best = min(((edit_distance(hyp, ref), len(ref)) for ref in map(self.words, refs)), key=lambda c: c[0])
        return Score.scored(self.name, _rate(*best), metadata={"stats": [best[0], best[1]]})

    def finalize(self, stats: list[float]) -> float | None:
        return _rate(stats[0], stats[1]) if stats else None


def _rate(edits: float, ref_words: float) -> float:
    # sacrebleu's TER convention for an empty reference
    if ref_words > 0:
        return float(edits) / float(ref_words)
    return 1.0 if edits > 0 else 0.0


__all__ = ["Bleu", "Chrf", "Rouge", "Rouge1", "Rouge2", "RougeL", "RougeLsum", "Ter", "WordErrorRate",
           "edit_distance"]
