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


# BFCL's possible answers mark an optional array ``["", [...]]`` (its simple_python_178: additional_details=[]);
# BFCL's list checkers read the optional marker as the empty list
OPTIONAL_ARRAYS = {
    "name": "report",
    "parameters": {"type": "dict", "required": ["company"], "properties": {
        "company": {"type": "string"},
        "details": {"type": "array", "items": {"type": "string"}},
        "filters": {"type": "array", "items": {"type": "dict"}},
        "years": {"type": "array", "items": {"type": "integer"}},
    }},
}
OPTIONAL_REF = ToolCall(name="report", arguments={
    "company": ["Acme"], "details": ["", ["revenue", "profit"]], "filters": ["", [{"field": ["year"]}]],
    "years": [[2024, 2025]]})


@pytest.mark.parametrize("args, ok", [
    ({"details": []}, True), ({"filters": []}, True), ({"details": [], "filters": []}, True),
    ({"details": ["revenue", "profit"]}, True), ({"details": ["revenue"]}, False), ({}, True),
    ({"filters": [{"field": "year"}]}, True), ({"filters": [{"field": "month"}]}, False),
], ids=lambda v: repr(v) if isinstance(v, dict) else str(v))
def test_bfcl_an_empty_list_for_an_optional_array_parameter_is_valid_as_in_bfcl(args, ok):
    call = ToolCall(name="report", arguments={"company": "Acme", "years": [2024, 2025], **args})
    res = check_call(OPTIONAL_REF, call, OPTIONAL_ARRAYS)
    assert res.valid is ok, res.error
    tools = [{"type": "function", "function": OPTIONAL_ARRAYS}]
    assert CallMatcher("bfcl", tools=tools)(OPTIONAL_REF, call) is ok
    # the metrics agree with the checker
    sample = Sample(id="s", input="q", tools=tools, reference_tool_calls=[[OPTIONAL_REF]])
    gen = Generation(tool_calls=[[call]])
    match = {s.name: s.value for s in build_metric("tool_call_match", {"arguments": "bfcl"}).evaluate(sample, gen, {})}
    assert match["tool_call_match.exact_set"] == (1.0 if ok else 0.0)
    [correct] = build_metric("argument_correctness", {"arguments": "bfcl"}).evaluate(sample, gen, {})
    assert correct.value == (1.0 if ok else 0.0)


def test_bfcl_an_empty_list_for_a_required_array_parameter_is_still_wrong():
    call = ToolCall(name="report", arguments={"company": "Acme", "years": []})
    res = check_call(OPTIONAL_REF, call, OPTIONAL_ARRAYS)
    assert not res.valid and res.error_type == "value_error:list"


@pytest.mark.parametrize("items, ref, value, ok", [
    # typed items are type-checked: neither True == 1 nor 1 == 1.0 holds inside them
    ("integer", [[1, 2]], [True, 2], False),
    ("float", [[1.0, 2.0]], [1, 2.0], False),
    # where BFCL skips the item check, Python equality decides: an optional array, or an array of arrays
    ("integer", [[1, 2], ""], [True, 2], True),
    ("float", [[1.0, 2.0], ""], [1, 2.0], True),
    ("array", [[[1, 2]]], [[True, 2]], True),
])
def test_bfcl_python_equality_inside_arrays_holds_only_where_the_item_type_is_not_checked(items, ref, value, ok):
    schema = {"name": "f", "parameters": {"properties": {"xs": {"type": "array", "items": {"type": items}}},
                                          "required": []}}
    res = check_call(ToolCall(name="f", arguments={"xs": ref}), ToolCall(name="f", arguments={"xs": value}), schema)
    assert res.valid is ok, res.error
