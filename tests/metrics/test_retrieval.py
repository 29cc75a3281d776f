"""Retrieval metrics equal pytrec_eval (trec_eval) per query."""

import math
import random
from pathlib import Path

import pytest

from auditkit_ray import Generation, Sample, Status
from auditkit_ray.core.registry import build_metric
from auditkit_ray.metrics.retrieval import rank_contexts

pytrec_eval = pytest.importorskip("pytrec_eval", reason="test-only reference: pip install pytrec-eval-terrier")

DATA = Path(__file__).parent / "data"
GEN = Generation(text="")
CUTS = (1, 3, 5, 10, 20)


def _ours(name: str, k: int | None = None):
    return build_metric(name, {} if k is None else {"k": k})


# trec measure -> (our metric, k)
MEASURES = {"map": ("average_precision", None), "recip_rank": ("mrr", None)}
for _k in CUTS:
    MEASURES[f"P_{_k}"] = ("precision_at_k", _k)
    MEASURES[f"recall_{_k}"] = ("recall_at_k", _k)
    MEASURES[f"ndcg_cut_{_k}"] = ("ndcg_at_k", _k)
for _k in (5, 10):
    MEASURES[f"map_cut_{_k}"] = ("average_precision", _k)
for _k in (1, 5, 10):  # pytrec_eval's success measure only has these cut-offs
    MEASURES[f"success_{_k}"] = ("hit_rate_at_k", _k)
TREC_REQUEST = {
    "map",
    "recip_rank",
    "success",
    *(f"{m}.{','.join(map(str, CUTS))}" for m in ("P", "recall", "ndcg_cut")),
    "map_cut.5,10",
}


def _sample(qid: str, run: dict[str, float], qrel: dict[str, int], ranks: dict[str, int] | None = None) -> Sample:
    ctxs = [{"id": d, "score": s, **({"rank": ranks[d]} if ranks else {})} for d, s in run.items()]
    return Sample(id=qid, input="q", retrieved_contexts=ctxs,
                  gold_evidence=[d for d, r in qrel.items() if r >= 1], metadata={"relevance": dict(qrel)})


def _compare(qrels: dict, runs: dict, ranks: dict | None = None) -> tuple[float, int]:
    """Max |ours - pytrec_eval| over every measure and query; asserts statuses."""
    ref = pytrec_eval.RelevanceEvaluator(qrels, TREC_REQUEST).evaluate(runs)
    metrics = {key: _ours(*spec) for key, spec in MEASURES.items()}
    worst, compared = 0.0, 0
    for qid, run in runs.items():
        sample = _sample(qid, run, qrels[qid], (ranks or {}).get(qid))
        has_rel = any(r >= 1 for r in qrels[qid].values())
        for key, metric in metrics.items():
            [score] = metric.evaluate(sample, GEN, {})
            if not has_rel:
                assert score.status is Status.UNKNOWN and "no gold evidence" in score.reason
                continue
            assert score.status is Status.SCORED, (qid, key, score)
            diff = abs(score.value - ref[qid][key])
            assert diff <= 1e-12, (qid, key, score.value, ref[qid][key])
            worst, compared = max(worst, diff), compared + 1
    return worst, compared


def _read_trec_fixture():
    qrels: dict[str, dict[str, int]] = {}
    for line in (DATA / "qrels.test").read_text().splitlines():
        q, _, d, r = line.split()
        qrels.setdefault(q, {})[d] = int(r)
    runs: dict[str, dict[str, float]] = {}
    ranks: dict[str, dict[str, int]] = {}
    for line in (DATA / "results.test").read_text().splitlines():
        q, _, d, rank, sim, _ = line.split()
        runs.setdefault(q, {})[d] = float(sim)
        ranks.setdefault(q, {})[d] = int(rank)
    return qrels, runs, ranks


def test_retrieval_metrics_equal_pytrec_eval_on_trec_style_fixture_with_ties_and_bogus_ranks():
    qrels, runs, ranks = _read_trec_fixture()
    # the fixture really exercises ties and inconsistent rank columns
    assert any(len(set(r.values())) < len(r) for r in runs.values())
    worst, n = _compare(qrels, runs, ranks)
    assert n == 19 * len(MEASURES) and worst <= 1e-12  # 20 queries, one without relevant docs


def _random_queries(rng: random.Random, n: int, ties: bool):
    qrels, runs = {}, {}
    for q in range(n):
        pool = [f"d{rng.randint(0, 10**6)}" for _ in range(rng.randint(1, 30))]
        pool = list(dict.fromkeys(pool))
        judged = rng.sample(pool, k=rng.randint(0, len(pool)))
        qrel = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
        qrel[f"unretrieved{q}"] = rng.choice([0, 1, 2])  # may be relevant and never retrieved
        if not any(r >= 1 for r in qrel.values()):
            qrel[f"extra{q}"] = 1
        run_docs = rng.sample(pool, k=rng.randint(1, len(pool)))
        if ties:
            scores = [float(rng.randint(0, 4)) for _ in run_docs]
        else:
            scores = rng.sample(range(10**6), k=len(run_docs))
            scores = [s / 997.0 for s in scores]
        qrels[f"q{q}"], runs[f"q{q}"] = qrel, dict(zip(run_docs, scores))
    return qrels, runs


def test_retrieval_metrics_equal_pytrec_eval_on_1000_random_queries_without_ties():
    qrels, runs = _random_queries(random.Random(7), 1000, ties=False)
    worst, n = _compare(qrels, runs)
    assert n == 1000 * len(MEASURES) and worst <= 1e-12


def test_tie_breaking_equals_pytrec_eval_on_300_random_queries_with_many_ties():
    qrels, runs = _random_queries(random.Random(11), 300, ties=True)
    worst, n = _compare(qrels, runs)
    assert n == 300 * len(MEASURES) and worst <= 1e-12


def test_ties_are_broken_by_document_id_descending_like_trec_eval():
    ctxs = [{"id": i, "score": 1.0} for i in ("a", "c", "b", "z")] + [{"id": "d", "score": 0.5}]
    assert rank_contexts(ctxs) == ["z", "c", "b", "a", "d"]
    ref = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"P.1", "recip_rank"}).evaluate(
        {"q": {c["id"]: c["score"] for c in ctxs}}
    )
    [rr] = _ours("mrr").evaluate(Sample(id="q", input="q", retrieved_contexts=ctxs, gold_evidence=["a"]), GEN, {})
    assert rr.value == ref["q"]["recip_rank"] == 0.25


def test_rank_field_orders_when_no_scores_and_list_order_when_neither():
    assert rank_contexts([{"id": "x", "rank": 2}, {"id": "y", "rank": 1}, {"id": "a", "rank": 2}]) == ["y", "x", "a"]
    assert rank_contexts([{"id": "x"}, {"id": "y"}, {"id": "a"}]) == ["x", "y", "a"]


def test_repeated_ids_keep_their_best_ranked_occurrence():
    assert rank_contexts([{"id": "x", "score": 1}, {"id": "y", "score": 3}, {"id": "x", "score": 5}]) == ["x", "y"]


def test_ap_divides_by_all_relevant_gold_items_not_only_retrieved_ones():
    s = Sample(id="q", input="q", retrieved_contexts=[{"id": "a"}, {"id": "n"}], gold_evidence=["a", "b", "c", "d"])
    [ap] = _ours("average_precision").evaluate(s, GEN, {})
    assert ap.value == pytest.approx(0.25)
    [nd] = _ours("ndcg_at_k", 2).evaluate(s, GEN, {})
    assert nd.value == pytest.approx(1 / (1 + 1 / math.log2(3)))  # ideal holds 2 gold items


def test_no_gold_evidence_is_unknown_and_no_retrieval_is_not_tested():
    m = _ours("ndcg_at_k", 5)
    [s] = m.evaluate(Sample(id="q", input="q", retrieved_contexts=[{"id": "a"}]), GEN, {})
    assert s.status is Status.UNKNOWN and "no gold evidence" in s.reason
    [s] = m.evaluate(
        Sample(id="q", input="q", retrieved_contexts=[{"id": "a"}], metadata={"relevance": {"a": 0}}), GEN, {}
    )
    assert s.status is Status.UNKNOWN
    for ctxs in (None, []):
        [s] = m.evaluate(Sample(id="q", input="q", retrieved_contexts=ctxs, gold_evidence=["a"]), GEN, {})
        assert s.status is Status.NOT_TESTED and "retrieved_contexts" in s.reason


@pytest.mark.parametrize("ctxs, words", [
    ([{"doc": "a"}], "no usable 'id'"),
    ([{"id": "a", "score": 1.0}, {"id": "b"}], "mix"),
    ([{"id": "a", "score": float("nan")}], "finite"),
    ([{"id": "a", "score": "high"}], "finite"),
    (["a", "b"], "must be an object"),
])
def test_malformed_retrieved_contexts_give_error_with_reason(ctxs, words):
    s = Sample.model_construct(id="q", input="q", retrieved_contexts=ctxs, gold_evidence=["a"], metadata={},
                               target=None, choices=None, corpus_snapshot=None)
    [score] = _ours("recall_at_k", 5).evaluate(s, GEN, {})
    assert score.status is Status.ERROR and words in score.reason


def test_malformed_relevance_gives_error_and_bad_k_is_refused_at_build():
    for rel in (["a"], {"a": float("nan")}, {"a": "high"}):
        s = Sample(
            id="q", input="q", retrieved_contexts=[{"id": "a"}], gold_evidence=["a"], metadata={"relevance": rel}
        )
        [score] = _ours("mrr").evaluate(s, GEN, {})
        assert score.status is Status.ERROR and "metadata.relevance" in score.reason
    from auditkit_ray import ConfigError

    with pytest.raises(ConfigError, match="k must be a positive integer"):
        build_metric("precision_at_k", {"k": 0})
