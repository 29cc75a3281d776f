"""Validate a run file's content into a ``RunSpec``: ``${VAR}`` expanded in
the backend and judge sections and in every path, every error naming the
file, the line and the field path, and every metric resolved."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from ..core.backends import backend_types
from ..core.envvars import expand_env, fmt_loc
from ..core.shown import shown, shown_text
from ..core.strict import FieldError
from ..core.suggest import did_you_mean
from ..errors import ConfigError
from .documents import Lines
from .fields import path_problem
from .models import RunSpec, SweepSpec

__all__ = ["EXPAND_SECTIONS", "PATH_SETTINGS", "check_paths", "run_spec_from_dict", "validation_message",
           "with_env"]

#: sections in which ${VAR} is expanded
EXPAND_SECTIONS = ("model", "judges")


#: paths in which ${VAR} is expanded too, outside those sections
EXPAND_PATHS = ("dataset.path", "prompt.few_shot.path", "retrieval.corpus", "store.path")


def with_env(data: Any, source: str, lines: "Lines | None" = None, prefix: tuple = ()) -> Any:
    """``data`` with ``${VAR}`` expanded where it expands; the caller's document stays as written (what
    changes is copied: a section expanded is rebuilt, a path's mappings are copied along it)."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    try:
        for section in EXPAND_SECTIONS:
            if section in out:
                out[section] = expand_env(out[section], (section,))
        for dotted in EXPAND_PATHS:
            parts = dotted.split(".")
            node = out
            for part in parts[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict) and isinstance(node.get(parts[-1]), str) and "${" in node[parts[-1]]:
                value = expand_env(node[parts[-1]], tuple(parts))
                node = out
                for part in parts[:-1]:
                    node[part] = dict(node[part])
                    node = node[part]
                node[parts[-1]] = value
    except ConfigError as exc:
        line = lines.line(prefix + tuple(getattr(exc, "loc", ()))) if lines else None
        raise ConfigError(f"{source}{':' + str(line) if line else ''}: {exc}") from None
    return out


#: every setting that names a file, a folder or a URI: checked as a path before anything looks it up
PATH_SETTINGS = ("dataset.path", "model.path", "prompt.few_shot.path", "retrieval.corpus", "store.path", "tracking.db")


def check_paths(data: Any, source: str, lines: "Lines | None" = None, prefix: tuple = ()) -> None:
    """Each path setting of a run document that no file system takes (a NUL or ESC in it, a name longer than
    the limits): a ``ConfigError`` at its line, before ``os.stat`` would raise on it."""
    if not isinstance(data, dict):
        return
    for dotted in PATH_SETTINGS:
        node: Any = data
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        problem = path_problem(node)
        if problem:
            loc = prefix + tuple(dotted.split("."))
            line = lines.line(loc) if lines is not None else None
            raise ConfigError(f"{source}{f':{line}' if line else ''}: {dotted}: {problem}")


def validation_message(exc: ValidationError, source: str, lines: Lines, prefix: tuple = (),
                       root: type = RunSpec) -> str:
    """One line: the file, the line, the field path and what is wrong with the first error, then the field
    paths of the others (three at most). ``root`` is the model validated (a run, or a sweep): an unknown
    field's suggestions are the names accepted where it stands."""
    errors = exc.errors()
    where, first = _one_error(errors[0], source, lines, prefix, root)
    msg = f"{where}: {first}"
    loc = _drop_union_tags(tuple(errors[0]["loc"]))
    same = [e for e in errors[1:] if _drop_union_tags(tuple(e["loc"])) == loc]  # other members of a union
    if same:
        msg += f"; or: {_message(same[0])}"
    others = [e for e in errors[1:] if _drop_union_tags(tuple(e["loc"])) != loc]
    if others:
        locs = list(dict.fromkeys(fmt_loc(prefix + _drop_union_tags(tuple(e["loc"]))) for e in others))
        more = f", and {len(locs) - 3} more" if len(locs) > 3 else ""
        msg += f" (and {len(others)} more: {', '.join(locs[:3])}{more})"
    return msg


def _message(err: Any) -> str:
    """What pydantic says is wrong, without its "Value error, " for a check of ours."""
    about = (err.get("ctx") or {}).get("error")
    if err["type"] == "value_error" and about is not None:
        return shown_text(str(about), 300)
    return shown_text(err["msg"], 300)


def _one_error(err: Any, source: str, lines: Lines, prefix: tuple, root: type) -> tuple[str, str]:
    """(file and line, "field.path: what is wrong") of one pydantic error."""
    loc = _drop_union_tags(tuple(err["loc"]))
    if err["type"] == "union_tag_invalid":  # the line of the tag itself ("type: ehco")
        loc += (str((err.get("ctx") or {}).get("discriminator", "type")).strip("'"),)
    msg = _message(err)
    about = (err.get("ctx") or {}).get("error")
    if isinstance(about, FieldError):  # a model's check about one of its fields: reported at that field
        loc += (about.field,)
    if err["type"] == "value_error":  # our own check: its message says what the value is
        err = {**err, "input": None}
    full = prefix + loc
    line = lines.line(full)
    where = f"{source}:{line}" if line else source
    if err["type"] == "extra_forbidden":
        msg = _unknown_field(str(err["loc"][-1]), tuple(err["loc"][:-1]), root)
    elif err["type"] == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        tags = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip(" '")]
        tag = str(ctx.get("tag"))
        msg = f"unknown {loc[-1]} {shown(tag, 40)}{did_you_mean(tag[:200], tags)} (one of: {', '.join(tags)})"
        err = {**err, "input": None}
    elif err["type"] == "missing":
        msg = "required field is missing"
    inp = err.get("input")
    if err["type"] not in ("missing", "extra_forbidden") and isinstance(inp, (str, int, float, bool)):
        msg += f" (got {shown(inp, 60)})"
    named = getattr(lines, "shown", None)  # a sweep's lines name a grid value or a runs entry as the file does
    return where, f"{(named(full) if named else None) or fmt_loc(full)}: {msg}"


def _unknown_field(name: str, loc: tuple, root: type) -> str:
    if root is SweepSpec and not loc and name in RunSpec.model_fields:
        return f"unknown field at the top of a sweep: a run's settings go under base (base.{name})"
    return "unknown field" + did_you_mean(name[:200], [f for f in _fields_at(loc, root) if f != name])


def _fields_at(loc: tuple, root: type) -> list[str]:
    """The field names the model at ``loc`` (pydantic's path, union tags included) below ``root`` accepts: for
    suggestions."""
    import typing

    from pydantic import BaseModel

    from ..core.backends import backend_settings

    def tag_of(m: Any) -> Any:
        field = m.model_fields.get("type")
        args = typing.get_args(field.annotation) if field is not None else ()
        return args[0] if len(args) == 1 else None

    models: list[Any] = [root]  # the models that may stand at this point (a union's members)
    for part in loc:
        if isinstance(part, int):
            continue
        field = next((m.model_fields[part] for m in models if part in m.model_fields), None)
        if field is None:  # a union tag: the member named by it (an annotator's type), or a backend's settings
            tagged = [m for m in models if tag_of(m) == part]
            if tagged:
                models = tagged
                continue
            try:
                models = [backend_settings(part)]
                continue
            except Exception:  # noqa: BLE001 - not a backend tag: no suggestion
                return []
        models, todo = [], [field.annotation]
        while todo:
            t = todo.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                models.append(t)
            else:
                todo.extend(typing.get_args(t))
    if len(models) != 1:
        return []
    return [f.alias or name for name, f in models[0].model_fields.items()]  # as a file writes them ('as')


#: tags pydantic puts in an error's path besides the backend types
_OTHER_TAGS = {"regex", "strip_reasoning", "take_first", "model", "function-after", "function-before"}


def _drop_union_tags(loc: tuple) -> tuple:
    """pydantic puts the discriminator's value in an error's path
    (``model.echo.batch_size``); drop it, but only right after a union field
    (``model``) or a list index (``annotators[0]``), never a field that shares
    a tag's name."""
    tags = _OTHER_TAGS | set(backend_types())
    out: list = []
    for i, part in enumerate(loc):
        after_union = i > 0 and (loc[i - 1] == "model" or isinstance(loc[i - 1], int))
        if isinstance(part, str) and part in tags and after_union:
            continue
        if i > 0 and isinstance(part, str) and _MEMBER.match(part):  # a plain union's member: `select: first | int`
            continue
        out.append(part)
    return tuple(out)


#: how pydantic names the members of a plain union in an error's path (``literal['first','last']``,
#: ``constrained-int``, ``int``): never a field of ours, whose names are identifiers
_MEMBER = re.compile(r"^(?:int|float|str|bool|none|constrained-(?:int|float|str)|"
                     r"(?:literal|function-(?:after|before|wrap|plain)|list|dict|tagged-union)\[.*\])$")


def _check_metrics(spec: RunSpec, source: str, lines: Lines, prefix: tuple = (),
                   checked: set[str] | None = None) -> None:
    """Each metric builds; ``checked``: the settings already built once (a sweep's runs share most)."""
    import json

    from ..core.registry import build_metric

    for i, m in enumerate(spec.metrics):
        params = dict(m.params)
        if m.on is not None:
            params["on"] = m.on
        key = None
        if checked is not None:
            try:
                key = f"{m.name}\0{m.as_}\0{m.on}\0{json.dumps(m.params, sort_keys=True) if m.params else ''}"
            except (TypeError, ValueError):
                key = None
            if key in checked:
                continue
        try:
            build_metric(m.name, params, m.as_)
            if key is not None:
                checked.add(key)
        except ConfigError as exc:
            loc = prefix + ("metrics", i)
            line = lines.line(loc)
            where = f"{source}:{line}" if line else source
            raise ConfigError(f"{where}: {fmt_loc(loc)}: {exc}") from None


def run_spec_from_dict(data: Any, source: str = "<config>", lines: Lines | None = None, prefix: tuple = (),
                       checked: set[str] | None = None, env: bool = True) -> RunSpec:
    """A validated run from a run file's content. ``checked``: metric settings built already; ``env=False``:
    ``${VAR}`` expanded already (``with_env``; ``expand`` does it once for all the runs of a sweep)."""
    lines = lines or Lines(None)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a run file must be a mapping, got {type(data).__name__}")
    if env:
        data = with_env(data, source, lines, prefix)
    check_paths(data, source, lines, prefix)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, source, lines, prefix)) from None
    _check_metrics(spec, source, lines, prefix, checked)
    return spec
