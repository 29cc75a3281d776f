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


def _canon_dropping_secrets(obj: Any) -> Any:
    """``_canon(redact(_canon(obj), drop=True))`` in one walk (a sweep fingerprints every run it makes):
    the canonical value with every key that names a credential dropped and every string scrubbed."""
    if isinstance(obj, str):
        return scrub_text(obj) if any_remembered() else obj
    if isinstance(obj, bool) or obj is None or isinstance(obj, int):
        return obj
    if isinstance(obj, dict):
        return {k: _canon_dropping_secrets(v) for k, v in ((str(k), v) for k, v in obj.items())
                if not is_secret_key(k)}
    if isinstance(obj, (list, tuple)):
        return [_canon_dropping_secrets(v) for v in obj]
    if isinstance(obj, float):
        c = _canon(obj)  # an int, a float, or the text of a NaN or infinity
        return scrub_text(c) if isinstance(c, str) and any_remembered() else c
    if isinstance(obj, Enum):
        return _canon_dropping_secrets(_canon(obj.value))
    if hasattr(obj, "model_dump"):
        return _canon_dropping_secrets(obj.model_dump(mode="json"))
    return _canon(obj)  # raises: not a value a fingerprint takes


def canonical_json(obj: Any) -> str:
    return json.dumps(_canon_dropping_secrets(obj), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def short(fp: str) -> str:
    return fp[:12]
