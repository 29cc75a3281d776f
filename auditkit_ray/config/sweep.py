"""Sweep expansion: base x (explicit runs) x (grid product) -> RunSpecs."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from ..errors import ConfigError
from .documents import Lines
from .models import RunSpec, SweepSpec
from .validate import run_spec_from_dict


def set_path(data: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = data
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[part] = nxt
        cur = nxt
    cur[parts[-1]] = copy.deepcopy(value)


def deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in override.items():
        if "." in k:
            set_path(out, k, v)
        elif isinstance(v, dict) and isinstance(out.get(k), dict) and "type" not in v:
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _label(value: Any) -> str:
    if isinstance(value, dict):
        return "-".join(f"{k}={_label(v)}" for k, v in value.items())
    if isinstance(value, str):
        return value.rstrip("/").split("/")[-1]
    return str(value)


class _GridLines:
    """Lines of a sweep file for its expanded runs: a field a grid key sets is reported at the line of that
    grid value (where the mistake is), a field an entry of ``runs`` sets at that entry's key, not at the base
    section they land in."""

    def __init__(self, lines: Any, keys: list[str]) -> None:
        self.lines = lines
        self.keys = {tuple(k.split(".")): k for k in keys}
        self.combo: tuple[int, ...] = ()  # the index of each grid key's value in the run being validated
        self.run: int | None = None  # its entry of runs
        self.override: dict = {}

    def line(self, loc: tuple) -> int | None:
        where = self._where(loc)
        return self.lines.line(where if where is not None else loc)

    def shown(self, loc: tuple) -> str | None:
        """The field path as the sweep file holds it (``grid.generation.temperature[2]``,
        ``runs[1].generation.max_new_tokens``); None where the base holds it."""
        from ..core.envvars import fmt_loc

        where = self._where(loc)
        if where is None:
            return None
        if where[0] == "grid":
            return f"grid.{where[1]}" + (f"[{where[2]}]" if len(where) > 2 else "")
        return fmt_loc(where)

    def _where(self, loc: tuple) -> tuple | None:
        path = tuple(str(x) for x in loc[1:]) if loc[:1] == ("base",) else ()
        for k, (parts, key) in enumerate(self.keys.items()):
            if path[: len(parts)] == parts:
                return ("grid", key, self.combo[k]) if k < len(self.combo) else ("grid", key)
        if path and self.run is not None:
            for key in self.override:
                parts = tuple(key.split("."))
                if path[: len(parts)] == parts:  # a key of the entry, dotted or not ('generation.max_new_tokens')
                    return ("runs", self.run, key, *path[len(parts):])
        return None


def expand(sweep: SweepSpec, source: str = "<sweep>", lines: Any = None) -> list[RunSpec]:
    keys = list(sweep.grid)
    lines = _GridLines(lines or Lines(None), keys)
    combos = list(itertools.product(*(range(len(sweep.grid[k])) for k in keys))) or [()]
    explicit = sweep.runs or [{}]
    runs: list[RunSpec] = []
    for i, override in enumerate(explicit):
        for at in combos:
            combo = tuple(sweep.grid[k][j] for k, j in zip(keys, at))
            lines.combo, lines.run, lines.override = at, (i if sweep.runs else None), override
            data = deep_merge(sweep.base, override)
            for k, v in zip(keys, combo):
                set_path(data, k, v)
            labels = [f"{k.split('.')[-1]}={_label(v)}" for k, v in zip(keys, combo)]
            head = override.get("name") or sweep.base.get("name") or sweep.name
            data["name"] = "/".join([head] + labels)
            where = f"{source} (run {len(runs)}: {data['name']})"
            runs.append(run_spec_from_dict(data, where, lines, prefix=("base",)))
    names = [r.name for r in runs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"{source}: sweep expands to runs with the same name: {sorted(dup)}")
    base = sweep.decision.baseline if sweep.decision is not None else None
    if base is not None and base not in names:
        at = lines.lines.line(("decision", "baseline"))
        raise ConfigError(f"{source}{f':{at}' if at else ''}: decision.baseline {base!r} is not a run of "
                          f"the sweep (runs: {', '.join(names)})")
    return runs
