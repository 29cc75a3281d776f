"""Values as messages show them: shortened, and with control characters escaped.

A value taken from a file (a key, a string, a whole list an alias stands for) can be megabytes long or hold
an ESC that would drive the terminal. Every message that quotes one goes through ``shown`` (a value, as
``repr`` writes it) or ``shown_text`` (text as it is, a key or a path), and the command line escapes what
reaches the terminal once more (``terminal_safe``). Neither ever builds the whole ``repr`` of a large value.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

from .limits import MESSAGE_VALUE_CHARS

__all__ = ["clip", "shorten_tokens", "shown", "shown_text", "terminal_safe"]

#: C0 controls but tab and newline, DEL, C1 controls, and the Unicode controls that reorder or hide text
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
#: the same, newline and tab included: one line of a message
_CONTROLS_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = _REPR.maxarray = 6
_REPR.maxdict = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = MESSAGE_VALUE_CHARS


def _escape(m: re.Match) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def _escaped(text: str) -> str:
    return _CONTROLS_ALL.sub(_escape, text)


def clip(text: str, limit: int = MESSAGE_VALUE_CHARS) -> str:
    """``text`` at most about ``limit`` characters: a longer one keeps its start and end around
    ``...(N chars)...``."""
    if len(text) <= limit:
        return text
    keep = max(limit - 20, 8)
    return f"{text[: keep * 2 // 3]}...({len(text):,} chars)...{text[len(text) - keep // 3:]}"


def shown_text(text: Any, limit: int = MESSAGE_VALUE_CHARS) -> str:
    """Text (a key, a path, a name) for a message, unquoted: control characters escaped, shortened."""
    s = text if isinstance(text, str) else str(text)
    if len(s) <= limit:
        escaped = _escaped(s)
        if len(escaped) <= limit:
            return escaped
    keep = max(limit - 20, 8)
    head, tail = _escaped(s[: keep * 2 // 3])[: keep * 2 // 3], _escaped(s[len(s) - keep // 3:])[-(keep // 3):]
    return f"{head}...({len(s):,} chars)...{tail}"


def shown(value: Any, limit: int = MESSAGE_VALUE_CHARS) -> str:
    """A value for a message, as ``repr`` writes it (strings quoted, lists bracketed), at most about
    ``limit`` characters, with every control character escaped; a deep or huge value is never walked
    whole."""
    if isinstance(value, str):
        if len(value) <= limit:
            return clip(_escaped(repr(value)), limit + 2)
        return "'" + shown_text(value, limit) + "'"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of {value.bit_length():,} bits>"
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails still gets a message
        text = f"<{type(value).__name__}>"
    return clip(_escaped(text), limit)


_LONG_TOKEN = re.compile(r"\S{%d,}" % (4 * MESSAGE_VALUE_CHARS))


def shorten_tokens(message: str, limit: int = 2 * MESSAGE_VALUE_CHARS) -> str:
    """``message`` with each run of text without spaces longer than ``4 * MESSAGE_VALUE_CHARS`` (a path, a
    URL, a value named by another layer) shortened in the middle to about ``limit``."""
    return _LONG_TOKEN.sub(lambda m: clip(m.group(0), limit), message)


def terminal_safe(message: str) -> str:
    """A message as the terminal gets it: every control character escaped but newline and tab."""
    return _CONTROLS.sub(_escape, message)
