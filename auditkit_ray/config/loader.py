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
from ..core.shown import shown, shown_text
from ..errors import ConfigError
from .documents import Lines, read_document, read_value
from .models import RunSpec, SweepSpec
from .paths import anchor_run_paths, anchor_sweep_paths
from .sweep import expand
from .validate import EXPAND_SECTIONS, PATH_SETTINGS, check_paths, run_spec_from_dict, validation_message

__all__ = ["EXPAND_SECTIONS", "Lines", "expand_env", "fmt_loc", "is_sweep", "load_config", "load_config_runs",
           "load_run_spec", "load_sweep_spec", "setting_line", "parse_overrides", "read_document", "run_spec_from_dict"]


def is_sweep(data: Any) -> bool:
    return isinstance(data, dict) and "base" in data


def parse_overrides(items: list[str] | None) -> list[tuple[str, Any]]:
    """``["generation.temperature=0.7", ...]`` (``--set``) as (dotted key, value); values read as YAML
    scalars or flow collections (``0.7``, ``true``, ``[a, b]``), as the file would hold them, under the
    file's rules (``read_value``); text that is no YAML at all is taken as a string."""
    out = []
    for item in items or []:
        key, sep, raw = str(item).partition("=")
        if not sep or not key.strip() or any(not p for p in key.strip().split(".")):
            raise ConfigError(f"--set {shown(str(item))}: expected KEY=VALUE with a dotted key "
                              "(generation.temperature=0.7)")
        try:
            value = read_value(raw, f"--set {shown_text(key.strip(), 60)}") if raw.strip() else ""
        except ConfigError as exc:
            if not getattr(exc, "syntax", False):
                raise
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
    check_paths(data, path_label, lines)
    return run_spec_from_dict(anchor_run_paths(data, path), path_label, lines)


def _check_sweep_paths(data: dict, source: str, lines: Lines) -> None:
    """The path settings of a sweep's base, explicit runs and grid, before they are resolved."""
    from .fields import path_problem

    check_paths(data.get("base"), source, lines, ("base",))
    runs = data.get("runs")
    for i, run in enumerate(runs if isinstance(runs, list) else []):
        check_paths(run, source, lines, ("runs", i))
    grid = data.get("grid")
    for key, values in (grid.items() if isinstance(grid, dict) else []):
        for value in values if key in PATH_SETTINGS and isinstance(values, list) else []:
            problem = path_problem(value)
            if problem:
                line = lines.line(("grid", key))
                raise ConfigError(f"{source}{f':{line}' if line else ''}: grid {key}: {problem}")


def _sweep_spec(data: dict, path: str | os.PathLike, lines: Lines) -> SweepSpec:
    _check_sweep_paths(data, str(path), lines)
    try:
        return SweepSpec.model_validate(anchor_sweep_paths(data, path))
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, str(path), lines, root=SweepSpec)) from None


def load_sweep_spec(path: str | os.PathLike) -> SweepSpec:
    """A sweep file, validated but not expanded (``expand``; ``load_config_runs`` does both)."""
    data, lines = read_document(path)
    return _sweep_spec(data, path, lines)


def load_config_runs(path: str | os.PathLike) -> tuple[RunSpec | SweepSpec, list[RunSpec], Lines]:
    """A run or a sweep file, told apart by the sweep's ``base`` key, the runs it makes (the run, or the
    sweep's expansion, each validated) and its lines: the file is read once and a sweep expanded once."""
    data, lines = read_document(path)
    if is_sweep(data):
        sweep = _sweep_spec(data, path, lines)
        return sweep, expand(sweep, source=str(path), lines=lines), lines
    check_paths(data, str(path), lines)
    run = run_spec_from_dict(anchor_run_paths(data, path), str(path), lines)
    return run, [run], lines


def load_config(path: str | os.PathLike) -> RunSpec | SweepSpec:
    """A run or a sweep, told apart by the sweep's ``base`` key. A sweep is
    also expanded once so that every run it makes is validated."""
    return load_config_runs(path)[0]


def setting_line(spec: RunSpec | SweepSpec, lines: Lines | None, dotted: str) -> int | None:
    """The line of a file that sets ``dotted`` (``dataset.path``) for ``spec``'s runs: a sweep's grid key
    that sets it, else its base's where the base sets it; None without lines or one line."""
    if lines is None:
        return None
    if isinstance(spec, SweepSpec):
        for key in spec.grid:
            if dotted == key or dotted.startswith(key + "."):
                return lines.line(("grid", key))
        base = spec.base
        for part in dotted.split("."):
            if not isinstance(base, dict) or part not in base:
                return None  # set in the explicit runs, or by default: no one line
            base = base[part]
        return lines.line(("base", *dotted.split(".")))
    return lines.line(tuple(dotted.split(".")))
