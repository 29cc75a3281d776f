"""Trajectory diagnostics: order, argument correctness, redundancy, loops,
schema validity, permissions, irrelevance; missing evidence is unknown."""

import pytest

from auditkit_ray import Direction, Generation, Sample, Status, ToolCall
from auditkit_ray.agents.trace import read_jsonl_traces
from auditkit_ray.core.registry import build_metric, resolve_metric
from auditkit_ray.core.summary import Accumulator


def T(name, **arguments):
    return ToolCall(name=name, arguments=arguments)


def run(name, sample, gen, **params):
    return {s.name: s for s in build_metric(name, params).evaluate(sample, gen, {})}


REF = [[T("search", q="x")], [T("pick", i=1), T("log")], [T("book", id="A")]]


@pytest.mark.parametrize("pred, subseq, strict, pairwise", [
    # same structure: everything in order
    ([[T("search", q="x")], [T("log"), T("pick", i=1)], [T("book", id="A")]], 1.0, 1.0, 1.0),
    # extra call at the start, parallel pair split: still an in-order subsequence, not strict
    # pairs across reference turns: search<pick, search<log, search<book, pick<book, log<book = 5, all kept
    ([[T("help")], [T("search", q="x")], [T("pick", i=1)], [T("log")], [T("book", id="A")]], 1.0, 0.0, 1.0),
    # book before pick/log: search<pick ok, search<log ok, search<book ok, pick<book no, log<book no -> 3/5
    ([[T("search", q="x")], [T("book", id="A")], [T("pick", i=1), T("log")]], 0.0, 0.0, 0.6),
    # everything batched: no pair is strictly ordered -> 0/5
    ([[T("search", q="x"), T("pick", i=1), T("log"), T("book", id="A")]], 0.0, 0.0, 0.0),
])
def test_tool_chain_order_subsequence_strict_and_pairwise(pred, subseq, strict, pairwise):
    got = run("tool_chain_order", Sample(id="s", input="q", reference_tool_calls=REF), Generation(tool_calls=pred))
    assert got["tool_chain_order.subsequence"].value == subseq
    assert got["tool_chain_order.strict"].value == strict
    assert got["tool_chain_order.pairwise"].value == pytest.approx(pairwise)


def test_subsequence_uses_the_optimal_placement_not_the_first_one():
    # reference a then b; agent: [a, b] then [b]. The first b cannot serve (same turn as a), the second can.
    got = run("tool_chain_order", Sample(id="s", input="q", reference_tool_calls=[[T("a")], [T("b")]]),
              Generation(tool_calls=[[T("a"), T("b")], [T("b")]]))
    assert got["tool_chain_order.subsequence"].value == 1.0


def test_argument_correctness_among_name_matched_calls():
    # reference: get(city=Paris), get(city=London), time(tz=CET); agent: get(London), get(Rome), other()
    # name-matched pairs (maximum, argument-correct pairs first): London-London (right), Paris-Rome (wrong) -> 1/2
    s = Sample(
        id="s", input="q", reference_tool_calls=[[T("get", city="Paris"), T("get", city="London"), T("time", tz="CET")]]
    )
    got = run(
        "argument_correctness", s, Generation(tool_calls=[[T("get", city="London"), T("get", city="Rome"), T("other")]])
    )
    assert got["argument_correctness"].value == 0.5
    got = run("argument_correctness", s, Generation(tool_calls=[[T("other")]]))
    assert got["argument_correctness"].status is Status.NOT_TESTED


def test_redundancy_ratio_and_loop_frequency_are_minimized_and_hand_computed():
    assert resolve_metric("redundancy_ratio").direction is Direction.MINIMIZE
    assert resolve_metric("loop_frequency").direction is Direction.MINIMIZE
    s = Sample(id="s", input="q")
    # calls: a(1), a(1.0), b | a(1) | c -> 5 calls, 2 repeat an earlier identical call -> 0.4
    g = Generation(tool_calls=[[T("a", x=1), T("a", x=1.0), T("b")], [T("a", x=1)], [T("c")]])
    assert run("redundancy_ratio", s, g)["redundancy_ratio"].value == pytest.approx(0.4)
    # turns: [a], [a], [a], [b], [a] -> transitions 4; a turn equal to the one before: 2 -> 0.5
    g = Generation(tool_calls=[[T("a")], [T("a")], [T("a")], [T("b")], [T("a")]])
    assert run("loop_frequency", s, g)["loop_frequency"].value == 0.5
    # window 2 also catches the a, b, a return: 3/4
    assert run("loop_frequency", s, g, window=2)["loop_frequency"].value == 0.75
    assert run("loop_frequency", s, Generation(tool_calls=[[T("a")]]))["loop_frequency"].status is Status.NOT_TESTED
    assert run("redundancy_ratio", s, Generation(tool_calls=[]))["redundancy_ratio"].status is Status.NOT_TESTED


def test_tool_call_validity_against_json_schema():
    tools = [{"type": "function", "function": {"name": "book", "parameters": {
        "type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
        "required": ["id"], "additionalProperties": False}}}]
    s = Sample(id="s", input="q", tools=tools)
    g = Generation(tool_calls=[[T("book", id="A", n=2), T("book", n=0), T("book", id="B", n=True), T("fly")]])
    got = run("tool_call_validity", s, g)["tool_call_validity"]
    assert got.value == 0.25
    errors = " | ".join(got.metadata["errors"])
    assert (
        "'id' is a required property" in errors
        and "unknown tool 'fly'" in errors
        and "True is not of type 'integer'" in errors
    )
    assert run("tool_call_validity", Sample(id="s", input="q"), g)["tool_call_validity"].status is Status.NOT_TESTED


def test_permission_violations_from_the_allow_list_param_or_sample_metadata():
    g = Generation(tool_calls=[[T("get_balance")], [T("delete_account"), T("transfer")]])
    got = run(
        "permission_violations", Sample(id="s", input="q", metadata={"allowed_tools": ["get_balance", "transfer"]}), g
    )
    assert got["permission_violations.any"].value == 1.0
    assert got["permission_violations.rate"].value == pytest.approx(1 / 3)
    assert got["permission_violations.any"].metadata["violations"] == ["delete_account@1"]
    got = run(
        "permission_violations",
        Sample(id="s", input="q"),
        g,
        allowed_tools=["get_balance", "transfer", "delete_account"],
    )
    assert got["permission_violations.any"].value == 0.0
    nts = build_metric("permission_violations").evaluate(Sample(id="s", input="q"), g, {})
    assert [s.status for s in nts] == [Status.NOT_TESTED] * 2
    assert resolve_metric("permission_violations").direction is Direction.MINIMIZE


def test_irrelevance_scores_only_irrelevant_requests():
    irr = Sample(id="s", input="joke", metadata={"irrelevant": True})
    assert run("irrelevance", irr, Generation(text="Why did...", tool_calls=[]))["irrelevance"].value == 1.0
    assert run("irrelevance", irr, Generation(tool_calls=[[T("get_weather")]]))["irrelevance"].value == 0.0
    assert run("irrelevance", irr, Generation(text="no trace"))["irrelevance"].status is Status.UNKNOWN
    assert (
        run("irrelevance", Sample(id="s", input="q"), Generation(tool_calls=[]))["irrelevance"].status
        is Status.NOT_TESTED
    )


def test_trace_with_missing_tool_arguments_is_unknown_and_counted_unscored_in_the_summary():
    traces = read_jsonl_traces([
        '{"episode": "ok", "turn": 0, "type": "tool_call", "name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"episode": "ok", "type": "final", "output": "18"}',
        '{"episode": "gap", "turn": 0, "type": "tool_call", "name": "get_weather"}',
        '{"episode": "gap", "type": "final", "output": "18"}',
    ])
    sample = Sample(id="s", input="q", reference_tool_calls=[[T("get_weather", city="Paris")]])
    metrics = [build_metric("tool_call_match"), build_metric("argument_correctness"), build_metric("redundancy_ratio"),
               build_metric("tool_call_match", {"arguments": "name"}, as_name="tool_names")]
    acc = Accumulator(metrics)
    for ep in traces.values():
        for m in metrics:
            acc.add_all(m.evaluate(sample, ep.to_generation(), {}))
    summ = acc.summaries()
    for name in ("tool_call_match.f1", "tool_call_match.exact_set", "argument_correctness", "redundancy_ratio"):
        assert summ[name].counts["unknown"] == 1, name
        assert summ[name].n == 1 and summ[name].unscored == 1, name
    assert summ["tool_call_match.f1"].mean == 1.0  # the unknown one is not a zero
    # matching on names does not need the arguments: both scored
    assert summ["tool_names.exact_set"].n == 2 and summ["tool_names.exact_set"].counts["unknown"] == 0
