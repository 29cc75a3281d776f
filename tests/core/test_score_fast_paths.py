"""The scoring stages build, dump and read back millions of Scores, so
Score has fast paths that skip pydantic; they must agree with it exactly."""

import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from auditkit_ray.core.types import Score, Status, jsonable

CASES = [
    Score.scored("em", 1.0),
    Score.scored("em", True),
    Score.scored("f1", 0, metadata={"stats": [1, 2.5], "nested": {"a": [None, "x"]}}),
    Score.scored("rag", 0.0, reason="stale doc", metadata={"violations": {"d1": "why"}}),
    Score.unknown("judge", "no evidence"),
    Score.not_tested("tool", "missing tools"),
    Score.error("m", "boom", metadata={"trace": "x"}),
]


@pytest.mark.parametrize("score", CASES, ids=lambda s: f"{s.name}-{s.status.value}")
def test_fast_json_form_equals_pydantic_json_mode_and_reads_back_equal(score):
    fast = json.loads(json.dumps(score.to_json_dict(), default=jsonable))
    assert fast == json.loads(score.model_dump_json())
    back = Score.model_validate(fast)
    assert back.model_dump() == score.model_dump()
    record = Score.read_json_dict(fast)
    assert {k: getattr(record, k) for k in Score.model_fields} == dict(back)
    assert isinstance(record.status, Status)


def test_fast_scored_builds_the_same_score_as_validation():
    assert Score.scored("em", True) == Score(name="em", value=1.0, status=Status.SCORED)
    assert type(Score.scored("em", 1).value) is float


def test_values_json_lacks_are_converted_like_pydantic_json_mode():
    s = Score.scored("m", 1.0, metadata={"ids": {"b"}, "path": Path("/x/y"), "t": (1, 2)})
    assert json.loads(json.dumps(s.to_json_dict(), default=jsonable)) == json.loads(s.model_dump_json())


@pytest.mark.parametrize("bad", [
    {"name": "m", "status": "scored", "value": None},
    {"name": "m", "status": "scored", "value": math.inf},
    {"name": "m", "status": "unknown", "value": 1.0},
    {"name": "m", "status": "maybe"},
    {"name": 3, "status": "scored", "value": 1.0},
    {"name": "m", "status": "scored", "value": 1.0, "extra": 1},
])
def test_invalid_stored_scores_are_refused_as_by_validation(bad):
    with pytest.raises(ValidationError):
        Score.model_validate(bad)
    with pytest.raises(ValidationError):
        Score.read_json_dict(bad)


def test_non_finite_and_odd_values_still_go_through_validation():
    with pytest.raises(ValidationError):
        Score.scored("m", math.nan)
    with pytest.raises(ValidationError):
        Score.scored("m", "high")


def test_gc_paused_restores_the_collector_even_after_an_error_and_when_nested():
    import gc

    from auditkit_ray.core.gcpause import gc_paused

    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled(), "an inner pause must not end the outer one"
            raise RuntimeError
    assert gc.isenabled()


@pytest.mark.parametrize("kw", [{}, {"reason": "partial", "metadata": {"stats": [1, 2], "ids": ["a"]}}])
def test_fast_scored_is_the_object_model_construct_builds(kw):
    fast = Score.scored("f1", 0.25, **kw)
    built = Score.model_construct(name="f1", value=0.25, status=Status.SCORED, reason=kw.get("reason"),
                                  metadata=kw.get("metadata", {}))
    assert type(fast) is Score and fast == built == Score(name="f1", value=0.25, **kw)
    assert fast.__dict__ == built.__dict__ and fast.model_fields_set == built.model_fields_set
    assert (fast.__pydantic_extra__, fast.__pydantic_private__) == (
        built.__pydantic_extra__,
        built.__pydantic_private__,
    )
    assert fast.model_dump_json() == built.model_dump_json()
    fast.model_fields_set.discard("reason")  # each Score has its own set
    assert Score.scored("f1", 0.25).model_fields_set == built.model_fields_set
