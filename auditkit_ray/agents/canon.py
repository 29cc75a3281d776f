"""JSON values compared the way a tool call or an environment state means them.

* Numbers compare by value: ``1 == 1.0`` (JSON has one number type).
* Booleans are not numbers: ``True != 1`` and ``False != 0``.
* Objects compare without regard to key order; arrays in order; tuples are
  arrays. All of this applies at every depth.

``canonical`` gives a hashable, order-free form with the same equality
(used to find duplicate calls and to digest values).
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterator

__all__ = ["canonical", "canonical_text", "json_equal", "json_subset", "diff_paths"]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def json_equal(a: Any, b: Any) -> bool:
    """Deep JSON equality: 1 == 1.0, True != 1, key order irrelevant."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if _is_number(a) or _is_number(b):
        if not (_is_number(a) and _is_number(b)):
            return False
        if isinstance(a, float) and math.isnan(a) and isinstance(b, float) and math.isnan(b):
            return True
        return a == b
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or a.keys() != b.keys():
            return False
        return all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))) or len(a) != len(b):
            return False
        return all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def json_subset(expected: Any, actual: Any) -> bool:
    """``expected`` is contained in ``actual``: every key of an expected object
    is present in the actual object with a (recursively) contained value;
    arrays and scalars must be ``json_equal``."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and json_subset(v, actual[k]) for k, v in expected.items())
    return json_equal(expected, actual)


def canonical(v: Any) -> Any:
    """A hashable form with ``json_equal`` semantics (two values are
    ``json_equal`` exactly when their canonical forms are equal)."""
    if isinstance(v, bool):
        return ("b", v)
    if _is_number(v):
        if isinstance(v, float) and math.isnan(v):
            return ("n", "nan")
        if isinstance(v, float) and math.isfinite(v) and v == int(v):
            return ("n", int(v))
        return ("n", v)
    if isinstance(v, dict):
        return ("o", tuple(sorted((str(k), canonical(x)) for k, x in v.items())))
    if isinstance(v, (list, tuple)):
        return ("a", tuple(canonical(x) for x in v))
    if v is None:
        return ("z", None)
    return ("s", str(v)) if isinstance(v, str) else ("?", repr(v))


def _plain(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if _is_number(v):
        if isinstance(v, float) and math.isfinite(v) and v == int(v) and abs(v) < 2**53:
            return int(v)
        return v if not isinstance(v, float) or math.isfinite(v) else repr(v)
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return repr(v)


def canonical_text(v: Any) -> str:
    """Canonical JSON text (sorted keys, integral floats as integers)."""
    return json.dumps(_plain(v), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def diff_paths(expected: Any, actual: Any, *, subset: bool, path: str = "$") -> Iterator[str]:
    """Where ``actual`` departs from ``expected`` (JSONPath-like strings)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(expected, key=str):
            if k not in actual:
                yield f"{path}.{k}: missing"
            else:
                yield from diff_paths(expected[k], actual[k], subset=subset, path=f"{path}.{k}")
        if not subset:
            for k in sorted(set(actual) - set(expected), key=str):
                yield f"{path}.{k}: unexpected"
        return
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)) and len(expected) == len(actual):
        for i, (x, y) in enumerate(zip(expected, actual)):
            yield from diff_paths(x, y, subset=False, path=f"{path}[{i}]")  # arrays: exact
        return
    if not json_equal(expected, actual):
        yield f"{path}: expected {canonical_text(expected)}, got {canonical_text(actual)}"
