"""The BFCL-compatible checker applies BFCL's AST type rules, not the
default JSON equality."""

import pytest

from auditkit_ray import Generation, Sample, Status, ToolCall
from auditkit_ray.agents.bfcl import check_call, standardize
from auditkit_ray.agents.matching import CallMatcher
from auditkit_ray.core.registry import build_metric

SCHEMA = {
    "name": "book",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string"},
            "nights": {"type": "integer"},
            "budget": {"type": "float"},
            "breakfast": {"type": "boolean"},
            "guests": {"type": "array", "items": {"type": "string"}},
            "prefs": {"type": "dict"},
        },
        "required": ["city", "nights"],
    },
}
REF = ToolCall(name="book", arguments={
    "city": ["New York", "NYC"], "nights": [2], "budget": [300.0, ""], "breakfast": [True, ""],
    "guests": [["Ann", "Bob"], ""], "prefs": [{"view": ["sea", ""], "floor": [3]}, ""],
})


def check(**args):
    return check_call(REF, ToolCall(name="book", arguments=args), SCHEMA)


def test_bfcl_optional_parameters_marked_with_empty_string_may_be_omitted():
    assert check(city="New York", nights=2).valid


def test_bfcl_int_accepted_where_float_expected_but_not_float_where_int_expected():
    assert check(city="NYC", nights=2, budget=300).valid
    res = check(city="NYC", nights=2.0)
    assert not res.valid and res.error_type == "type_error:simple"


def test_bfcl_strings_normalised_and_list_items_too():
    assert standardize("New-York, NY's") == 'newyorkny"s'
    assert check(city="new york", nights=2).valid
    assert check(city="N.Y.C", nights=2).valid
    assert check(city="new york", nights=2, guests=["ann", "B o b"]).valid
    assert not check(city="Boston", nights=2).valid


def test_bfcl_bool_is_not_int_and_unexpected_or_missing_parameters_fail():
    assert not check(city="NYC", nights=True).valid
    assert check(city="NYC", nights=2, breakfast=True).valid
    assert check(city="NYC", nights=2, wifi=True).error_type == "unexpected_param"
    assert check(city="NYC").error_type == "missing_required"
    ref = ToolCall(name="book", arguments={"city": ["NYC"], "nights": [2], "budget": [300.0]})
    assert (
        check_call(ref, ToolCall(name="book", arguments={"city": "NYC", "nights": 2}), SCHEMA).error_type
        == "missing_optional"
    )


def test_bfcl_dict_parameters_are_checked_key_by_key_with_optional_keys():
    assert check(city="NYC", nights=2, prefs={"floor": 3}).valid
    assert check(city="NYC", nights=2, prefs={"floor": 3, "view": "Sea"}).valid
    assert not check(city="NYC", nights=2, prefs={"floor": 4}).valid
    assert not check(city="NYC", nights=2, prefs={"view": "sea"}).valid


def test_bfcl_mode_in_the_metric_needs_the_tool_schema_else_unknown():
    sample = Sample(id="s", input="q", reference_tool_calls=[[REF]])
    gen = Generation(tool_calls=[[ToolCall(name="book", arguments={"city": "nyc", "nights": 2, "budget": 300})]])
    m = build_metric("tool_call_match", {"arguments": "bfcl"})
    [first, *_] = m.evaluate(sample, gen, {})
    assert first.status is Status.UNKNOWN and "schema" in first.reason
    sample = Sample(id="s", input="q", tools=[{"type": "function", "function": SCHEMA}], reference_tool_calls=[[REF]])
    got = {s.name: s.value for s in m.evaluate(sample, gen, {})}
    assert got["tool_call_match.exact_set"] == 1.0
    # the default mode compares exactly and fails the same call
    assert {s.name: s.value for s in build_metric("tool_call_match").evaluate(sample, gen, {})}[
        "tool_call_match.exact_set"
    ] == 0.0


@pytest.mark.parametrize("value, ok", [(["a", "b"], True), (["A", "B"], True), (["b", "a"], False), ([1, 2], False)])
def test_bfcl_array_of_strings_one_acceptable_list(value, ok):
    schema = {
        "name": "f",
        "parameters": {"properties": {"xs": {"type": "array", "items": {"type": "string"}}}, "required": []},
    }
    ref = ToolCall(name="f", arguments={"xs": [["a", "b"]]})
    assert CallMatcher("bfcl", tools=[schema])(ref, ToolCall(name="f", arguments={"xs": value})) is ok
