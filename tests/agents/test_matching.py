"""Tool-call matching: maximum bipartite matching, with hand-computed
expectations where greedy first fit goes wrong."""

import pytest

from auditkit_ray import ConfigError, Generation, Sample, Status, ToolCall
from auditkit_ray.agents.matching import CallMatcher, best_route, greedy_first_fit, match_calls
from auditkit_ray.core.registry import build_metric


def T(name, **arguments):
    return ToolCall(name=name, arguments=arguments)


def scores(metric, sample, gen):
    return {s.name: s for s in metric.evaluate(sample, gen, {})}


def test_subset_mode_two_calls_to_one_tool_greedy_pairs_wrong_bipartite_pairs_both():
    # reference r1 = search(q=a), r2 = search(q=a, lang=en); agent p1 = search(q=a, lang=en), p2 = search(q=a, lang=fr)
    # subset: r1 fits p1 and p2; r2 fits only p1. Greedy first fit gives r1-p1 and leaves r2 alone (1 pair);
    # the maximum matching is r1-p2, r2-p1 (2 pairs): precision = recall = F1 = 2/2 = 1, exact set 1.
    ref = [[T("search", q="a"), T("search", q="a", lang="en")]]
    pred = [[T("search", q="a", lang="en"), T("search", q="a", lang="fr")]]
    assert greedy_first_fit(ref, pred, CallMatcher("subset")) == 1
    m = match_calls(ref, pred, CallMatcher("subset"))
    assert sorted(m.pairs) == [(0, 1), (1, 0)]
    got = scores(build_metric("tool_call_match", {"arguments": "subset"}),
                 Sample(id="s", input="q", reference_tool_calls=ref), Generation(tool_calls=pred))
    assert {k: v.value for k, v in got.items()} == {
        "tool_call_match.precision": 1.0, "tool_call_match.recall": 1.0,
        "tool_call_match.f1": 1.0, "tool_call_match.exact_set": 1.0}
    # under exact mode only r2-p1 pairs: P = 1/2, R = 1/2, F1 = 2*1/(2+2) = 0.5, exact set 0
    got = scores(
        build_metric("tool_call_match"),
        Sample(id="s", input="q", reference_tool_calls=ref),
        Generation(tool_calls=pred),
    )
    assert [got[f"tool_call_match.{k}"].value for k in ("precision", "recall", "f1", "exact_set")] == [
        0.5,
        0.5,
        0.5,
        0.0,
    ]


def test_bfcl_acceptable_values_greedy_fails_bipartite_succeeds_across_three_calls():
    # r1 city in {Paris, London}, r2 city in {Paris}, r3 city in {London, Rome};
    # agent: Paris, London, Rome. Greedy (reference order): r1-Paris, r2 -> nothing, r3-London: 2 pairs.
    # Maximum: r1-London, r2-Paris, r3-Rome: 3 pairs.
    tools = [
        {"name": "w", "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    ]
    ref = [[T("w", city=["Paris", "London"]), T("w", city=["Paris"]), T("w", city=["London", "Rome"])]]
    pred = [[T("w", city="Paris"), T("w", city="London"), T("w", city="Rome")]]
    matcher = CallMatcher("bfcl", tools=tools)
    assert greedy_first_fit(ref, pred, matcher) == 2
    m = match_calls(ref, pred, matcher)
    assert m.tp == 3 and m.exact_set and m.f1 == 1.0


def test_precision_recall_f1_hand_computed_with_a_missed_and_an_extra_call():
    # reference: a(1), b(2), c(3); agent: a(1), b(9), c(3), d() -> TP = 2 (a, c)
    # precision 2/4, recall 2/3, F1 = 2*2/(4+3) = 4/7
    ref = [[T("a", x=1), T("b", x=2)], [T("c", x=3)]]
    pred = [[T("a", x=1.0)], [T("b", x=9), T("c", x=3), T("d")]]
    got = scores(
        build_metric("tool_call_match"),
        Sample(id="s", input="q", reference_tool_calls=ref),
        Generation(tool_calls=pred),
    )
    assert got["tool_call_match.precision"].value == 0.5
    assert got["tool_call_match.recall"].value == pytest.approx(2 / 3)
    assert got["tool_call_match.f1"].value == pytest.approx(4 / 7)
    assert got["tool_call_match.exact_set"].value == 0.0
    assert got["tool_call_match.f1"].metadata["unmatched_predicted"] == ["b@1", "d@1"]


def test_true_is_not_1_but_1_is_1_0_in_exact_mode():
    m = CallMatcher("exact")
    assert m(T("f", n=1, o={"k": [2]}), T("f", n=1.0, o={"k": [2.0]}))
    assert not m(T("f", n=1), T("f", n=True))


def test_flat_mode_is_order_free_across_turns_aligned_mode_pairs_only_the_same_turn():
    ref = [[T("a"), T("b")]]
    pred = [[T("b")], [T("a")]]
    assert match_calls(ref, pred, CallMatcher("name")).tp == 2
    assert match_calls(ref, pred, CallMatcher("name"), turn_mode="aligned").tp == 1


def test_no_call_against_an_empty_reference_is_an_exact_set_and_ratios_without_denominator_are_not_tested():
    s = Sample(id="s", input="joke?", reference_tool_calls=[])
    got = scores(build_metric("tool_call_match"), s, Generation(tool_calls=[]))
    assert got["tool_call_match.exact_set"].value == 1.0
    for k in ("precision", "recall", "f1"):
        assert got[f"tool_call_match.{k}"].status is Status.NOT_TESTED and got[f"tool_call_match.{k}"].reason
    got = scores(build_metric("tool_call_match"), s, Generation(tool_calls=[[T("get_weather", city="x")]]))
    assert got["tool_call_match.precision"].value == 0.0 and got["tool_call_match.f1"].value == 0.0
    assert got["tool_call_match.recall"].status is Status.NOT_TESTED


def test_best_route_tie_order_highest_f1_then_fewest_calls_then_first_listed():
    pred = [[T("balance", acct="c")], [T("transfer", amount=50)]]
    short = [[T("transfer", amount=50)]]
    long = [[T("balance", acct="c")], [T("transfer", amount=50)]]
    # F1: short = 2*1/(2+1) = 0.667, long = 1.0 -> long, though listed second
    assert best_route([short, long], pred, CallMatcher()).route == 1
    # equal F1 (0 each): fewest reference calls wins
    assert best_route([long, short], [[T("other")]], CallMatcher()).route == 1
    # equal F1 and size: first listed
    assert best_route([[[T("x")]], [[T("y")]]], [[T("z")]], CallMatcher()).route == 0
    s = Sample(id="s", input="q", reference_tool_calls=short, metadata={"reference_routes": [long]})
    got = scores(build_metric("tool_call_match"), s, Generation(tool_calls=pred))
    assert got["tool_call_match.f1"].value == 1.0 and got["tool_call_match.f1"].metadata["route"] == 1


def test_custom_comparator_module_function_and_bad_modes(agents_examples):
    ref = [[T("greet", who="Ada")]]
    pred = [[T("greet", who="ADA")]]
    s = Sample(id="s", input="q", reference_tool_calls=ref)
    m = build_metric("tool_call_match", {"comparator": "predicates:casefold_strings", "comparator_version": "1"})
    assert scores(m, s, Generation(tool_calls=pred))["tool_call_match.exact_set"].value == 1.0
    assert m.identity()["params"]["comparator"] == "predicates:casefold_strings"
    assert (
        scores(build_metric("tool_call_match"), s, Generation(tool_calls=pred))["tool_call_match.exact_set"].value
        == 0.0
    )
    with pytest.raises(ConfigError, match="arguments"):
        build_metric("tool_call_match", {"arguments": "fuzzy"})
    with pytest.raises(ConfigError):
        CallMatcher(comparator="predicates:nope")


def test_missing_reference_is_not_tested_missing_trace_is_unknown_under_every_named_score():
    m = build_metric("tool_call_match")
    out = m.evaluate(Sample(id="s", input="q"), Generation(tool_calls=[]), {})
    assert [s.name for s in out] == [f"tool_call_match.{k}" for k in ("precision", "recall", "f1", "exact_set")]
    assert all(s.status is Status.NOT_TESTED and "reference_tool_calls" in s.reason for s in out)
    out = m.evaluate(Sample(id="s", input="q", reference_tool_calls=[[T("a")]]), Generation(text="I did it"), {})
    assert len(out) == 4 and all(s.status is Status.UNKNOWN and "trace" in s.reason for s in out)
