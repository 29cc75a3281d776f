"""Secrets never reach fingerprints, results, logs or reports.

Two defences: fields typed ``SecretStr`` in the config, and a key-name rule
that masks (for display) or drops (for fingerprints) any value stored under a
key that names a credential. Values expanded from environment variables whose
names look secret are also remembered and scrubbed from free text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

#: a key is secret when it *ends* in a credential word: ``api_key``,
#: ``openai_api_key``, ``hf_token``, ``Authorization``, ``aws_secret_access_key``;
#: but not ``max_new_tokens`` or ``per_token_s``.
SECRET_KEY = re.compile(
    r"(?:^|_)(?:api_?key|apikey|secret|password|passwd|pwd|token|auth|authorization|credentials?|"
    r"cookie|private_?key|access_?key|session_?key|secret_?key|bearer)$",
    re.IGNORECASE,
)
MASK = "***"
_known_values: set[str] = set()


@lru_cache(maxsize=4096)  # the same few key names, asked for every request and every fingerprint
def is_secret_key(key: str) -> bool:
    norm = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).replace("-", "_").strip("_")
    return bool(SECRET_KEY.search(norm))


def remember_secret(value: str) -> None:
    """Register a value (e.g. expanded from ``${OPENAI_API_KEY}``) for scrubbing."""
    if value and len(value) >= 4:
        _known_values.add(value)


def any_remembered() -> bool:
    """Whether a secret value has been remembered (``scrub_text`` then has something to mask)."""
    return bool(_known_values)


def scrub_text(text: str) -> str:
    for v in sorted(_known_values, key=len, reverse=True):
        text = text.replace(v, MASK)
    return text


def redact(obj: Any, *, drop: bool = False) -> Any:
    """Mask (or with ``drop=True`` remove) every value under a secret-looking key,
    recursively; strings are scrubbed of remembered secret values."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str) and is_secret_key(k):
                if drop:
                    continue
                out[k] = MASK if v not in (None, "") else v
            else:
                out[k] = redact(v, drop=drop)
        return out
    if isinstance(obj, (list, tuple)):
        return [redact(v, drop=drop) for v in obj]
    if isinstance(obj, str):
        return scrub_text(obj)
    return obj
