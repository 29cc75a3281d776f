"""Relative paths in a run or sweep file resolve against the file's folder (``RULE``, as the docs state it).

``dataset.path``, ``model.path``, ``prompt.few_shot.path`` and ``retrieval.corpus`` name inputs: a relative
one is taken from the folder of the file that names it (a ``--set`` value too, as if the file held it), so
``validate ../run.yaml`` and ``run ../run.yaml`` read what the file means from anywhere. Where the path does
not exist there but does from the working directory (files written for the repository root, like
``jobs/examples/*.yaml``), the working directory's is used. URIs (``s3://``), absolute paths, Hub ids and
``${VAR}`` references are left alone; so is ``store.path``, an output that need not exist yet.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: the rule, as every page that states it says it (docs/configuration.md and docs/models-and-data.md;
#: tests/docs/test_paths_rule.py holds them to it)
RULE = ("A relative input path (`dataset.path`, `model.path`, `prompt.few_shot.path`, `retrieval.corpus`), "
        "in a run or sweep file or given with `--set`, resolves against the folder of the file; only where "
        "nothing of that name is there but it exists from the working directory (files written for the "
        "repository root, like `jobs/examples/*.yaml`) is the working directory's used. `store.path`, an output, "
        "resolves against the working directory, as `--store` does. Fingerprints take inputs by their content, "
        "never by the path that named them, so a run has one fingerprint from any folder.")

#: the input paths of a run, as dotted keys
INPUT_PATHS = ("dataset.path", "model.path", "prompt.few_shot.path", "retrieval.corpus")


def anchored(value: Any, folder: Path) -> Any:
    """``value`` resolved against ``folder`` when it is a relative path that exists there."""
    if not isinstance(value, str) or not value or "://" in value or "${" in value or os.path.isabs(value):
        return value
    if folder.resolve() == Path.cwd().resolve():
        return value
    there = folder / value
    if there.exists():
        return str(there)
    return value


def _anchor_run(data: Any, folder: Path, anchor: Any = anchored) -> Any:
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for dotted in INPUT_PATHS:
        *parents, leaf = dotted.split(".")
        node, chain = out, []
        for part in parents:
            child = node.get(part) if isinstance(node, dict) else None
            if not isinstance(child, dict):
                node = None
                break
            child = dict(child)
            chain.append((node, part, child))
            node = child
        if not isinstance(node, dict) or leaf not in node:
            continue
        new = anchor(node[leaf], folder)
        if new is node[leaf]:
            continue
        node[leaf] = new
        for parent, part, child in chain:
            parent[part] = child
    return out


def absolute_inputs(data: dict[str, Any]) -> dict[str, Any]:
    """A run document (resolved already) with each relative input path that exists made absolute."""
    def absolute(value: Any, folder: Path) -> Any:
        if isinstance(value, str) and value and "://" not in value and not os.path.isabs(value) \
                and os.path.exists(value):
            return os.path.abspath(value)
        return value

    return _anchor_run(data, Path.cwd(), absolute)


def anchor_run_paths(data: Any, source: str | os.PathLike) -> Any:
    """A run document with its relative input paths resolved against ``source``'s folder."""
    return _anchor_run(data, Path(source).parent)


def anchor_sweep_paths(data: Any, source: str | os.PathLike) -> Any:
    """A sweep document likewise: its base, its explicit runs, and the grid values of input-path keys."""
    if not isinstance(data, dict):
        return data
    folder = Path(source).parent
    out = dict(data)
    if "base" in out:
        out["base"] = _anchor_run(out["base"], folder)
    if isinstance(out.get("runs"), list):
        out["runs"] = [_anchor_run(r, folder) for r in out["runs"]]
    if isinstance(out.get("grid"), dict):
        out["grid"] = {k: ([anchored(v, folder) for v in vals] if k in INPUT_PATHS and isinstance(vals, list)
                           else vals) for k, vals in out["grid"].items()}
    return out
