"""Deterministic RAG checks: evidence recall, freshness, access control,
citations, numbers, abstention; missing inputs are not_tested / unknown."""

import pytest

from auditkit_ray import Generation, Sample, Status
from auditkit_ray.core.registry import build_metric

SNAPSHOT = {
    "decision_date": "2024-03-01",
    "documents": {
        "pol-1": {"digest": "aaa", "version": 2, "superseded_at": None, "access_groups": ["hr"]},
        "pol-0": {"digest": "old", "version": 1, "superseded_at": "2024-01-15", "access_groups": ["hr"]},
        "memo": {"digest": "mmm", "version": 1, "superseded_at": "2024-06-01T00:00:00Z", "access_groups": ["finance"]},
        "faq": {"digest": "fff", "superseded_at": None, "access_groups": ["*"]},
        "secret": {"digest": "sss", "access_groups": []},
    },
}


def _sample(ctx_ids=("pol-1", "faq"), gold=("pol-1",), snapshot=SNAPSHOT, digests=None, **meta):
    ctxs = [{"id": d, **({"digest": digests[d]} if digests and d in digests else {})} for d in ctx_ids]
    return Sample(id="1", input="q", retrieved_contexts=ctxs or None, gold_evidence=list(gold) or None,
                  corpus_snapshot=snapshot, metadata=meta)


def _one(name, sample, text="", params=None):
    [s] = build_metric(name, params or {}).evaluate(sample, Generation(text=text), {})
    return s


def test_evidence_recall_is_the_retrieved_share_of_the_gold_set():
    s = _one("evidence_recall", _sample(("pol-1", "faq"), ("pol-1", "memo")))
    assert s.value == 0.5 and s.metadata["missing"] == ["memo"] and s.metadata["complete"] is False
    assert _one("evidence_recall", _sample(gold=())).status is Status.UNKNOWN
    assert _one("evidence_recall", _sample(ctx_ids=())).status is Status.NOT_TESTED


def test_freshness_and_stale_hit_rate_flag_superseded_and_digest_mismatched_documents():
    clean = _sample(("pol-1", "faq", "memo"))  # memo is superseded only after the decision date
    assert _one("freshness", clean).value == 1.0 and _one("stale_hit_rate", clean).value == 0.0
    s = _sample(("pol-1", "pol-0", "faq", "ghost"))
    f, r = _one("freshness", s), _one("stale_hit_rate", s)
    assert f.value == 0.0 and r.value == 0.5
    assert set(r.metadata["stale"]) == {"pol-0", "ghost"} and "superseded" in r.metadata["stale"]["pol-0"]
    assert "not in the corpus snapshot" in r.metadata["stale"]["ghost"]
    s = _sample(("pol-1", "faq"), digests={"pol-1": "zzz", "faq": "fff"})
    r = _one("stale_hit_rate", s)
    assert r.value == 0.5 and "digest" in r.metadata["stale"]["pol-1"]
    assert build_metric("stale_hit_rate").direction.value == "minimize"


def test_superseded_on_the_decision_date_itself_is_stale():
    snap = {"decision_date": "2024-01-15", "documents": SNAPSHOT["documents"]}
    assert _one("stale_hit_rate", _sample(("pol-0",), snapshot=snap)).value == 1.0
    snap = {"decision_date": "2024-01-14T23:59:59+00:00", "documents": SNAPSHOT["documents"]}
    assert _one("stale_hit_rate", _sample(("pol-0",), snapshot=snap)).value == 0.0


def test_freshness_missing_inputs_are_not_tested_or_unknown_and_bad_dates_are_errors():
    assert _one("freshness", _sample(snapshot=None)).status is Status.NOT_TESTED
    no_date = {"documents": SNAPSHOT["documents"]}
    s = _one("freshness", _sample(("pol-0",), snapshot=no_date))
    assert s.status is Status.UNKNOWN and "decision_date" in s.reason
    assert _one("freshness", _sample(("pol-0",), snapshot=no_date, decision_date="2024-03-01")).value == 0.0
    assert _one("freshness", _sample(("pol-1",), snapshot=no_date)).value == 1.0  # nothing superseded to date
    s = _one("freshness", _sample(snapshot={"decision_date": "last week", "documents": SNAPSHOT["documents"]},
                                  ctx_ids=("pol-0",)))
    assert s.status is Status.ERROR and "ISO 8601" in s.reason
    s = _one("freshness", _sample(snapshot={"documents": ["pol-1"]}))
    assert s.status is Status.ERROR and "corpus_snapshot.documents" in s.reason


def test_access_control_flags_documents_outside_the_users_groups_or_the_snapshot():
    ok = _sample(("pol-1", "faq"), user_groups=["hr"])
    assert _one("access_control_compliance", ok).value == 1.0 and _one("unauthorized_hit_rate", ok).value == 0.0
    s = _sample(("pol-1", "memo", "secret", "ghost"), user_groups=["hr"])
    c, r = _one("access_control_compliance", s), _one("unauthorized_hit_rate", s)
    assert c.value == 0.0 and r.value == 0.75 and set(r.metadata["violations"]) == {"memo", "secret", "ghost"}
    assert "finance" in c.reason
    # a user in no group may read public documents only
    assert _one("unauthorized_hit_rate", _sample(("faq", "pol-1"), user_groups=[])).value == 0.5
    s = _one("access_control_compliance", _sample())
    assert s.status is Status.NOT_TESTED and "user_groups" in s.reason
    s = _one("unauthorized_hit_rate", _sample(user_groups="hr"))
    assert s.status is Status.ERROR and "must be a list" in s.reason
    assert build_metric("unauthorized_hit_rate").direction.value == "minimize"


CTX = ("pol-1", "faq", "memo")


@pytest.mark.parametrize("text, validity", [
    ("Leave is 20 days [1].", 1.0),
    ("Leave is 20 days [1][2, 3].", 1.0),
    ("See [pol-1] and [faq].", 1.0),
    ("See [4] and [1].", 0.5),  # out of range
    ("See [pol-0].", 0.0),  # exists but was not retrieved
    ("See [nowhere].", 0.0),  # not in the corpus
    ("See [1-3].", 1.0),  # a range
    ("See [the docs](http://x) and [^2].", 1.0),  # a Markdown link is not a citation
])
def test_citation_validity(text, validity):
    s = _one("citation_validity", _sample(CTX), text)
    assert s.status is Status.SCORED and s.value == validity, s


def test_citation_validity_reasons_and_no_citation_is_unknown():
    s = _one("citation_validity", _sample(CTX), "[4] [pol-0] [nowhere]")
    assert "out of range" in s.reason and "not retrieved" in s.reason and "not a document in the corpus" in s.reason
    s = _one("citation_validity", _sample(CTX), "No citations at all.")
    assert s.status is Status.UNKNOWN and "cites nothing" in s.reason


def test_citation_precision_and_recall_against_gold_evidence():
    sample = _sample(CTX, gold=("pol-1", "memo", "pol-0"))
    text = "A [1]. B [2]. C [pol-1]. D [9]."  # [1] and [pol-1] are the same document
    p = _one("citation_precision", sample, text)
    assert p.value == pytest.approx(1 / 3)  # pol-1 right; faq and [9] wrong
    r = _one("citation_recall", sample, text)
    assert r.value == pytest.approx(1 / 3) and r.metadata["missing"] == ["memo", "pol-0"]
    r = _one("citation_recall", sample, text, {"only_retrieved_gold": True})
    assert r.value == 0.5  # pol-0 was never retrieved
    assert _one("citation_precision", _sample(CTX, gold=()), text).status is Status.UNKNOWN
    assert _one("citation_recall", sample, "no cites").value == 0.0


def test_citation_pattern_and_numeric_as_ids_are_configurable():
    sample = Sample(id="1", input="q", retrieved_contexts=[{"id": "7"}, {"id": "x"}], gold_evidence=["7"])
    assert _one("citation_validity", sample, "see [7]").value == 0.0  # position 7 is out of range
    assert _one("citation_validity", sample, "see [7]", {"numeric": "id"}).value == 1.0
    assert _one("citation_validity", sample, "see (source: x)", {"pattern": r"\(source: ([^)]+)\)"}).value == 1.0


def test_numeric_correctness_against_gold_numbers():
    sample = _sample(gold_numbers=[1250, "15%", 3.5])
    s = _one("numeric_correctness", sample, "Costs rose to $1,250 [1], up 0.15 in share, over 3.5 years [2].")
    assert s.value == 1.0
    s = _one("numeric_correctness", sample, "It was 1,200, up 15% [3.5].")  # [3.5] is a citation, not a claim
    assert (
        s.value == pytest.approx(1 / 3)
        and s.metadata["missing"] == ["1250", "3.5"]
        and "1,200" in s.metadata["unsupported"]
    )
    assert _one("numeric_correctness", sample, "1260", {"rel_tol": 0.01}).value == pytest.approx(1 / 3)
    assert _one("numeric_correctness", _sample()).status is Status.NOT_TESTED
    s = _one("numeric_correctness", _sample(gold_numbers=["n/a"]), "1")
    assert s.status is Status.ERROR and "gold_numbers[0]" in s.reason
    s = _one("numeric_correctness", _sample(gold_numbers=[float("nan")]), "1")
    assert s.status is Status.ERROR and "finite" in s.reason


REFUSALS = [
    "I don't know.", "I do not know the answer.", "I'm not sure about that.", "I cannot answer this question.",
    "I can\u2019t determine that from the documents.", "There is not enough information to answer.",
    "The provided context does not mention the deadline.", "The documents don't say.",
    "Insufficient evidence to answer.", "This is not mentioned in the sources.", "I must decline.",
    "No information about that is available in the context.", "The question is unanswerable.",
]
ANSWERS = [
    "The leave is 20 days.",
    "Yes, the policy applies to contractors.",
    "The policy does not contain any exemption; it is 20 days.",
    "Known issue: see doc 3.",
    "It can be found in section 2.",
    "I know: it is 5.",
    "",
]


def test_default_refusal_detector_catches_declines_and_spares_answers():
    m = build_metric("abstention")
    assert all(m.refused(t) for t in REFUSALS), [t for t in REFUSALS if not m.refused(t)]
    assert not any(m.refused(t) for t in ANSWERS), [t for t in ANSWERS if m.refused(t)]


def test_abstention_rewards_declining_exactly_when_evidence_is_insufficient():
    def run(text, **kw):
        return _one("abstention", kw.pop("sample", None) or _sample(**kw), text)

    assert run("It is 20 days.", answerable=True).value == 1.0
    s = run("I don't know.", answerable=True)
    assert s.value == 0.0 and s.metadata["outcome"] == "false_refusal"
    assert run("I don't know.", answerable=False).metadata["outcome"] == "correct_refusal"
    s = run("It is 20 days.", answerable=False)
    assert s.value == 0.0 and s.reason == "missed_refusal"
    # derived from the evidence when answerable is not given
    assert run("I don't know.", ctx_ids=("faq",), gold=("pol-1",)).value == 1.0
    assert run("It is 20 days.", ctx_ids=("pol-1",), gold=("pol-1",)).value == 1.0
    s = run("x", sample=Sample(id="1", input="q"))
    assert s.status is Status.UNKNOWN and "answerable" in s.reason
    s = run("x", answerable="yes")
    assert s.status is Status.ERROR and "true or false" in s.reason
    m = build_metric("abstention", {"refusal_pattern": r"^N/A$"})
    [s] = m.evaluate(_sample(answerable=False), Generation(text="N/A"), {})
    assert s.value == 1.0


def test_every_rag_check_gives_not_tested_when_nothing_was_retrieved():
    for name in ("evidence_recall", "freshness", "stale_hit_rate", "access_control_compliance",
                 "unauthorized_hit_rate", "citation_validity", "citation_precision", "citation_recall"):
        s = _one(name, _sample(ctx_ids=(), user_groups=["hr"]), "[1]")
        assert s.status is Status.NOT_TESTED and "retrieved_contexts" in s.reason, name
