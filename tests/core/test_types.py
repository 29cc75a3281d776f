import math

import pytest
from pydantic import ValidationError

from auditkit_ray import Generation, Sample, Score, Status
from auditkit_ray.core.types import content_id


def test_scored_needs_a_finite_value():
    with pytest.raises(ValidationError):
        Score(name="m", status=Status.SCORED, value=None)
    with pytest.raises(ValidationError):
        Score(name="m", value=math.nan)


def test_unscored_statuses_carry_no_value():
    with pytest.raises(ValidationError):
        Score(name="m", status=Status.UNKNOWN, value=0.0)
    s = Score.unknown("m", "no gold evidence")
    assert s.value is None and s.status is Status.UNKNOWN and s.reason == "no gold evidence"


def test_bool_values_become_floats():
    assert Score.scored("m", True).value == 1.0


def test_generation_keeps_raw_text_beside_text():
    g = Generation(text="42")
    assert g.raw_text == "42"
    g2 = Generation(text="42", raw_text="<think>x</think>42</s>")
    assert g2.raw_text != g2.text


def test_content_id_is_stable_and_content_derived():
    a = content_id({"input": "x", "target": "y"})
    assert a == content_id({"target": "y", "input": "x"})
    assert a != content_id({"input": "x", "target": "z"})
    assert len(a) == 16


def test_sample_targets_list():
    assert Sample(id="1", input="q", target="a").targets == ["a"]
    assert Sample(id="1", input="q", target=["a", "b"]).targets == ["a", "b"]
    assert Sample(id="1", input="q").targets == []


def test_sample_rejects_unknown_fields():
    with pytest.raises(ValidationError):
        Sample(id="1", input="q", bogus=1)
