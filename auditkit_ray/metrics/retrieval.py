"""Ranked-retrieval metrics over the contexts a sample actually retrieved,
with trec_eval's definitions (checked against pytrec_eval in the tests).

Ranking (``rank_contexts``): by descending ``score`` when every context has
one, else by ascending ``rank`` when every context has one, else the list
order. Ties are broken as trec_eval breaks them: by document id in
*descending* byte order (trec_eval sorts by ``sim`` descending, then
``strcmp(docno)`` descending). A repeated id keeps its best-ranked
occurrence.

Judgments (``judgments``): ``sample.gold_evidence`` ids are relevant with
grade 1; ``sample.metadata["relevance"]`` ({id: grade}) adds graded
judgments and overrides the grade of a gold id it names. An id is relevant
when its grade is >= 1 (trec_eval's default ``relevance_level``). A sample
with no relevant id is ``unknown`` (trec_eval would average it in as 0).

Empty retrievals: a sample whose ``retrieved_contexts`` is an empty list
retrieved nothing, and scores 0 on every measure when it has gold evidence
(as trec_eval scores an empty run); only a sample whose ``retrieved_contexts``
is missing or null (retrieval not recorded) is ``not_tested``.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any

from ..core.metric import Direction, Metric, MissingEvidence
from ..core.types import Generation, Sample, Score

RELEVANCE_LEVEL = 1.0


def context_id(ctx: Any, i: int) -> str:
    if not isinstance(ctx, dict):
        raise ValueError(f"retrieved_contexts[{i}] must be an object with an 'id', got {type(ctx).__name__}")
    if "id" not in ctx or ctx["id"] is None or isinstance(ctx["id"], (dict, list, bool)):
        raise ValueError(f"retrieved_contexts[{i}] has no usable 'id' (keys: {sorted(ctx)})")
    return str(ctx["id"])


def _number(ctx: dict, key: str, i: int) -> float:
    v = ctx[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"retrieved_contexts[{i}].{key} must be a finite number, got {v!r}")
    return float(v)


def rank_contexts(contexts: list[dict[str, Any]]) -> list[str]:
    """Document ids in rank order (see the module docstring for the rule)."""
    if not isinstance(contexts, (list, tuple)):
        raise ValueError(f"retrieved_contexts must be a list, got {type(contexts).__name__}")
    ids = [context_id(c, i) for i, c in enumerate(contexts)]
    has_score = [c.get("score") is not None for c in contexts]
    has_rank = [c.get("rank") is not None for c in contexts]
    if all(has_score):
        keys = [-_number(c, "score", i) for i, c in enumerate(contexts)]
    elif all(has_rank):
        keys = [_number(c, "rank", i) for i, c in enumerate(contexts)]
    elif not any(has_score) and not any(has_rank):
        keys = None
    else:
        raise ValueError("retrieved_contexts mix items with and without 'score'/'rank': give all or none")
    order = list(range(len(ids)))
    if keys is not None:
        # trec_eval: primary key sim descending, ties by docno descending
        order.sort(key=lambda i: ids[i].encode("utf-8"), reverse=True)
        order.sort(key=lambda i: keys[i])  # stable
    seen: set[str] = set()
    ranked = []
    for i in order:
        if ids[i] not in seen:
            seen.add(ids[i])
            ranked.append(ids[i])
    return ranked


def judgments(sample: Sample) -> dict[str, float]:
    """{doc id: grade} from gold_evidence (grade 1) and metadata.relevance."""
    gold = sample.gold_evidence or []
    if not isinstance(gold, (list, tuple)):
        raise ValueError(f"gold_evidence must be a list of ids, got {type(gold).__name__}")
    out = {}
    for g in gold:
        if g is None or isinstance(g, (dict, list, bool)):
            raise ValueError(f"gold_evidence holds {g!r}, not a document id")
        out[str(g)] = 1.0
    rel = (sample.metadata or {}).get("relevance")
    if rel is not None:
        if not isinstance(rel, dict):
            raise ValueError(f"metadata.relevance must be an object {{id: grade}}, got {type(rel).__name__}")
        for doc, grade in rel.items():
            if isinstance(grade, bool) or not isinstance(grade, (int, float)) or not math.isfinite(grade):
                raise ValueError(f"metadata.relevance[{doc!r}] must be a finite number, got {grade!r}")
            out[str(doc)] = float(grade)
    return out


class _RetrievalMetric(Metric, abstract=True):
    family = "retrieval"
    requires = ("retrieved_contexts",)
    empty_is_evidence = ("retrieved_contexts",)
    # 2: an empty retrieved list scores 0 (was not_tested)
    version = "2"
    #: whether the metric takes a cut-off ``k`` (and whether it is required)
    _k_default: int | None = None
    _k_optional = False

    def __init__(self, *, k: int | None = None) -> None:
        k = self._k_default if k is None else k
        if k is None and not self._k_optional:
            raise TypeError(f"{self.name}: k is required")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise TypeError(f"{self.name}: k must be a positive integer, not {k!r}")
        super().__init__(k=k)
        self.k = k

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        ranked = rank_contexts(sample.retrieved_contexts or [])
        qrels = judgments(sample)
        num_rel = sum(1 for g in qrels.values() if g >= RELEVANCE_LEVEL)
        if num_rel == 0:
            raise MissingEvidence("no gold evidence: no document is judged relevant for this sample")
        value = self.compute(ranked, qrels, num_rel)
        return Score.scored(self.name, value, reason=None if ranked else "nothing was retrieved",
                            metadata={"num_ret": len(ranked), "num_rel": num_rel})

    @abstractmethod
    def compute(self, ranked: list[str], qrels: dict[str, float], num_rel: int) -> float:
        """The measure over the ranked ids, the graded judgments and the number of relevant documents."""

    @staticmethod
    def _rel(doc: str, qrels: dict[str, float]) -> bool:
        return qrels.get(doc, 0.0) >= RELEVANCE_LEVEL


class HitRateAtK(_RetrievalMetric):
    """1 when a relevant document is among the top k (trec_eval success@k)."""

    name = "hit_rate_at_k"
    direction = Direction.MAXIMIZE
    description = "1 when at least one relevant document is in the top k (trec_eval success_k)"
    _k_default = 10

    def compute(self, ranked, qrels, num_rel):
        return 1.0 if any(self._rel(d, qrels) for d in ranked[: self.k]) else 0.0


class PrecisionAtK(_RetrievalMetric):
    """Relevant documents in the top k / k (trec_eval P_k: always divides by k)."""

    name = "precision_at_k"
    direction = Direction.MAXIMIZE
    description = "relevant documents in the top k divided by k (trec_eval P_k)"
    _k_default = 10

    def compute(self, ranked, qrels, num_rel):
        return sum(self._rel(d, qrels) for d in ranked[: self.k]) / self.k


class RecallAtK(_RetrievalMetric):
    """Relevant documents in the top k / all relevant documents (trec_eval recall_k)."""

    name = "recall_at_k"
    direction = Direction.MAXIMIZE
    description = "relevant documents in the top k divided by all relevant gold documents (trec_eval recall_k)"
    _k_default = 10

    def compute(self, ranked, qrels, num_rel):
        return sum(self._rel(d, qrels) for d in ranked[: self.k]) / num_rel


class MRR(_RetrievalMetric):
    """Reciprocal rank of the first relevant document (trec_eval recip_rank); optional cut-off k."""

    name = "mrr"
    direction = Direction.MAXIMIZE
    description = "reciprocal rank of the first relevant document, 0 if none (trec_eval recip_rank; optional k)"
    _k_optional = True

    def compute(self, ranked, qrels, num_rel):
        top = ranked if self.k is None else ranked[: self.k]
        for i, d in enumerate(top, 1):
            if self._rel(d, qrels):
                return 1.0 / i
        return 0.0


class AveragePrecision(_RetrievalMetric):
    """Average precision over ALL relevant gold documents (trec_eval map; optional cut-off k = map_cut_k)."""

    name = "average_precision"
    direction = Direction.MAXIMIZE
    description = "average precision, divided by all relevant gold documents (trec_eval map; optional k = map_cut)"
    _k_optional = True

    def compute(self, ranked, qrels, num_rel):
        top = ranked if self.k is None else ranked[: self.k]
        hits, total = 0, 0.0
        for i, d in enumerate(top, 1):
            if self._rel(d, qrels):
                hits += 1
                total += hits / i
        return total / num_rel


class RPrecision(_RetrievalMetric):
    """Precision at rank R, R = the number of relevant documents (trec_eval Rprec)."""

    name = "r_precision"
    direction = Direction.MAXIMIZE
    description = "relevant documents in the top R / R, R = the number of relevant gold documents (trec_eval Rprec)"

    def __init__(self) -> None:  # no cut-off: R comes from the judgments (precision_at_k takes a fixed k)
        Metric.__init__(self)
        self.k = None

    def compute(self, ranked, qrels, num_rel):
        return sum(self._rel(d, qrels) for d in ranked[:num_rel]) / num_rel


def _ndcg(ranked: list[str], qrels: dict[str, float], k: int | None) -> float:
    def gain(g: float) -> float:
        return g if g > 0 else 0.0

    dcg = sum(gain(qrels.get(d, 0.0)) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((gain(g) for g in qrels.values()), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


class NDCGAtK(_RetrievalMetric):
    """nDCG@k with linear gain (the grade) and the ideal ranking of all judged documents (trec_eval ndcg_cut_k)."""

    name = "ndcg_at_k"
    direction = Direction.MAXIMIZE
    description = "nDCG@k: linear gain = grade, log2 discount, ideal from all gold documents (trec_eval ndcg_cut_k)"
    _k_default = 10

    def compute(self, ranked, qrels, num_rel):
        return _ndcg(ranked, qrels, self.k)


class NDCG(_RetrievalMetric):
    """nDCG over the whole ranking, no cut-off (trec_eval ndcg): linear gain, ideal from all judged documents."""

    name = "ndcg"
    direction = Direction.MAXIMIZE
    description = "nDCG over the whole ranking (no cut-off): linear gain = grade, log2 discount (trec_eval ndcg)"

    def __init__(self) -> None:  # no cut-off (ndcg_at_k takes one)
        Metric.__init__(self)
        self.k = None

    def compute(self, ranked, qrels, num_rel):
        return _ndcg(ranked, qrels, None)


__all__ = ["AveragePrecision", "HitRateAtK", "MRR", "NDCG", "NDCGAtK", "PrecisionAtK", "RPrecision", "RecallAtK",
           "judgments", "rank_contexts"]
