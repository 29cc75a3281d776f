"""What a word names where ``report`` takes a run or a sweep: a sweep by its name (as ``sweep`` stored it in
its manifest) or a prefix of its fingerprint, a run by its name, run id or a prefix of its fingerprint.

Where it looks: the result stores given (``report --store``), else ``./results`` (the default ``store.path``)
and every local store the ExperimentDB has a run of; runs also in the ExperimentDB itself. An exact match (a
name, a run id, a whole fingerprint) wins over prefixes; two candidates at the same level are a usage error
that lists them; a word that names nothing says which sweeps there are, the nearest first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.suggest import did_you_mean, nearest
from ..errors import ConfigError
from ..store.base import open_store
from ..store.layout import run_result
from ..store.sweeps import sweep_docs

#: the store a run file writes to when it names none (``StoreSpec.path``)
DEFAULT_STORE = "results"


@dataclass(frozen=True)
class Candidate:
    """A sweep or a run a word may name, and the path the report reads it from."""

    kind: str  # "sweep" or "run"
    name: str
    fingerprint: str
    path: str
    exact: bool
    store: str
    when: str = ""

    def describe(self) -> str:
        return f"{self.kind} {self.name} {self.fingerprint[:12]} (in {self.store}" + (
            f", {self.when})" if self.when else ")")


def _local(uri: str | None) -> str | None:
    if not uri or "://" in uri and not uri.startswith("file://"):
        return None  # reports read local paths
    return uri.removeprefix("file://")


def search_stores(stores: list[str] | None, db: Any) -> list[str]:
    """The local result stores to look in: those given, else ``./results`` and the ExperimentDB's."""
    if stores:
        for root in stores:
            if "://" in root and not root.startswith("file://"):
                raise ConfigError(f"--store {root}: reports read local result stores; copy the sweep or run first")
            if not Path(_local(root) or root).is_dir():
                raise ConfigError(f"--store {root}: no such result store (a directory holding runs/ and sweeps/)")
        return list(dict.fromkeys(_local(root) or root for root in stores))
    found = [DEFAULT_STORE] if Path(DEFAULT_STORE).is_dir() else []
    found += [p for p in map(_local, db.stores()) if p and Path(p).is_dir()]
    unique: dict[str, str] = {}
    for p in found:
        unique.setdefault(str(Path(p).resolve()), p)
    return list(unique.values())


def _sweeps(stores: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(store, fingerprint, manifest)`` of every sweep of the stores."""
    return [(root, sfp, doc) for root in stores for sfp, doc in sweep_docs(open_store(root))]


def candidates(ref: str, stores: list[str], db: Any) -> list[Candidate]:
    """Every sweep and run ``ref`` names in the stores and the ExperimentDB (a run once, however found)."""
    out: list[Candidate] = []
    for root, sfp, doc in _sweeps(stores):
        name = str(doc.get("name") or "")
        if ref in (name, sfp) or sfp.startswith(ref):
            when = doc.get("updated_at")
            out.append(Candidate("sweep", name, sfp, str(Path(root) / "sweeps" / sfp), ref in (name, sfp), root,
                                 _when(when)))
    runs: dict[str, Candidate] = {}
    for root in stores:
        store = open_store(root)
        for fp in store.list_dirs("runs"):
            if fp.startswith(ref) and store.exists(run_result(fp)):
                runs[fp] = Candidate("run", _run_name(store, fp), fp, str(Path(root) / "runs" / fp), fp == ref, root)
    for row in db.matches(ref):
        fp, path = row["fingerprint"], _local(row.get("result_uri"))
        if path is None or not Path(path).exists():
            continue  # a run the report could not read (failed, on S3, deleted): not a candidate
        known = runs.get(fp)
        runs[fp] = Candidate("run", str(row.get("name") or fp[:12]), fp, known.path if known else path,
                             bool(row["exact"]), known.store if known else "the ExperimentDB",
                             str(row.get("created_at") or ""))
    return out + list(runs.values())


def _run_name(store: Any, fp: str) -> str:
    try:
        return str(json.loads(store.read_bytes(run_result(fp))).get("name") or fp[:12])
    except (OSError, ValueError, AttributeError):
        return fp[:12]  # the report will say what is wrong with it


def _when(t: Any) -> str:
    if not isinstance(t, (int, float)):
        return ""
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def resolve(ref: str, *, db: Any, stores: list[str] | None = None) -> str:
    """The path of the sweep directory or run directory ``ref`` names (see the module's docstring); a
    ``ConfigError`` (exit 2) when it names none or more than one."""
    where = search_stores(stores, db)
    found = candidates(ref, where, db)
    exact = [c for c in found if c.exact]
    pick = exact or found
    if len(pick) == 1:
        return str(Path(pick[0].path).resolve())
    places = ", ".join(where) + (", " if where else "") + f"the ExperimentDB {db.path}"
    if len(pick) > 1:
        listed = "; ".join(c.describe() for c in pick[:10]) + ("; ..." if len(pick) > 10 else "")
        what = "is the name of" if exact else "starts the fingerprints of"
        kinds = " and ".join(f"{n} {k}{'s' if n > 1 else ''}" for k in ("sweep", "run")
                             if (n := sum(c.kind == k for c in pick)))
        raise ConfigError(f"{ref!r} {what} {kinds}: {listed}; name one by a longer fingerprint prefix or its path")
    names = sorted({str(doc.get("name") or sfp[:12]) for _, sfp, doc in _sweeps(where)})
    close = nearest(ref, names)
    shown = close + [n for n in names if n not in close][:max(0, 10 - len(close))]
    known = (f"sweeps there: {', '.join(shown)}{', ...' if len(names) > len(shown) else ''}" if names
             else "no sweep is stored there")
    hint = did_you_mean(ref, names)
    raise ConfigError(f"{ref!r} is no path, and names no sweep or run (by name, run id or fingerprint prefix) in "
                      f"{places}; {known}{hint}; `auditkit-ray runs list` lists the runs, --store DIR looks in "
                      "another result store")
