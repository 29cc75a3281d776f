"""JSON for the per-sample tables' text columns (scores, targets,
annotations, generations): one value per row, hundreds of thousands per run.

orjson (the ``ray`` extra installs it) encodes and decodes these 2-3x faster
than the standard library; without it, or for a value orjson refuses
(non-string dict keys, integers beyond 64 bits), the standard library does
the same job, and a text with a run of 19 digits or more is read by the
standard library (orjson reads an integer beyond 64 bits as a float). Either
way a value reads back as the same Python value, with one documented
exception: a NaN or infinity inside a value is written as ``null``, as
orjson and pydantic (the run's result JSON) write it.

Not for fingerprints or anything hashed: their canonical JSON has its own
separators and key order (``core.fingerprint``).
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

from .types import jsonable

_std_encode = json.JSONEncoder(ensure_ascii=False, default=jsonable, allow_nan=False).encode
_std_loads = json.loads


def _finite(v: Any) -> Any:
    """``v`` with every NaN and infinity (in dicts, lists, tuples) as None."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def _std_dumps(value: Any) -> str:
    """The standard library's JSON of ``value``, a NaN or infinity as null
    (as orjson and pydantic write them)."""
    try:
        return _std_encode(value)
    except ValueError as exc:
        if "float" not in str(exc):  # not "Out of range float values..." (a circular value, say)
            raise
        return _std_encode(_finite(value))  # rare: walk the value only then


try:  # optional: the core package needs only pydantic
    import orjson as _orjson
except ImportError:  # pragma: no cover - the fallback itself, _make(None), is tested
    _orjson = None


# every ASCII digit to "0" and every other ASCII character to " ": a run of
# 19 zeros in the translation is a run of 19 digits in the text (str.translate
# is a C loop; a regular expression for the same run costs ~8x more)
_DIGIT_MAP = str.maketrans({chr(c): "0" if chr(c).isdigit() else " " for c in range(128)})
_LONG_DIGITS = "0" * 19


def _make(orjson: Any) -> tuple[Callable[[Any], str], Callable[[str | bytes], Any]]:
    if orjson is None:
        return _std_dumps, _std_loads  # type: ignore[return-value]
    # dates and dataclasses go through ``jsonable``, as the standard library
    # path sends them, so both write the same values
    opts = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    encode, decode, refused, unreadable = orjson.dumps, orjson.loads, orjson.JSONEncodeError, orjson.JSONDecodeError

    def dumps(value: Any) -> str:
        try:
            return encode(value, default=jsonable, option=opts).decode("utf-8")
        except refused:
            return _std_dumps(value)

    def loads(text: str | bytes) -> Any:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if _LONG_DIGITS in text.translate(_DIGIT_MAP):
            # a number of 19 digits or more: orjson would read an integer
            # beyond 64 bits as a float; the standard library keeps it exact
            return _std_loads(text)
        try:
            return decode(text)
        except unreadable:
            # what orjson rejects and the standard library reads: NaN and
            # Infinity (which tables written without orjson can hold), lone
            # surrogates, numbers beyond a float's range
            return _std_loads(text)

    return dumps, loads


#: ``dumps(value) -> str``: one value as JSON text, non-ASCII kept as is.
#: ``loads(text) -> value``: a bad text raises ``json.JSONDecodeError`` (a ValueError).
dumps, loads = _make(_orjson)
