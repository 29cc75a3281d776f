"""Parallel-call metrics, hand-computed: independent reference calls the
agent split across turns, dependent calls it batched too early, and cases
without a denominator (not_tested, never 0)."""

import pytest

from auditkit_ray import Generation, Sample, Status, ToolCall
from auditkit_ray.core.registry import build_metric


def T(name, **arguments):
    return ToolCall(name=name, arguments=arguments)


def parallel(ref, pred):
    out = build_metric("parallel_calls").evaluate(
        Sample(id="s", input="q", reference_tool_calls=ref), Generation(tool_calls=pred), {}
    )
    return {s.name.split(".")[-1]: s for s in out}


def test_split_independent_calls_lower_parallel_recall_and_detection_not_precision():
    # reference turn 0: a, b, c (independent); turn 1: d. Agent: [a, b], [c], [d].
    # independent matched pairs: ab, ac, bc = 3; kept together: ab -> recall 1/3
    # parallel reference turns (>= 2 matched calls): {a,b,c}; issued in one turn? no -> detection 0/1
    # agent-batched pairs: ab, whose reference calls share a turn -> precision 1/1
    got = parallel([[T("a"), T("b"), T("c")], [T("d")]], [[T("a"), T("b")], [T("c")], [T("d")]])
    assert got["recall"].value == pytest.approx(1 / 3)
    assert got["detection"].value == 0.0
    assert got["precision"].value == 1.0
    assert got["recall"].metadata["split_independent_pairs"] == 2


def test_batched_dependent_calls_lower_parallel_precision_not_recall():
    # reference: [a, b] then [c] (c depends on a turn-0 result). Agent: [a, b, c] in one turn.
    # agent-batched pairs: ab (ok), ac, bc (dependent) -> precision 1/3
    # independent pairs: ab, kept together -> recall 1/1; detection 1/1
    got = parallel([[T("a"), T("b")], [T("c")]], [[T("a"), T("b"), T("c")]])
    assert got["precision"].value == pytest.approx(1 / 3)
    assert got["precision"].metadata["batched_dependent_pairs"] == 2
    assert got["recall"].value == 1.0 and got["detection"].value == 1.0


def test_purely_sequential_episode_has_no_parallel_denominator_and_is_not_tested():
    got = parallel([[T("search")], [T("book")]], [[T("search")], [T("book")]])
    for k in ("recall", "precision", "detection"):
        assert got[k].status is Status.NOT_TESTED and got[k].value is None and got[k].reason


def test_missed_calls_do_not_enter_parallel_denominators():
    # reference [a, b]; the agent only made a: no matched independent pair -> not_tested, not 0
    got = parallel([[T("a"), T("b")]], [[T("a")]])
    assert got["recall"].status is Status.NOT_TESTED


def test_same_tool_parallel_calls_pair_by_arguments_first():
    # weather(Paris), weather(London) in one reference turn; the agent does London then Paris in two turns,
    # and a wrong-argument call in the same turn as London. Pairs: by arguments first.
    ref = [[T("w", city="Paris"), T("w", city="London")]]
    pred = [[T("w", city="London"), T("w", city="Rome")], [T("w", city="Paris")]]
    got = parallel(ref, pred)
    assert got["recall"].value == 0.0  # Paris/London split
    assert got["precision"].status is Status.NOT_TESTED  # London+Rome batched, but Rome pairs with nothing
