"""Validate a run file's content into a ``RunSpec``: ``${VAR}`` expanded in
the backend and judge sections and in every path, every error naming the
file, the line and the field path, and every metric resolved."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from ..core.backends import backend_types
from ..core.envvars import expand_env, fmt_loc
from ..core.suggest import did_you_mean
from ..errors import ConfigError
from .documents import Lines
from .models import RunSpec, SweepSpec

__all__ = ["EXPAND_SECTIONS", "run_spec_from_dict", "validation_message"]

#: sections in which ${VAR} is expanded
EXPAND_SECTIONS = ("model", "judges")


#: paths in which ${VAR} is expanded too, outside those sections
EXPAND_PATHS = ("dataset.path", "prompt.few_shot.path", "retrieval.corpus", "store.path")


def _with_env(data: Any, source: str, lines: "Lines | None" = None) -> Any:
    if not isinstance(data, dict):
        return data
    out = copy.deepcopy(data)  # the caller's document stays as written
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
                node[parts[-1]] = expand_env(node[parts[-1]], tuple(parts))
    except ConfigError as exc:
        line = lines.line(getattr(exc, "loc", ())) if lines else None
        raise ConfigError(f"{source}{':' + str(line) if line else ''}: {exc}") from None
    return out


def validation_message(exc: ValidationError, source: str, lines: Lines, prefix: tuple = (),
                       root: type = RunSpec) -> str:
    """One line per error (five at most): the file, the line, the field path and what is wrong. ``root`` is the
    model validated (a run, or a sweep): an unknown field's suggestions are the names accepted where it stands."""
    msgs = []
    for err in exc.errors()[:5]:
        loc = _drop_union_tags(tuple(err["loc"]))
        if err["type"] == "union_tag_invalid":  # the line of the tag itself ("type: ehco")
            loc += (str((err.get("ctx") or {}).get("discriminator", "type")).strip("'"),)
        full = prefix + loc
        line = lines.line(full)
        where = f"{source}:{line}" if line else source
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = _unknown_field(str(loc[-1]), tuple(err["loc"][:-1]), root)
        elif err["type"] == "union_tag_invalid":
            ctx = err.get("ctx") or {}
            tags = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip(" '")]
            msg = (f"unknown {loc[-1]} {ctx.get('tag')!r}"
                   f"{did_you_mean(str(ctx.get('tag')), tags)} (one of: {', '.join(tags)})")
            err = {**err, "input": None}
        elif err["type"] == "missing":
            msg = "required field is missing"
        inp = err.get("input")
        if err["type"] not in ("missing", "extra_forbidden") and isinstance(inp, (str, int, float, bool)):
            msg += f" (got {inp!r})"
        shown = getattr(lines, "shown", None)  # a sweep's lines name a grid value or a runs entry as the file does
        msgs.append(f"{where}: {(shown(full) if shown else None) or fmt_loc(full)}: {msg}")
    more = len(exc.errors()) - 5
    if more > 0:
        msgs.append(f"... and {more} more")
    return "\n".join(msgs)


def _unknown_field(name: str, loc: tuple, root: type) -> str:
    if root is SweepSpec and not loc and name in RunSpec.model_fields:
        return f"unknown field at the top of a sweep: a run's settings go under base (base.{name})"
    return "unknown field" + did_you_mean(name, [f for f in _fields_at(loc, root) if f != name])


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
        out.append(part)
    return tuple(out)


def _check_metrics(spec: RunSpec, source: str, lines: Lines, prefix: tuple = ()) -> None:
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


def run_spec_from_dict(data: Any, source: str = "<config>", lines: Lines | None = None, prefix: tuple = ()) -> RunSpec:
    lines = lines or Lines(None)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a run file must be a mapping, got {type(data).__name__}")
    data = _with_env(data, source, lines)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, source, lines, prefix)) from None
    _check_metrics(spec, source, lines, prefix)
    return spec
