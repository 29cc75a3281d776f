"""Load run and sweep files (YAML or JSON) into validated specs.

Every error names the file, the field path and, where YAML gives one, the
line. ``${VAR}`` and ``${VAR:-default}`` are expanded in backend settings
(``model``); ``$${`` writes a literal ``${``. Reading a document is
``documents``, validating a run ``validate``, expanding a sweep ``sweep``.
"""

from __future__ import annotations

import copy
import os
import re
from typing import Any

from pydantic import ValidationError

from ..core.envvars import expand_env, fmt_loc
from ..errors import ConfigError
from .documents import Lines, read_document
from .models import RunSpec, SweepSpec
from .paths import anchor_run_paths, anchor_sweep_paths
from .sweep import expand
from .validate import EXPAND_SECTIONS, run_spec_from_dict, validation_message

__all__ = ["EXPAND_SECTIONS", "Lines", "expand_env", "fmt_loc", "is_sweep", "load_config", "load_run_spec",
           "load_sweep_spec", "parse_overrides", "read_document", "run_spec_from_dict"]


def is_sweep(data: Any) -> bool:
    return isinstance(data, dict) and "base" in data


def parse_overrides(items: list[str] | None) -> list[tuple[str, Any]]:
    """``["generation.temperature=0.7", ...]`` (``--set``) as (dotted key, value); values read as YAML
    scalars or flow collections (``0.7``, ``true``, ``[a, b]``), as the file would hold them."""
    import yaml

    out = []
    for item in items or []:
        key, sep, raw = str(item).partition("=")
        if not sep or not key.strip() or any(not p for p in key.strip().split(".")):
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE with a dotted key (generation.temperature=0.7)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out.append((key.strip(), value))
    return out


_STEP = re.compile(r"^([^\[\]]+)((?:\[\d+\])*)$")


def apply_override(data: dict, key: str, value: Any) -> None:
    """``--set KEY=VALUE`` on a document: ``KEY`` a dotted path whose parts may index a list
    (``metrics[0].name``); an index must name an item the list has, and a metric written as a name alone
    (``- exact_match``) becomes a mapping when a field of it is set."""
    steps: list[Any] = []
    for part in key.split("."):
        m = _STEP.match(part)
        if m is None:
            raise ConfigError(f"--set {key}: {part!r} is not a field name or NAME[INDEX]")
        steps.append(m.group(1))
        steps += [int(i) for i in re.findall(r"\d+", m.group(2))]
    cur: Any = data
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        if isinstance(step, int):
            if not isinstance(cur, list):
                raise ConfigError(f"--set {key}: {_shown(steps[:i])} is not a list, so it has no item [{step}]")
            if step >= len(cur):
                raise ConfigError(f"--set {key}: index {step} is out of range ({_shown(steps[:i])} has "
                                  f"{len(cur)} item{'s' if len(cur) != 1 else ''}: [0] to [{len(cur) - 1}])"
                                  if cur else f"--set {key}: index {step} is out of range ({_shown(steps[:i])} is "
                                  "empty)")
            if last:
                cur[step] = copy.deepcopy(value)
                return
            if isinstance(cur[step], str) and steps[0] == "metrics":  # '- exact_match' is {name: exact_match}
                cur[step] = {"name": cur[step]}
        else:
            if not isinstance(cur, dict):
                raise ConfigError(f"--set {key}: {_shown(steps[:i])} is {cur!r}, not a mapping with fields")
            if last:
                cur[step] = copy.deepcopy(value)
                return
            if not isinstance(cur.get(step), (dict, list)):
                cur[step] = {}
        cur = cur[step]


def _shown(steps: list[Any]) -> str:
    return "".join(f"[{s}]" if isinstance(s, int) else (f".{s}" if k else s) for k, s in enumerate(steps))


class _OverriddenLines:
    """Lines of a file for fields given on the command line: those are named by their ``--set``."""

    def __init__(self, lines: Lines, keys: list[str]) -> None:
        self.lines, self.keys = lines, [tuple(k.split(".")) for k in keys]

    def line(self, loc: tuple) -> int | None:
        path = tuple(str(x) for x in loc)
        if any(path[: len(k)] == k for k in self.keys):
            return None
        return self.lines.line(loc)


def load_run_spec(path: str | os.PathLike, overrides: list[tuple[str, Any]] | None = None) -> RunSpec:
    """A run file, with ``overrides`` (``parse_overrides``) applied as if the file held them."""
    data, lines = read_document(path)
    if is_sweep(data):
        raise ConfigError(f"{path}: this is a sweep file (it has 'base'); use `auditkit-ray sweep`")
    if overrides:
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: a run file must be a mapping, got {type(data).__name__}")
        for key, value in overrides:
            apply_override(data, key, value)
        lines = _OverriddenLines(lines, [k for k, _ in overrides])
        path_label = f"{path} (with --set {', '.join(k for k, _ in overrides)})"
    else:
        path_label = str(path)
    return run_spec_from_dict(anchor_run_paths(data, path), path_label, lines)


def load_sweep_spec(path: str | os.PathLike) -> SweepSpec:
    data, lines = read_document(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a sweep file must be a mapping, got {type(data).__name__}")
    try:
        return SweepSpec.model_validate(anchor_sweep_paths(data, path))
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, str(path), lines, root=SweepSpec)) from None


def load_config(path: str | os.PathLike) -> RunSpec | SweepSpec:
    """A run or a sweep, told apart by the sweep's ``base`` key. A sweep is
    also expanded once so that every run it makes is validated."""
    data, lines = read_document(path)
    if is_sweep(data):
        sweep = load_sweep_spec(path)
        expand(sweep, source=str(path), lines=lines)
        return sweep
    return run_spec_from_dict(anchor_run_paths(data, path), str(path), lines)
