"""``${VAR}`` and ``${VAR:-default}`` in settings, expanded from the environment.

``$${`` writes a literal ``${``. A value read from a variable whose name (or
whose key) looks secret is remembered, so it is scrubbed from messages. The
config loader expands backend and judge sections with it; a backend or judge
that keeps ``${VAR}`` text in its settings (so that the fingerprint never
holds the value) expands it when it loads.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..errors import ConfigError
from .secrets import is_secret_key, remember_secret
from .shown import shown, shown_text

VAR = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def fmt_loc(loc: tuple) -> str:
    """A field path as written in messages: ``model.headers.Authorization``, ``metrics[1].name``; each key
    shortened and escaped (``core.shown``), and a path deeper than eight keys shown by its ends."""
    parts = [f"[{p}]" if isinstance(p, int) else shown_text(p, 40) for p in loc]
    if len(parts) > 8:
        parts = parts[:4] + [f"...({len(parts) - 7} more)..."] + parts[-3:]
    out = ""
    for part in parts:
        out += part if part.startswith("[") or not out else "." + part
    return out or "<root>"


def _check_references(text: str, loc: tuple) -> None:
    """Every ``${`` in ``text`` starts a reference (``${VAR}``, ``${VAR:-default}``) or is written ``$${``:
    a malformed one (``${VAR``, ``${1X}``, ``${VAR:default}``) would be kept as literal text, so it is an
    error naming the field."""
    covered = {m.start() + (1 if m.group(1) else 0) for m in VAR.finditer(text)}
    for m in re.finditer(r"\$\{", text):
        if m.start() not in covered and not (m.start() > 0 and text[m.start() - 1] == "$"):
            err = ConfigError(f"{fmt_loc(loc)}: {shown(text[m.start():m.start() + 200], 40)} is not a "
                              "variable reference: write ${VAR} or ${VAR:-default} (a literal ${ is written $${)")
            err.loc = loc
            raise err


def expand_env(obj: Any, loc: tuple = (), env: dict[str, str] | None = None) -> Any:
    """``obj`` with ``${VAR}`` expanded in every string, recursively. A variable
    that is not set and has no default raises ``ConfigError`` naming the field
    path (``loc`` is the path of ``obj``; the error carries it as ``.loc``)."""
    env = os.environ if env is None else env
    if isinstance(obj, dict):
        return {k: expand_env(v, loc + (k,), env) for k, v in obj.items()}
    if isinstance(obj, list):
        return [expand_env(v, loc + (i,), env) for i, v in enumerate(obj)]
    if not isinstance(obj, str) or "${" not in obj:
        return obj
    secretish = any(isinstance(k, str) and is_secret_key(k) for k in loc)
    _check_references(obj, loc)

    def sub(m: re.Match) -> str:
        if m.group(1):  # $${...} -> literal ${...}
            return m.group(0)[1:]
        var, default = m.group(2), m.group(3)
        if var in env:
            value = env[var]
        elif default is not None:
            value = default
        else:
            err = ConfigError(
                f"{fmt_loc(loc)}: environment variable {var} is not set "
                f"(set it, or write ${{{var}:-default}})"
            )
            err.loc = loc
            raise err
        if secretish or is_secret_key(var):
            remember_secret(value)
        return value

    return VAR.sub(sub, obj)
