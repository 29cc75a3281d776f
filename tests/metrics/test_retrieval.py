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
MEASURES = {"map": ("average_precision", None), "recip_rank": ("mrr", None), "Rprec": ("r_precision", None),
            "ndcg": ("ndcg", None)}
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
    "Rprec",
    "ndcg",
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


def test_no_gold_evidence_is_unknown_and_unrecorded_retrieval_is_not_tested():
    m = _ours("ndcg_at_k", 5)
    [s] = m.evaluate(Sample(id="q", input="q", retrieved_contexts=[{"id": "a"}]), GEN, {})
    assert s.status is Status.UNKNOWN and "no gold evidence" in s.reason
    [s] = m.evaluate(
        Sample(id="q", input="q", retrieved_contexts=[{"id": "a"}], metadata={"relevance": {"a": 0}}), GEN, {}
    )
    assert s.status is Status.UNKNOWN
    # retrieval not recorded at all; an empty list is a retrieval that found nothing (scored 0, see below)
    [s] = m.evaluate(Sample(id="q", input="q", retrieved_contexts=None, gold_evidence=["a"]), GEN, {})
    assert s.status is Status.NOT_TESTED and "retrieved_contexts" in s.reason


RANKED = ("hit_rate_at_k", "precision_at_k", "recall_at_k", "mrr", "average_precision", "ndcg_at_k", "r_precision",
          "ndcg")


def test_an_empty_retrieval_with_gold_evidence_scores_zero_not_untested():
    for name in RANKED:
        m = _ours(name)
        [s] = m.evaluate(Sample(id="q", input="q", retrieved_contexts=[], gold_evidence=["a", "b"]), GEN, {})
        assert s.status is Status.SCORED and s.value == 0.0, (name, s)
        assert s.reason == "nothing was retrieved" and s.metadata == {"num_ret": 0, "num_rel": 2}
        [s] = m.evaluate(Sample(id="q", input="q", retrieved_contexts=[]), GEN, {})
        assert s.status is Status.UNKNOWN and "no gold evidence" in s.reason, name
        [s] = m.evaluate(Sample(id="q", input="q", gold_evidence=["a"]), GEN, {})
        assert s.status is Status.NOT_TESTED, name
    # in a batch an empty retrieval enters the mean as 0: a retriever that finds nothing does not look better
    from auditkit_ray.core.summary import Accumulator

    m = _ours("mrr")
    found_wrong = Sample(id="w", input="q", retrieved_contexts=[{"id": "x"}, {"id": "a"}], gold_evidence=["a"])
    found_nothing = Sample(id="n", input="q", retrieved_contexts=[], gold_evidence=["a"])
    acc = Accumulator([m]).add_all(s for out in m.evaluate_batch([(found_wrong, GEN, {}), (found_nothing, GEN, {})])
                                   for s in out)
    summary = acc.summaries()["mrr"]
    assert summary.n == 2 and summary.mean == 0.25 and summary.counts["not_tested"] == 0


def test_r_precision_and_ndcg_take_no_cut_off():
    from auditkit_ray import ConfigError

    for name in ("r_precision", "ndcg"):
        with pytest.raises(ConfigError, match="bad parameters"):
            build_metric(name, {"k": 5})
        assert build_metric(name).direction.value == "maximize"


def _edge_case_queries(rng: random.Random, n: int):
    """Queries of every shape trec_eval meets: empty runs, runs shorter than
    the cut-offs, long runs, graded (also negative) and unjudged documents,
    relevant documents never retrieved, ties, queries whose judgments hold no
    relevant document and queries with no judgments at all."""
    qrels, runs, kinds = {}, {}, {}
    for q in range(n):
        qid = f"q{q}"
        kind = rng.choice(["full", "full", "empty", "short", "no_relevant", "no_qrels"])
        pool = list(dict.fromkeys(f"d{rng.randint(0, 400)}" for _ in range(rng.randint(1, 45))))
        judged = rng.sample(pool, k=rng.randint(0, len(pool)))
        if kind == "no_relevant":
            qrel = {d: rng.choice([-1, 0]) for d in judged} or {pool[0]: 0}
        else:
            qrel = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3]) for d in judged}
            for j in range(rng.randint(0, 3)):  # relevant, never retrieved
                qrel[f"missed{q}-{j}"] = rng.choice([1, 2])
            if not any(r >= 1 for r in qrel.values()):
                qrel[f"gold{q}"] = 1
        if kind == "empty":
            docs = []
        elif kind == "short":
            docs = rng.sample(pool, k=min(len(pool), rng.randint(1, 4)))
        else:
            docs = rng.sample(pool, k=rng.randint(1, len(pool)))
        if rng.random() < 0.4:
            scores = [float(rng.randint(0, 5)) for _ in docs]  # many ties
        else:
            scores = [s / 997.0 for s in rng.sample(range(10**6), k=len(docs))]
        if kind != "no_qrels":
            qrels[qid] = qrel
        runs[qid], kinds[qid] = dict(zip(docs, scores)), kind
    return qrels, runs, kinds


def test_retrieval_metrics_equal_pytrec_eval_on_500_random_queries():
    qrels, runs, kinds = _edge_case_queries(random.Random(33), 500)
    counts = {k: list(kinds.values()).count(k) for k in set(kinds.values())}
    assert min(counts.values()) >= 50, counts  # every shape is really there
    assert sum(1 for qid, r in runs.items() if 0 < len(r) < max(CUTS) and kinds[qid] != "no_qrels") >= 100
    ref = pytrec_eval.RelevanceEvaluator(qrels, TREC_REQUEST).evaluate(runs)
    metrics = {key: _ours(*spec) for key, spec in MEASURES.items()}
    compared = unknown = 0
    for qid, run in runs.items():
        qrel = qrels.get(qid, {})
        sample = _sample(qid, run, qrel)
        for key, metric in metrics.items():
            [score] = metric.evaluate(sample, GEN, {})
            if not any(r >= 1 for r in qrel.values()):
                # documented: no relevant document -> unknown, where trec_eval gives 0 (or skips the query)
                assert score.status is Status.UNKNOWN and "no gold evidence" in score.reason, (qid, key, score)
                assert ref.get(qid, {}).get(key, 0.0) == 0.0
                unknown += 1
                continue
            assert score.status is Status.SCORED, (qid, key, score)
            assert score.value == pytest.approx(ref[qid][key], abs=1e-12), (qid, kinds[qid], key, score.value,
                                                                           ref[qid][key])
            if not run:
                assert score.value == 0.0
            compared += 1
    assert compared + unknown == 500 * len(MEASURES) and unknown == (counts["no_relevant"] + counts["no_qrels"]) * len(
        MEASURES)


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


def test_dataset_files_keep_an_empty_retrieval_apart_from_an_unrecorded_one(tmp_path):
    """JSONL `[]` vs `null` (and parquet's empty list vs null) reach the metrics as different cases."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from auditkit_ray.config.models import DatasetSpec
    from auditkit_ray.data import load_samples

    rows = [{"id": "empty", "q": "x", "retrieved_contexts": [], "gold_evidence": ["a"]},
            {"id": "unrecorded", "q": "x", "retrieved_contexts": None, "gold_evidence": ["a"]},
            {"id": "found", "q": "x", "retrieved_contexts": [{"id": "a"}], "gold_evidence": ["a"]}]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    for name in ("d.jsonl", "d.parquet"):
        samples, _ = load_samples(DatasetSpec(path=str(tmp_path / name), input_field="q"))
        got = {s.id: _ours("ndcg").evaluate(s, GEN, {})[0] for s in samples}
        assert (got["empty"].status, got["empty"].value) == (Status.SCORED, 0.0), name
        assert got["unrecorded"].status is Status.NOT_TESTED, name
        assert got["found"].value == 1.0, name
