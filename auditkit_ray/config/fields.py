"""Field types of the run and sweep models that carry a bound: paths, names, seeds, templates.

Each check says what is wrong in words and, where there is one, with the limit (``core.limits``); the
loader reports it at the field's line. ``path_problem`` is also asked of every input path before anything
looks at the file system (``config.loader``), so that a path no file system takes (NUL, tens of kilobytes)
is refused as a setting, never raised by ``os.stat``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from ..core.limits import (
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_PATH_PART_CHARS,
    MAX_SEED,
    MIN_SEED,
)
from ..core.shown import shown

__all__ = ["InputPath", "Name", "Seed", "Template", "check_template", "path_problem"]

#: C0 and C1 control characters and DEL: in no path or name
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROL_NAMES = {0: "NUL", 9: "a tab", 10: "a newline", 13: "a carriage return", 27: "ESC"}


def _control(value: str) -> str | None:
    m = _CONTROL.search(value)
    if m is None:
        return None
    c = ord(m.group(0))
    return f"{_CONTROL_NAMES.get(c, 'a control character')} (\\x{c:02x}) at character {m.start() + 1}"


def path_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a path or URI (a control character, longer than the file system takes), or
    None."""
    if not isinstance(value, str):
        return None
    if len(value) <= MAX_PATH_PART_CHARS and value.isascii() and value.isprintable():
        return None  # the common case, at once: short, and no control character
    bad = _control(value)
    if bad:
        return f"a path holds {bad}"
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_CHARS:
        return f"a path of {size:,} bytes; paths hold at most {MAX_PATH_CHARS:,} (the limit)"
    part = max(value.split("/"), key=len)
    if len(part.encode("utf-8", "surrogatepass")) > MAX_PATH_PART_CHARS:
        return (f"a path whose part {shown(part, 40)} is {len(part.encode('utf-8', 'surrogatepass')):,} bytes; "
                f"a file or folder name holds at most {MAX_PATH_PART_CHARS} (the limit)")
    return None


def _path(value: str) -> str:
    problem = path_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _name(value: str) -> str:
    bad = _control(value)
    if bad:
        raise ValueError(f"a name holds {bad}")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"a name of {len(value):,} characters; names hold at most {MAX_NAME_CHARS:,} (the limit)")
    return value


#: ``{{ anything }}``: a placeholder, or something meant as one
_BRACES = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_FIELD_PATH = re.compile(r"[A-Za-z_][\w.]*")


def check_template(value: str) -> str:
    """A prompt template: every ``{{ ... }}`` that starts like a field name is a field path
    (``{{ question }}``, ``{{ meta.topic }}``); a filter or an expression (``{{ q | upper }}``) would be
    sent to the model as it stands, so it is an error. Braces around anything else (``{{"a": 1}}``) are
    text."""
    for m in _BRACES.finditer(value):
        inner = m.group(1).strip()
        if inner and re.match(r"[A-Za-z_]", inner) and not _FIELD_PATH.fullmatch(inner):
            raise ValueError(f"{shown(m.group(0), 60)} is not a placeholder: a template takes '{{{{ field }}}}' "
                             "or '{{ field.sub }}'; filters and expressions are not supported")
    return value


InputPath = Annotated[str, AfterValidator(_path)]
Name = Annotated[str, AfterValidator(_name)]
Seed = Annotated[int, Field(ge=MIN_SEED, le=MAX_SEED)]
Template = Annotated[str, AfterValidator(check_template)]
