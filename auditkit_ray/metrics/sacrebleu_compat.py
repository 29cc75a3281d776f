"""The one place that touches sacrebleu's private API.

Corpus BLEU, chrF and TER merge exactly across shards only if every shard
keeps sacrebleu's own per-segment sufficient statistics and the total is
scored by the same code ``corpus_score`` runs. sacrebleu exposes that code
only as private methods (``_extract_corpus_statistics``,
``_compute_score_from_stats``, ``_SIGNATURE_TYPE``), stable across the 2.x
releases this was written for. A sacrebleu that lacks them fails here, once,
with its version named, instead of deep inside a shard.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

#: the sacrebleu releases whose private methods this module was written against
SUPPORTED = "sacrebleu>=2.4,<3"
_NEEDED = ("_extract_corpus_statistics", "_compute_score_from_stats", "_SIGNATURE_TYPE")


def check(metric: Any) -> Any:
    """``metric`` (a sacrebleu metric object), once its private methods are known to be there."""
    missing = [name for name in _NEEDED if not hasattr(metric, name)]
    if missing:
        import sacrebleu

        raise ConfigError(f"sacrebleu {sacrebleu.__version__} has no {', '.join(missing)} on "
                          f"{type(metric).__name__}: auditkit-ray's corpus metrics need {SUPPORTED}")
    return metric


def segment_stats(metric: Any, hypothesis: str, references: list[str]) -> list[Any]:
    """The sufficient statistics of one segment, exactly as ``corpus_score`` collects them."""
    return list(metric._extract_corpus_statistics([hypothesis], [[r] for r in references])[0])


def score_from_stats(metric: Any, stats: list[Any]) -> Any:
    """sacrebleu's score object (BLEUScore, CHRFScore, TERScore) for summed statistics."""
    return metric._compute_score_from_stats(list(stats))


def signature(metric: Any, args: dict[str, Any]) -> str:
    return metric._SIGNATURE_TYPE(args).format()
