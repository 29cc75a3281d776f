"""The per-sample tables' JSON (``core.rowjson``): orjson when installed, the
standard library otherwise or for what orjson refuses; both read back the
same values."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import orjson
import pytest

from auditkit_ray.actors.tables import score_row
from auditkit_ray.core import rowjson
from auditkit_ray.core.types import Score, Status

FAST = rowjson._make(orjson)
STDLIB = rowjson._make(None)

VALUES = [
    {"text": "naïve café ✓ 日本", "n": [1, 2.5, -3e-12, 1e16, True, None]},
    [{"name": "m", "value": 1.0, "status": "scored", "reason": None, "metadata": {"stale": {}, "retrieved": 3}}],
    {
        "big": 2**70 + 1,
        "neg": -(2**63) - 1,
        "u64": 2**64 - 1,
    },  # beyond 64 bits: orjson refuses them, and reads them as floats
    {"when": dt.datetime(2024, 1, 1, 12, 30, tzinfo=dt.timezone.utc), "day": dt.date(2024, 6, 1)},
    {"groups": {"staff"}, "path": Path("/corpus/d1.txt")},  # through jsonable
    {"status": Status.NOT_TESTED},
    "a plain string",
    None,
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_row_json_reads_back_the_same_values_with_orjson_as_with_the_standard_library(value):
    fast_dumps, fast_loads = FAST
    std_dumps, std_loads = STDLIB
    expected = json.loads(std_dumps(value))
    assert fast_loads(fast_dumps(value)) == expected
    assert std_loads(fast_dumps(value)) == expected  # what orjson writes, any JSON reader reads
    assert fast_loads(std_dumps(value)) == expected  # tables written before orjson read as before


def test_the_package_writes_row_json_with_orjson_when_it_is_installed():
    assert rowjson._orjson is orjson
    assert rowjson.dumps({"a": [1, 2]}) == '{"a":[1,2]}'


def test_row_json_reads_a_nan_that_older_tables_hold():
    old = json.dumps({"ratio": math.nan}, ensure_ascii=False)  # how tables were written before
    assert old == '{"ratio": NaN}'
    for _, loads in (FAST, STDLIB):
        assert math.isnan(loads(old)["ratio"])


@pytest.mark.parametrize("impl", [FAST, STDLIB], ids=["orjson", "stdlib"])
@pytest.mark.parametrize("extra", [{}, {"big": 2**70 + 1}], ids=["plain", "with-an-int-orjson-refuses"])
def test_row_json_writes_a_nan_or_an_infinity_as_null_whichever_library_writes_it(impl, extra):
    dumps, loads = impl
    value = {"ratio": math.nan, "top": [math.inf, -math.inf, 1.5], "nested": ({"x": math.nan},), **extra}
    text = dumps(value)
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"ratio": None, "top": [None, None, 1.5], "nested": [{"x": None}], **extra}
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize("impl", [FAST, STDLIB], ids=["orjson", "stdlib"])
def test_a_bad_row_json_text_raises_the_standard_decode_error(impl):
    _, loads = impl
    with pytest.raises(json.JSONDecodeError):
        loads('[{"name": "m", ')


@pytest.mark.parametrize("impl", [FAST, STDLIB], ids=["orjson", "stdlib"])
@pytest.mark.parametrize("score", [
    Score.scored("exact_match", 1, metadata={"cited": ["1"], "nested": {"k": [1.5]}}),
    Score(name="token_f1", value=0.25, metadata={"stats": [1, 2]}),
    Score.unknown("citation_recall", "answer cites nothing"),
    Score.not_tested("freshness", "no corpus snapshot"),
    Score.error("judge", "timeout after 30 s"),
], ids=["scored-fast-path", "scored-validated", "unknown", "not_tested", "error"])
def test_a_score_stored_from_its_own_fields_reads_as_its_json_dict(impl, score):
    dumps, loads = impl
    stored = loads(dumps([score_row(score)]))
    assert stored == [json.loads(json.dumps(score.to_json_dict()))]
    assert stored == [score.model_dump(mode="json")]
    assert Score.read_json_dict(stored[0]).status is score.status


def test_a_score_subclass_is_stored_through_its_json_dict():
    class Tagged(Score):
        tag: str = "x"

        def to_json_dict(self):
            return {**super().to_json_dict(), "metadata": {"tag": self.tag}}

    s = Tagged(name="m", value=0.5)
    assert score_row(s) == {"name": "m", "value": 0.5, "status": "scored", "reason": None, "metadata": {"tag": "x"}}


@pytest.mark.parametrize("text", ["[12345678901234567890123]", '{"id": -9999999999999999999}', "18446744073709551616"])
def test_row_json_reads_an_integer_beyond_64_bits_exactly_where_orjson_alone_would_make_it_a_float(text):
    _, fast_loads = FAST
    assert isinstance(json.loads(orjson.dumps(orjson.loads(text))), (float, list, dict))  # orjson alone: a float
    value = fast_loads(text)
    assert value == json.loads(text)
    number = value[0] if isinstance(value, list) else value["id"] if isinstance(value, dict) else value
    assert type(number) is int and abs(number) >= 2**63


def test_row_json_reads_bytes_as_text():
    _, fast_loads = FAST
    assert fast_loads('{"é": [1, 2]}'.encode()) == {"é": [1, 2]}
