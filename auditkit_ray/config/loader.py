"""Load run and sweep files (YAML or JSON) into validated specs.

Every error names the file, the field path and, where YAML gives one, the
line. ``${VAR}`` and ``${VAR:-default}`` are expanded in backend settings
(``model``); ``$${`` writes a literal ``${``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..core.secrets import is_secret_key, remember_secret
from ..errors import ConfigError
from .models import RunSpec, SweepSpec

_VAR = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: sections in which ${VAR} is expanded
EXPAND_SECTIONS = ("model", "judges")


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. (YAML 1.1 reads ``on``, ``off``,
    ``yes`` and ``no`` as booleans, which would turn ``on: extracted`` into
    ``True: extracted``.)"""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class _Lines:
    """Maps a field path to a line number through the composed YAML node tree."""

    def __init__(self, node: yaml.Node | None):
        self.root = node

    def line(self, loc: tuple) -> int | None:
        node = self.root
        found = node.start_mark.line + 1 if node is not None else None
        for key in loc:
            if isinstance(node, yaml.MappingNode):
                nxt = None
                for k, v in node.value:
                    if getattr(k, "value", None) == str(key):
                        nxt = v
                        found = k.start_mark.line + 1
                        break
                node = nxt
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
                node = node.value[key]
                found = node.start_mark.line + 1
            else:
                break
            if node is None:
                break
        return found


def fmt_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def read_document(path: str | os.PathLike) -> tuple[Any, _Lines]:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: config file is not UTF-8 (byte {exc.start})") from None
    if p.suffix.lower() == ".json":
        try:
            return json.loads(text), _Lines(None)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{p}{where}: invalid YAML: {problem}") from None
    return data, _Lines(node)


def expand_env(obj: Any, loc: tuple = (), env: dict[str, str] | None = None) -> Any:
    env = os.environ if env is None else env
    if isinstance(obj, dict):
        return {k: expand_env(v, loc + (k,), env) for k, v in obj.items()}
    if isinstance(obj, list):
        return [expand_env(v, loc + (i,), env) for i, v in enumerate(obj)]
    if not isinstance(obj, str) or "${" not in obj:
        return obj
    secretish = any(isinstance(k, str) and is_secret_key(k) for k in loc)

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

    return _VAR.sub(sub, obj)


def _with_env(data: Any, source: str, lines: "_Lines | None" = None) -> Any:
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for section in EXPAND_SECTIONS:
        if section in out:
            try:
                out[section] = expand_env(out[section], (section,))
            except ConfigError as exc:
                line = lines.line(getattr(exc, "loc", ())) if lines else None
                raise ConfigError(f"{source}{':' + str(line) if line else ''}: {exc}") from None
    return out


def _validation_message(exc: ValidationError, source: str, lines: _Lines, prefix: tuple = ()) -> str:
    msgs = []
    for err in exc.errors()[:5]:
        loc = _drop_union_tags(tuple(err["loc"]))
        full = prefix + loc
        line = lines.line(full)
        where = f"{source}:{line}" if line else source
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        inp = err.get("input")
        if err["type"] not in ("missing", "extra_forbidden") and isinstance(inp, (str, int, float, bool)):
            msg += f" (got {inp!r})"
        msgs.append(f"{where}: {fmt_loc(full)}: {msg}")
    more = len(exc.errors()) - 5
    if more > 0:
        msgs.append(f"... and {more} more")
    return "\n".join(msgs)


_UNION_TAGS = {
    "echo", "simulated", "hf", "precomputed", "agent", "vllm", "api", "command", "regex", "strip_reasoning", "take_first", "model",
    "function-after", "function-before",
}


def _drop_union_tags(loc: tuple) -> tuple:
    """pydantic puts the discriminator's value in an error's path
    (``model.echo.batch_size``); drop it, but only right after a union field
    (``model``) or a list index (``annotators[0]``), never a field that shares
    a tag's name."""
    out: list = []
    for i, part in enumerate(loc):
        after_union = i > 0 and (loc[i - 1] == "model" or isinstance(loc[i - 1], int))
        if isinstance(part, str) and part in _UNION_TAGS and after_union:
            continue
        out.append(part)
    return tuple(out)


def _check_metrics(spec: RunSpec, source: str, lines: _Lines, prefix: tuple = ()) -> None:
    from ..core.registry import build_metric

    for i, m in enumerate(spec.metrics):
        try:
            params = dict(m.params)
            if m.on is not None:
                params["on"] = m.on
            build_metric(m.name, params, m.as_)
        except ConfigError as exc:
            loc = prefix + ("metrics", i)
            line = lines.line(loc)
            where = f"{source}:{line}" if line else source
            raise ConfigError(f"{where}: {fmt_loc(loc)}: {exc}") from None


def run_spec_from_dict(data: Any, source: str = "<config>", lines: _Lines | None = None, prefix: tuple = ()) -> RunSpec:
    lines = lines or _Lines(None)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a run file must be a mapping, got {type(data).__name__}")
    data = _with_env(data, source, lines)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_validation_message(exc, source, lines, prefix)) from None
    _check_metrics(spec, source, lines, prefix)
    return spec


def is_sweep(data: Any) -> bool:
    return isinstance(data, dict) and "base" in data


def load_run_spec(path: str | os.PathLike) -> RunSpec:
    data, lines = read_document(path)
    if is_sweep(data):
        raise ConfigError(f"{path}: this is a sweep file (it has 'base'); use `auditkit-ray sweep`")
    return run_spec_from_dict(data, str(path), lines)


def load_sweep_spec(path: str | os.PathLike) -> SweepSpec:
    data, lines = read_document(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a sweep file must be a mapping, got {type(data).__name__}")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_validation_message(exc, str(path), lines)) from None


def load_config(path: str | os.PathLike) -> RunSpec | SweepSpec:
    """A run or a sweep, told apart by the sweep's ``base`` key. A sweep is
    also expanded once so that every run it makes is validated."""
    data, lines = read_document(path)
    if is_sweep(data):
        sweep = load_sweep_spec(path)
        from .sweep import expand

        expand(sweep, source=str(path), lines=lines)
        return sweep
    return run_spec_from_dict(data, str(path), lines)
