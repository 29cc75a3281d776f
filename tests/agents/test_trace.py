import json

import pytest

from auditkit_ray import DataError, Generation, Sample, ToolCall
from auditkit_ray.agents.trace import (
    Episode,
    from_openai_messages,
    generation_trace,
    parse_turns,
    read_jsonl_traces,
    reference_routes,
    write_jsonl_trace,
)
from auditkit_ray.core.metric import MissingEvidence

MESSAGES = [
    {"role": "user", "content": "Weather in Paris and London, then book?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"London\"}"}},
    ]},
    {"role": "tool", "tool_call_id": "c2", "content": "{\"temp\": 14}"},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 18}"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c3", "type": "function", "function": {"name": "book", "arguments": "{not json"}},
        {"id": "c4", "type": "function", "function": {"name": "notify"}},
    ]},
    {"role": "tool", "tool_call_id": "c3", "content": "error"},
    {"role": "assistant", "content": "Paris 18, London 14."},
]


def test_openai_messages_become_turns_with_parallel_calls_and_results_by_id():
    ep = from_openai_messages(MESSAGES)
    assert [[c.name for c in t.calls] for t in ep.turns] == [["get_weather", "get_weather"], ["book", "notify"], []]
    assert ep.turns[0].calls[0].arguments == {"city": "Paris"}
    assert [(r.call_id, r.name, r.content) for r in ep.turns[0].results] == [
        ("c2", "get_weather", {"temp": 14}), ("c1", "get_weather", {"temp": 18})]
    assert ep.turns[1].malformed == {0: "{not json"} and ep.turns[1].incomplete == [1]
    assert ep.output == "Paris 18, London 14."


def test_episode_to_generation_and_back_keeps_turns_and_flags_incomplete_and_malformed_calls():
    g = from_openai_messages(MESSAGES).to_generation()
    assert [[c.name for c in t] for t in g.tool_calls] == [["get_weather", "get_weather"], ["book", "notify"]]
    assert g.metadata["incomplete_calls"] == [[1, 1]] and g.metadata["malformed_calls"] == [[1, 0, "{not json"]]
    tr = generation_trace(g)
    assert tr.incomplete == {(1, 1)} and tr.malformed == {(1, 0): "{not json"}
    with pytest.raises(MissingEvidence, match="notify"):
        tr.require_arguments()
    back = Episode.from_generation(g)
    assert back.turns[1].incomplete == [1] and back.output == g.text
    msgs = back.to_openai_messages()
    assert json.loads(msgs[0]["tool_calls"][1]["function"]["arguments"]) == {"city": "London"}


def test_no_trace_is_missing_evidence_but_no_calls_is_an_empty_trace():
    with pytest.raises(MissingEvidence):
        generation_trace(Generation(text="hi"))
    assert generation_trace(Generation(text="hi", tool_calls=[])).n_calls == 0
    # a generation that kept only its message list is read from it
    assert generation_trace(Generation(metadata={"messages": MESSAGES})).n_calls == 4


def test_jsonl_trace_round_trip_with_interleaved_episodes_and_missing_arguments(tmp_path):
    lines = [
        {
            "episode": "e1",
            "turn": 0,
            "type": "tool_call",
            "id": "a",
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        },
        {"episode": "e2", "turn": 0, "type": "tool_call", "id": "x", "name": "get_time"},
        {"episode": "e1", "turn": 0, "type": "tool_call", "id": "b", "name": "get_time", "arguments": '{"tz": "CET"}'},
        {"episode": "e1", "turn": 0, "type": "tool_result", "id": "a", "content": {"temp": 18}},
        {"episode": "e1", "turn": 1, "type": "message", "role": "assistant", "content": "18 C"},
        {"episode": "e1", "type": "final", "final_state": {"n": 1}, "judge_verdict": "complete"},
    ]
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    eps = read_jsonl_traces(p)
    assert list(eps) == ["e1", "e2"]
    e1 = eps["e1"]
    assert [[c.name for c in t.calls] for t in e1.turns] == [["get_weather", "get_time"], []]
    assert e1.turns[0].calls[1].arguments == {"tz": "CET"} and e1.turns[0].results[0].name == "get_weather"
    assert e1.output == "18 C" and e1.final_state == {"n": 1} and e1.judge_verdict == "complete"
    assert eps["e2"].turns[0].incomplete == [0] and eps["e2"].output is None
    again = read_jsonl_traces(write_jsonl_trace(e1))["e1"]
    assert again.model_dump() == e1.model_dump()
    g2 = eps["e2"].to_generation()
    assert g2.metadata["incomplete_calls"] == [[0, 0]] and g2.metadata["output_missing"] is True


def test_jsonl_trace_errors_name_the_line(tmp_path):
    with pytest.raises(DataError, match="<lines>:1: 'turn'"):
        read_jsonl_traces(['{"episode": "e", "type": "tool_call", "name": "f"}'])
    with pytest.raises(DataError, match="unknown line type"):
        read_jsonl_traces(['{"episode": "e", "turn": 0, "type": "call"}'])


def test_reference_routes_reference_tool_calls_first_then_any_of_routes_without_duplicates():
    a = [[{"name": "transfer", "arguments": {"amount": 50}}]]
    b = [[{"name": "balance", "arguments": {}}], [{"name": "transfer", "arguments": {"amount": 50.0}}]]
    s = Sample(
        id="s", input="q", reference_tool_calls=parse_turns(a), metadata={"reference_routes": {"any_of": [a, b]}}
    )
    routes = reference_routes(s)
    assert [[[c.name for c in t] for t in r] for r in routes] == [[["transfer"]], [["balance"], ["transfer"]]]
    # the generic reader leaves the reference in metadata: still found
    s2 = Sample(id="s", input="q", metadata={"reference_tool_calls": a})
    assert reference_routes(s2)[0][0][0] == ToolCall(name="transfer", arguments={"amount": 50})
    assert reference_routes(Sample(id="s", input="q")) is None


def test_reference_must_be_grouped_by_turn():
    with pytest.raises(DataError, match="group reference calls by turn"):
        parse_turns([{"name": "f", "arguments": {}}])
    # BFCL-style {"tool": {args}} and OpenAI-style calls are read too
    turns = parse_turns([[{"f": {"x": [1]}}, {"id": "1", "function": {"name": "g", "arguments": "{\"y\": 2}"}}]])
    assert [(c.name, c.arguments) for c in turns[0]] == [("f", {"x": [1]}), ("g", {"y": 2})]
