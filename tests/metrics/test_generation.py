"""Regex, numeric, JSON and JSON-schema metrics."""

import pytest

from auditkit_ray import ConfigError, Generation, Sample, Status
from auditkit_ray.core.registry import build_metric
from auditkit_ray.metrics.generation import parse_numbers


def _one(name, target=None, text="", params=None, **sample_fields):
    [s] = build_metric(name, params or {}).evaluate(Sample(id="1", input="q", target=target, **sample_fields),
                                                    Generation(text=text), {})
    return s


@pytest.mark.parametrize("text, expect", [
    ("The answer is 1,234.5.", [1234.5]),
    ("#### 42", [42.0]),
    ("x=-5, then 3e2; 50 % and .5", [-5.0, 300.0, 50.0, 0.5]),
    ("abc123 v2 5km 1,2345 COVID-19 \u22127", [5.0, 1.0, 2345.0, 19.0, -7.0]),
    ("1,5", [1.0, 5.0]),
    ("no digits here, nan, inf", []),
])
def test_parse_numbers_reads_commas_signs_exponents_and_percentages(text, expect):
    assert [n.value for n in parse_numbers(text)] == expect


@pytest.mark.parametrize("target, text, params, value", [
    ("1234", "so the total is 1,234", {}, 1.0),
    ("1234", "first 1234 then 99", {}, 0.0),  # the last number by default
    ("1234", "first 1234 then 99", {"pick": "first"}, 1.0),
    ("1234", "first 1234 then 99", {"pick": "any"}, 1.0),
    ("1234", "first 1234 then 99", {"pick": "only"}, 0.0),
    ("0.25", "about 25%", {}, 1.0),  # a percentage matches its fraction
    ("25%", "0.25", {}, 1.0),
    ("25%", "25", {}, 1.0),
    ("100", "101", {"abs_tol": 1}, 1.0),
    ("100", "101.5", {"abs_tol": 1}, 0.0),
    ("100", "104", {"rel_tol": 0.05}, 1.0),
    ("100", "106", {"rel_tol": 0.05}, 0.0),
    (["7", "seven is 7.0"], "It is 7.", {}, 1.0),
    ("-3", "-3.000", {}, 1.0),
    ("3", "-3", {}, 0.0),
])
def test_numeric_match_tolerances_commas_percentages_and_which_number(target, text, params, value):
    s = _one("numeric_match", target, text, params)
    assert s.status is Status.SCORED and s.value == value, s


def test_numeric_match_without_a_number_in_the_prediction_scores_zero_with_reason():
    s = _one("numeric_match", "4", "four")
    assert s.value == 0.0 and "no number" in s.reason


@pytest.mark.parametrize("target, words", [
    (float("nan"), "not a finite number"),
    ("nan", "holds no number"),
    ("1 or 2", "holds 2 numbers"),
    (True, "boolean"),
    ({"v": 1}, "is not a number"),
])
def test_numeric_match_bad_targets_are_errors_with_reason(target, words, bad_sample):
    [s] = build_metric("numeric_match").evaluate(bad_sample(target=target), Generation(text="1"), {})
    assert s.status is Status.ERROR and words in s.reason, s


def test_numeric_match_refuses_bad_params():
    for params in ({"abs_tol": float("nan")}, {"rel_tol": -1}, {"pick": "middle"}):
        with pytest.raises(ConfigError):
            build_metric("numeric_match", params)


def test_regex_match_with_a_pattern_param_and_with_targets_as_patterns():
    assert _one("regex_match", None, "Answer: B", {"pattern": r"Answer:\s*B\b"}).value == 1.0
    assert _one("regex_match", None, "answer: b", {"pattern": r"Answer: B", "flags_ignore_case": True}).value == 1.0
    assert _one("regex_match", None, "xx Answer: B", {"pattern": r"Answer: B", "mode": "match"}).value == 0.0
    assert _one("regex_match", None, "Answer: B", {"pattern": r"Answer", "mode": "fullmatch"}).value == 0.0
    assert _one("regex_match", [r"\bparis\b", "lyon"], "It is Lyon", {"ignore_case": True}).value == 1.0
    s = _one("regex_match", None, "x")  # no pattern and no target
    assert s.status is Status.NOT_TESTED and "target" in s.reason
    s = _one("regex_match", "([unclosed", "x")
    assert s.status is Status.ERROR and "not a valid regular expression" in s.reason
    with pytest.raises(ConfigError, match="invalid regular expression"):
        build_metric("regex_match", {"pattern": "(["})


@pytest.mark.parametrize("text, value", [
    ('{"a": 1, "b": [true, null]}', 1.0),
    ('```json\n{"a": 1}\n```', 1.0),
    ("[1, 2]", 1.0),
    ('{"a": NaN}', 0.0),
    ('{"a": 1,}', 0.0),
    ("", 0.0),
    ("Sure! {\"a\": 1}", 0.0),
])
def test_json_valid_is_strict_json(text, value):
    assert _one("json_valid", None, text).value == value


SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"], "additionalProperties": False}


def test_json_schema_match_from_params_and_from_sample_metadata():
    pytest.importorskip("jsonschema")
    ok = '{"name": "Ada", "age": 36}'
    assert _one("json_schema_match", None, ok, {"schema": SCHEMA}).value == 1.0
    s = _one("json_schema_match", None, '{"name": "Ada", "age": -1}', {"schema": SCHEMA})
    assert s.value == 0.0 and "age" in s.reason and "minimum" in s.reason
    s = _one("json_schema_match", None, '{"name": "Ada"}', {"schema": SCHEMA})
    assert s.value == 0.0 and "'age' is a required property" in s.reason
    s = _one("json_schema_match", None, "not json", {"schema": SCHEMA})
    assert s.value == 0.0 and "invalid JSON" in s.reason
    assert _one("json_schema_match", None, ok, metadata={"json_schema": SCHEMA}).value == 1.0
    s = _one("json_schema_match", None, ok)
    assert s.status is Status.NOT_TESTED and "json_schema" in s.reason
    s = _one("json_schema_match", None, ok, metadata={"json_schema": {"type": "nonsense"}})
    assert s.status is Status.ERROR and "invalid JSON schema" in s.reason
    with pytest.raises(ConfigError, match="invalid JSON schema"):
        build_metric("json_schema_match", {"schema": {"type": 5}})
