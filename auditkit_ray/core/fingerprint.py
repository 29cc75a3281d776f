"""Configuration fingerprints: SHA-256 over canonical JSON.

Canonical means: keys sorted, no insignificant whitespace, integral floats
written as integers (``temperature: 0`` and ``0.0`` are the same setting), and
secrets dropped. A fingerprint identifies a configuration; it does not promise
bitwise-reproducible numbers.
"""

from __future__ import annotations

import hashlib
import json
import math
from enum import Enum
from typing import Any

from .secrets import any_remembered, is_secret_key, scrub_text


def _canon(obj: Any) -> Any:
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj) and obj == int(obj) and abs(obj) < 2**53:
            return int(obj)
        if not math.isfinite(obj):
            return repr(obj)
        return obj
    if isinstance(obj, Enum):
        return _canon(obj.value)
    if isinstance(obj, dict):
        return {str(k): _canon(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canon(v) for v in obj]
    if hasattr(obj, "model_dump"):
        return _canon(obj.model_dump(mode="json"))
    raise TypeError(f"cannot fingerprint a {type(obj).__name__}")


#: the value types a canonical value keeps as they are (exactly these: a subclass, an Enum say, is converted);
#: text too unless a secret value was remembered (then each string is scrubbed)
_ATOMS = frozenset({str, int, bool, type(None)})
_ATOMS_BUT_TEXT = frozenset({int, bool, type(None)})
_STR = frozenset({str})


def _canon_dropping_secrets(obj: Any) -> Any:
    """``_canon(redact(_canon(obj), drop=True))`` in one walk (a sweep fingerprints every run it makes):
    the canonical value with every key that names a credential dropped and every string scrubbed."""
    return _walk(obj, _ATOMS_BUT_TEXT if any_remembered() else _ATOMS)


def _walk(obj: Any, plain: frozenset) -> Any:
    t = type(obj)
    if t in plain:
        return obj
    if isinstance(obj, str):
        return scrub_text(obj) if any_remembered() else obj
    if isinstance(obj, bool) or obj is None or isinstance(obj, int):
        return obj
    if isinstance(obj, dict):
        if t is dict and set(map(type, obj.values())) <= plain and set(map(type, obj)) <= _STR \
                and not any(map(is_secret_key, obj)):
            return obj  # already canonical (text keys, none a secret's, plain values): as it is
        return {k: v if type(v) in plain else _walk(v, plain)
                for k, v in ((str(k), v) for k, v in obj.items()) if not is_secret_key(k)}
    if isinstance(obj, (list, tuple)):
        if t is list and set(map(type, obj)) <= plain:
            return obj
        return [v if type(v) in plain else _walk(v, plain) for v in obj]
    if isinstance(obj, float):
        c = _canon(obj)  # an int, a float, or the text of a NaN or infinity
        return scrub_text(c) if isinstance(c, str) and any_remembered() else c
    if isinstance(obj, Enum):
        return _walk(_canon(obj.value), plain)
    if hasattr(obj, "model_dump"):
        return _walk(obj.model_dump(mode="json"), plain)
    return _canon(obj)  # raises: not a value a fingerprint takes


def canonical_json(obj: Any) -> str:
    return json.dumps(_canon_dropping_secrets(obj), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def short(fp: str) -> str:
    return fp[:12]
