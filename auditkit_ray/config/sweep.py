"""Sweep expansion: base x (explicit runs) x (grid product) -> RunSpecs."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from typing import Any

from ..core.envvars import fmt_loc
from ..core.gcpause import gc_paused
from ..core.limits import MAX_SWEEP_RUNS
from ..core.shown import shown, shown_text
from ..errors import ConfigError
from .documents import Lines
from .models import RunSpec, SweepSpec
from .validate import run_spec_from_dict, with_env


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
    """A grid value in a run's name: a path by its last part, a mapping as ``k=v-k=v``; control characters
    escaped, and a long one shortened with a hash of the whole, so that names stay short and distinct."""
    if isinstance(value, dict):
        text = "-".join(f"{k}={_label(v)}" for k, v in value.items())
    elif isinstance(value, str):
        text = value.rstrip("/").split("/")[-1]
    else:
        text = str(value) if isinstance(value, (int, float, bool)) or value is None else json.dumps(value, default=str)
    short = shown_text(text, LABEL_CHARS)
    if short != text:
        short += "~" + hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:8]
    return short


#: characters of one grid value in a run's name (a longer one is shortened and given a hash)
LABEL_CHARS = 60


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


def _where(source: str, lines: Any, loc: tuple) -> str:
    line = lines.line(loc) if lines is not None else None
    return f"{source}:{line}" if line else source


def _check_shape(sweep: SweepSpec, source: str, lines: Any) -> None:
    """What expansion needs before it starts: names that are strings, grid keys that are dotted paths, and a
    number of runs within the limit (counted, not made)."""
    named = [(("base", "name"), sweep.base.get("name"))]
    named += [(("runs", i, "name"), r.get("name")) for i, r in enumerate(sweep.runs)]
    for loc, value in named:
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{_where(source, lines, loc)}: {fmt_loc(loc)}: a run's name is a string "
                              f"(got {shown(value, 60)})")
    for key in sweep.grid:
        if not key or any(not part for part in key.split(".")):
            raise ConfigError(f"{_where(source, lines, ('grid', key))}: grid key {shown(key, 60)}: a dotted path "
                              "to a run setting (generation.temperature, model.path)")
    n = math.prod(len(v) for v in sweep.grid.values()) * max(1, len(sweep.runs))
    if n > MAX_SWEEP_RUNS:
        sizes = " x ".join(str(len(v)) for v in sweep.grid.values())
        runs = f" x {len(sweep.runs)} runs" if len(sweep.runs) > 1 else ""
        raise ConfigError(f"{_where(source, lines, ('grid',) if sweep.grid else ('runs',))}: the sweep expands to "
                          f"{n:,} runs ({sizes or '1'}{runs}); a sweep has at most {MAX_SWEEP_RUNS:,} (the limit)")


def _fresh_along(data: dict, parts: list[str]) -> None:
    """Copy, in ``data``, each mapping along ``parts`` (a grid key's path), so that setting the key changes
    this run's document and no other's: the rest is shared, never copied whole for each run."""
    cur = data
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            return
        cur[part] = nxt = dict(nxt)
        cur = nxt


def _get_path(data: dict, dotted: str) -> Any:
    for part in dotted.split("."):
        data = data[part]
    return data


def expand(sweep: SweepSpec, source: str = "<sweep>", lines: Any = None) -> list[RunSpec]:
    """The runs of a sweep: base, crossed with each explicit run, crossed with the grid's product, each
    validated as a run file (an error names the run and the line of what set the field). ``${VAR}`` is
    expanded once in each explicit run and once in each grid value, not once per run."""
    _check_shape(sweep, source, lines)
    with gc_paused():  # tens of thousands of runs stay alive: collections would walk them all, again and again
        return _expand(sweep, source, lines)


def _expand(sweep: SweepSpec, source: str, lines: Any) -> list[RunSpec]:
    keys = list(sweep.grid)
    paths = [k.split(".") for k in keys]
    lines = _GridLines(lines or Lines(None), keys)
    labels = [[f"{k.split('.')[-1]}={_label(v)}" for v in sweep.grid[k]] for k in keys]
    grid = []
    for k, lab in zip(keys, labels):
        values = []
        for v, label in zip(sweep.grid[k], lab):
            doc: dict = {}
            set_path(doc, k, v)
            values.append(_get_path(with_env(doc, f"{source} (grid value {label})", lines, ("base",)), k))
        grid.append(values)
    runs: list[RunSpec] = []
    named: dict[str, int] = {}
    checked: set[str] = set()  # metric settings already built once
    for r, override in enumerate(sweep.runs or [{}]):
        head = override.get("name") or sweep.base.get("name") or sweep.name
        first = "/".join([head] + [lab[0] for lab in labels])
        lines.combo, lines.run, lines.override = (), (r if sweep.runs else None), override
        merged = with_env(deep_merge(sweep.base, override), f"{source} (run {len(runs)}: {shown_text(first, 120)})",
                          lines, ("base",))
        for combo in itertools.product(*(range(len(values)) for values in grid)):
            lines.combo = combo
            data = dict(merged)
            for parts, k, values, i in zip(paths, keys, grid, combo):
                _fresh_along(data, parts)
                set_path(data, k, values[i])
            name = "/".join([head] + [labels[j][i] for j, i in enumerate(combo)])
            data["name"] = name
            if name in named:
                raise ConfigError(f"{source}: runs {named[name]} and {len(runs)} of the sweep have the same name "
                                  f"{shown(name, 120)}: give the explicit runs distinct names")
            named[name] = len(runs)
            where = f"{source} (run {len(runs)}: {shown_text(name, 120)})"
            runs.append(run_spec_from_dict(data, where, lines, prefix=("base",), checked=checked, env=False))
    base = sweep.decision.baseline if sweep.decision is not None else None
    if base is not None and base not in named:
        at = lines.lines.line(("decision", "baseline"))
        names = list(named)
        listed = ", ".join(shown_text(n, 80) for n in names[:20]) + (f", ... ({len(names)} in all)"
                                                                    if len(names) > 20 else "")
        raise ConfigError(f"{source}{f':{at}' if at else ''}: decision.baseline {base!r} is not a run of "
                          f"the sweep (runs: {listed})")
    return runs
