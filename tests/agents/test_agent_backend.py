"""The agent backend drives a scripted agent over real HTTP (127.0.0.1) and
as a Python callable, and records the episode into Generations that the
agent metrics and oracles score."""

import json

import pytest

from auditkit_ray import Status
from auditkit_ray.agents.dataset import agent_request_metadata, load_tool_samples
from auditkit_ray.backends.agent import AgentBackend, AgentSettings
from auditkit_ray.backends.base import Request
from auditkit_ray.core.fingerprint import canonical_json
from auditkit_ray.core.registry import build_metric
from auditkit_ray.core.secrets import redact
from auditkit_ray.core.summary import Accumulator


@pytest.fixture
def samples(agents_examples):
    return {s.id: s for s in load_tool_samples(agents_examples / "tools.jsonl")}


@pytest.fixture
def server(scripted):
    srv = scripted.serve(token="t0ken-abc")
    yield srv
    srv.shutdown()
    srv.server_close()


def requests_for(samples, ids, behaviour=None):
    out = []
    for sid in ids:
        meta = agent_request_metadata(samples[sid])
        if behaviour:
            meta["behaviour"] = behaviour
        out.append(Request(sample_id=sid, prompt=samples[sid].input, metadata=meta))
    return out


def http_backend(server, **kw):
    spec = AgentSettings(
        type="agent", url=server.url, headers={"Authorization": "Bearer t0ken-abc", "X-Client": "tests"}, **kw
    )
    return AgentBackend(spec, None, 0)


def test_http_agent_episode_is_recorded_by_turn_with_final_state_and_scores_perfectly(samples, server):
    ids = list(samples)
    gens = http_backend(server).generate(requests_for(samples, ids))
    assert server.seen_headers[0]["Authorization"] == "Bearer t0ken-abc"
    by_id = dict(zip(ids, gens))
    flight = by_id["sequential-flight"]
    assert flight.error is None and flight.finish_reason == "stop" and flight.latency_scope == "request"
    assert [[c.name for c in t] for t in flight.tool_calls] == [["search_flights"], ["book_flight"]]
    assert flight.metadata["final_state"] == {"bookings": [{"flight_id": "UA100", "passengers": 2}]}
    assert flight.metadata["tool_results"][1][0]["content"] == {"confirmation": "CONF-UA100"}
    assert flight.text == "Booked UA100 for 2 passengers" and flight.prompt_tokens == 30
    assert (
        by_id["parallel-weather"].tool_calls == [[*by_id["parallel-weather"].tool_calls[0]]]
        and len(by_id["parallel-weather"].tool_calls[0]) == 2
    )
    assert by_id["irrelevant-joke"].tool_calls == []
    metrics = [build_metric(n) for n in ("tool_call_match", "parallel_calls", "agent_outcome", "tool_call_validity",
                                         "irrelevance", "permission_violations")]
    acc = Accumulator(metrics)
    for sid, g in by_id.items():
        for m in metrics:
            acc.add_all(m.evaluate(samples[sid], g, {}))
    summ = acc.summaries()
    assert summ["tool_call_match.exact_set"].mean == 1.0 and summ["tool_call_match.exact_set"].n == len(ids)
    assert summ["tool_call_validity"].mean == 1.0
    assert summ["irrelevance"].mean == 1.0 and summ["irrelevance"].n == 1
    assert summ["parallel_calls.recall"].mean == 1.0 and summ["parallel_calls.recall"].n == 2
    # state where there is one, else the answer; the irrelevance case has neither: unknown
    assert summ["agent_outcome"].n == len(ids) - 1 and summ["agent_outcome"].mean == 1.0
    assert summ["agent_outcome"].counts["unknown"] == 1
    assert summ["permission_violations.any"].mean == 0.0 and summ["permission_violations.any"].n == 1


def test_callable_agent_split_and_batched_behaviours_show_in_parallel_metrics(samples, agents_examples):
    b = AgentBackend(AgentSettings(type="agent", callable="scripted_agent:step"), None, 0)
    m = build_metric("parallel_calls")
    [split] = b.generate(requests_for(samples, ["parallel-weather"], "split"))
    assert [len(t) for t in split.tool_calls] == [1, 1]
    got = {s.name: s for s in m.evaluate(samples["parallel-weather"], split, {})}
    assert got["parallel_calls.recall"].value == 0.0
    [batched] = b.generate(requests_for(samples, ["sequential-flight"], "batch"))
    assert [len(t) for t in batched.tool_calls] == [2]
    got = {s.name: s for s in m.evaluate(samples["sequential-flight"], batched, {})}
    assert got["parallel_calls.precision"].value == 0.0


def test_wrong_state_episode_fails_the_headline_and_missing_arguments_are_unknown(samples, agents_examples):
    b = AgentBackend(AgentSettings(type="agent", callable="scripted_agent:step"), None, 0)
    [double] = b.generate(requests_for(samples, ["state-transfer"], "double"))
    assert double.metadata["final_state"] == {"accounts": {"checking": 0, "savings": 200}}
    head = build_metric("agent_outcome").evaluate(samples["state-transfer"], double, {})[0]
    assert head.value == 0.0 and head.metadata["headline_source"] == "state"
    [gap] = b.generate(requests_for(samples, ["state-transfer"], "missing_args"))
    assert gap.metadata["incomplete_calls"] == [[0, 0]]
    got = {s.name: s.status for s in build_metric("tool_call_match").evaluate(samples["state-transfer"], gap, {})}
    assert set(got.values()) == {Status.UNKNOWN}


def test_turn_limit_stops_a_looping_agent(samples, server):
    [g] = http_backend(server, max_turns=3).generate(requests_for(samples, ["simple-weather"], "never_stop"))
    assert g.finish_reason == "max_turns" and len(g.tool_calls) == 3 and g.metadata["steps"] == 3
    # the transcript is complete: running out of turns is no answer (a failure), not missing evidence
    assert g.text == "" and "output_missing" not in g.metadata
    assert build_metric("answer_check").evaluate(samples["simple-weather"], g, {})[0].value == 0.0
    lf = build_metric("loop_frequency").evaluate(samples["simple-weather"], g, {})[0]
    assert lf.value == 1.0


def test_retries_on_503_then_succeeds_and_auth_failure_is_a_row_error_without_the_secret(samples, scripted):
    srv = scripted.serve(token="t0ken-abc", fail_first=2)
    try:
        [g] = http_backend(srv).generate(requests_for(samples, ["simple-weather"]))
        assert g.error is None and srv.requests >= 3
        bad = AgentBackend(
            AgentSettings(type="agent", url=srv.url, headers={"Authorization": "Bearer wr0ng-secret"}), None, 0
        )
        [e] = bad.generate(requests_for(samples, ["simple-weather"]))
        assert e.error and "HTTP 401" in e.error and "wr0ng-secret" not in e.error and e.finish_reason == "error"
    finally:
        srv.shutdown()
        srv.server_close()


def test_unreachable_agent_is_a_row_error(samples):
    spec = AgentSettings(type="agent", url="http://127.0.0.1:9/agent", max_retries=0, timeout_s=2)
    [g] = AgentBackend(spec, None, 0).generate(requests_for(samples, ["simple-weather"]))
    assert g.error and "cannot reach" in g.error


def test_spec_validation_and_secret_headers_stay_out_of_identity_and_display():
    spec = AgentSettings(
        type="agent", url="http://127.0.0.1:1/a", headers={"Authorization": "Bearer s3cr3t-v", "X-Model": "m1"}
    )
    ident = canonical_json(spec.settings_identity())
    assert "s3cr3t" not in ident and "m1" in ident
    assert "s3cr3t" not in repr(spec)
    assert "s3cr3t" not in json.dumps(redact(spec.model_dump(mode="json")))
    with pytest.raises(ValueError, match="exactly one"):
        AgentSettings(type="agent")
    with pytest.raises(ValueError, match="exactly one"):
        AgentSettings(type="agent", url="http://x", callable="m:f")
    with pytest.raises(ValueError, match="http"):
        AgentSettings(type="agent", url="ftp://x")
    with pytest.raises(ValueError):
        AgentSettings(type="agent", url="http://x", max_turns=0)
    with pytest.raises(ValueError):
        AgentSettings(type="agent", url="http://x", bogus=1)


def test_concurrent_episodes_keep_request_order(samples, server):
    ids = list(samples) * 2
    gens = http_backend(server, concurrency=4).generate(requests_for(samples, ids))
    assert [g.text for g in gens[: len(samples)]] == [g.text for g in gens[len(samples):]]
    assert gens[0].text == "18 degrees celsius in Paris"
