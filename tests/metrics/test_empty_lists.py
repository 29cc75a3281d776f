"""Every row of docs/metrics-notes.md's "Empty lists" table, checked against
the metrics: the documented result is what the metric gives, and every case
the test knows is documented."""

import re
from pathlib import Path

import pytest

from auditkit_ray import Generation, Sample, Status, ToolCall
from auditkit_ray.core.registry import build_metric

NOTES = Path(__file__).resolve().parents[2] / "docs" / "metrics-notes.md"
RANKED = ("hit_rate_at_k", "precision_at_k", "recall_at_k", "mrr", "average_precision", "ndcg_at_k", "r_precision",
          "ndcg")
SNAPSHOT = {"decision_date": "2024-03-01", "documents": {
    "pub": {"digest": "p", "access_groups": ["*"]},
    "hr-doc": {"digest": "h", "access_groups": ["hr"]},
}}
CALL = ToolCall(name="get_weather", arguments={"city": "Paris"})
TOOLS_NONE: list = []


def _s(**kw):
    return Sample(id="s", input="q", **kw)


# case text in the table -> (sample, generation)
CASES = {
    "`retrieved_contexts: []`, gold evidence": (_s(retrieved_contexts=[], gold_evidence=["pub"]), Generation()),
    "`retrieved_contexts: []`, no gold evidence": (_s(retrieved_contexts=[]), Generation()),
    "`retrieved_contexts` missing or null, gold evidence": (_s(gold_evidence=["pub"]), Generation(text="[1]")),
    "`retrieved_contexts: []`, `gold_evidence: []`": (_s(retrieved_contexts=[], gold_evidence=[]), Generation()),
    "`retrieved_contexts: []`, a snapshot, `user_groups`": (
        _s(retrieved_contexts=[], corpus_snapshot=SNAPSHOT, metadata={"user_groups": ["hr"]}), Generation()),
    "`user_groups: []`, a public and a restricted document retrieved": (
        _s(retrieved_contexts=[{"id": "pub"}, {"id": "hr-doc"}], corpus_snapshot=SNAPSHOT,
           metadata={"user_groups": []}), Generation()),
    "`retrieved_contexts: []`, gold evidence, the output cites `[1]`": (
        _s(retrieved_contexts=[], gold_evidence=["pub"]), Generation(text="It is so [1].")),
    "`retrieved_contexts: []`, gold evidence, the output cites nothing": (
        _s(retrieved_contexts=[], gold_evidence=["pub"]), Generation(text="It is so.")),
    "`retrieved_contexts: []`, gold evidence, the output refuses": (
        _s(retrieved_contexts=[], gold_evidence=["pub"]), Generation(text="I don't know.")),
    "`retrieved_contexts: []`, gold evidence, the output answers": (
        _s(retrieved_contexts=[], gold_evidence=["pub"]), Generation(text="It is 42.")),
    "`retrieved_contexts: []`, `gold_evidence: []`, the output answers": (
        _s(retrieved_contexts=[], gold_evidence=[]), Generation(text="It is 42.")),
    "`metadata.gold_numbers: []`": (_s(metadata={"gold_numbers": []}), Generation(text="42")),
    "`tool_calls: []`, a reference with calls": (
        _s(reference_tool_calls=[[CALL]], metadata={"allowed_tools": ["get_weather"]}), Generation(tool_calls=[])),
    "`tool_calls: []`, `reference_tool_calls: []`": (_s(reference_tool_calls=[]), Generation(tool_calls=[])),
    "`tool_calls: []`, `metadata.irrelevant: true`": (_s(metadata={"irrelevant": True}), Generation(tool_calls=[])),
    "`tool_calls: []`, `tools: []`": (_s(tools=TOOLS_NONE), Generation(tool_calls=[])),
    "a call, `tools: []`": (_s(tools=TOOLS_NONE), Generation(tool_calls=[[CALL]])),
    "`tool_calls` null (no trace), a reference with calls": (_s(reference_tool_calls=[[CALL]]), Generation(text="ok")),
    "`tool_calls: []`, `reference_tool_calls` null": (_s(), Generation(tool_calls=[])),
    "`target: []`": (_s(target=[]), Generation(text="x")),
    "`target: [\"\"]`, empty output": (_s(target=[""]), Generation(text="")),
}
# metric text in the table -> (registry name, params, score name)
SPECIAL = {
    "`citation_recall` with `only_retrieved_gold`": [("citation_recall", {"only_retrieved_gold": True},
                                                       "citation_recall")],
    "`exact_match` with `preset: squad`": [("exact_match", {"preset": "squad"}, "exact_match")],
    "every ranked retrieval metric": [(n, {}, n) for n in RANKED],
}


def _metrics(cell: str):
    out = []
    for part in re.split(r",\s*(?![^`]*`\s*with)", cell):
        part = part.strip()
        if part in SPECIAL:
            out += SPECIAL[part]
            continue
        name = part.strip("`")
        base = name.split(".")[0]
        out.append((base, {}, name))
    return out


def _rows():
    text = NOTES.read_text(encoding="utf-8")
    section = text.split("## Empty lists", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("family", "---"):
            continue
        rows.append(tuple(cells))
    return rows


ROWS = _rows()


def test_the_table_documents_every_case_and_each_case_is_known():
    assert len(ROWS) >= 25
    used = {r[2] for r in ROWS}
    assert used <= set(CASES), f"cases in the docs that the test does not build: {sorted(used - set(CASES))}"
    assert set(CASES) <= used, f"cases the test builds that the docs do not list: {sorted(set(CASES) - used)}"
    families = {r[0] for r in ROWS}
    assert {"retrieval", "rag", "agent", "generation"} <= families


@pytest.mark.parametrize("family, metrics, case, result, why", ROWS, ids=[f"{r[1]} | {r[2]}" for r in ROWS])
def test_empty_list_case_gives_the_documented_result(family, metrics, case, result, why):
    sample, gen = CASES[case]
    for name, params, score_name in _metrics(metrics):
        scores = {s.name: s for s in build_metric(name, params).evaluate(sample, gen, {})}
        s = scores[score_name]
        if result in ("not_tested", "unknown"):
            assert s.status is Status(result) and s.reason, (score_name, s)
        else:
            assert s.status is Status.SCORED and s.value == float(result), (score_name, s)


def test_metrics_sharing_one_absence_cache_still_tell_empty_from_absent():
    """The scoring stage works out each required field's absence once per shard for all metrics;
    a metric for which an empty list is evidence and one for which it is absent must not share the answer."""
    from auditkit_ray.metrics.rag import EvidenceRecall

    class CountsContexts(EvidenceRecall, abstract=True):
        empty_is_evidence = ()

    class Strict(CountsContexts):
        name = "strict_recall"
        direction = EvidenceRecall.direction

    items = [(_s(retrieved_contexts=[], gold_evidence=["a"]), Generation(), {}),
             (_s(gold_evidence=["a"]), Generation(), {})]
    absent: dict = {}
    for first, second in ((Strict(), EvidenceRecall()), (EvidenceRecall(), Strict())):
        absent.clear()
        out = {m.name: [s[0] for s in m.evaluate_batch(items, absent=absent)] for m in (first, second)}
        assert [s.status for s in out["strict_recall"]] == [Status.NOT_TESTED, Status.NOT_TESTED]
        assert [(s.status, s.value) for s in out["evidence_recall"]] == [(Status.SCORED, 0.0),
                                                                        (Status.NOT_TESTED, None)]
    # the per-sample path (used by group metrics) follows the same rule
    assert EvidenceRecall().missing_requirements(*items[0]) == []
    assert Strict().missing_requirements(*items[0]) == ["retrieved_contexts"]
