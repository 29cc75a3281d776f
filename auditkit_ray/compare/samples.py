"""Runs as comparisons see them: the RunResult plus its per-sample scores.

A run's per-sample table (``RunResult.samples_path``, Parquet shards) is read
once, lazily, keeping only ``sample_id``, ``repeat``, ``scores`` and a cluster
column when there is one. Each score becomes a ``Cell`` keyed by
``(sample_id, repeat)``. When the table cannot be read the run still compares
on its summaries and the reason travels with every statistic that needed it.

Pairing two runs on one metric (``pair``) matches rows by
``(sample_id, repeat)``, in sorted key order (so resampling does not depend
on how the shards happen to be laid out), and keeps only pairs where both
sides are ``scored``; the others are counted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.gcpause import gc_paused
from ..core.result import RunResult, load_run
from ..core.rowjson import loads as row_loads
from ..errors import ConfigError
from ..store.samples import load_result, samples_location, try_read_samples_table

Key = tuple[str, int]

#: where a cluster id may sit: a table column, or a score's metadata
CLUSTER_KEYS = ("cluster", "cluster_id")


@dataclass(frozen=True, slots=True)
class Cell:
    status: str
    value: float | None
    stats: tuple[float, ...] | None = None
    cluster: str | None = None

    @property
    def scored(self) -> bool:
        return self.status == "scored" and self.value is not None


@dataclass
class RunScores:
    """Per-sample scores of one run: metric name -> key -> Cell."""

    cells: dict[str, dict[Key, Cell]] = field(default_factory=dict)
    keys: set[Key] = field(default_factory=set)
    duplicates: int = 0


@gc_paused()
def read_scores(result: RunResult, base_dir: str | os.PathLike | None = None) -> tuple[RunScores | None, str | None]:
    """Read a run's per-sample scores. Returns ``(scores, None)`` or
    ``(None, reason)``; never raises for an unreadable table."""
    # pairing sorts its keys itself: the table is read as stored, unsorted
    table, reason = try_read_samples_table(result, ["sample_id", "repeat", "scores", *CLUSTER_KEYS],
                                           required=("sample_id", "repeat", "scores"), base_dir=base_dir, sort=False)
    if table is None:
        return None, reason
    path = samples_location(result, base_dir)
    names = table.schema.names
    cluster_col = next((c for c in CLUSTER_KEYS if c in names), None)
    out = RunScores()
    sids = table.column("sample_id").to_pylist()
    reps = table.column("repeat").to_pylist()
    blobs = table.column("scores").to_pylist()
    clusters = table.column(cluster_col).to_pylist() if cluster_col else [None] * len(sids)
    for sid, rep, blob, clus in zip(sids, reps, blobs, clusters):
        key = (str(sid), int(rep or 0))
        if key in out.keys:
            out.duplicates += 1
            continue
        out.keys.add(key)
        try:
            scores = row_loads(blob) if blob else []
        except (TypeError, json.JSONDecodeError):
            return None, f"per-sample table {path}: row {key[0]!r} has unreadable scores JSON"
        for s in scores if isinstance(scores, list) else []:
            if not isinstance(s, dict) or "name" not in s:
                continue
            meta = s.get("metadata") or {}
            stats = meta.get("stats") if isinstance(meta, dict) else None
            cl = clus
            if cl is None and isinstance(meta, dict):
                cl = next((meta[k] for k in CLUSTER_KEYS if meta.get(k) is not None), None)
            value = s.get("value")
            try:
                st = tuple(float(x) for x in stats) if isinstance(stats, (list, tuple)) else None
            except (TypeError, ValueError):
                st = None
            out.cells.setdefault(s["name"], {})[key] = Cell(
                status=str(s.get("status", "scored")),
                value=float(value) if isinstance(value, (int, float)) else None,
                stats=st,
                cluster=None if cl is None else str(cl),
            )
    return out, None


class LoadedRun:
    """A RunResult, the label it is shown under, and its per-sample scores
    (read on first use)."""

    def __init__(self, result: RunResult, source: str | None = None, label: str | None = None) -> None:
        self.result = result
        self.source = source
        self.label = label or result.name or result.run_id
        self._scores: tuple[RunScores | None, str | None] | None = None
        #: what other readers derive from the run once and keep with it (the report's sample rows)
        self.cache: dict[str, Any] = {}

    @property
    def base_dir(self) -> Path | None:
        """The local folder of the result.json the run was read from (a relative samples_path is resolved there)."""
        return Path(self.source).parent if self.source and "://" not in self.source else None

    def scores(self) -> tuple[RunScores | None, str | None]:
        if self._scores is None:
            self._scores = read_scores(self.result, self.base_dir)
        return self._scores

    def with_scores(self, scores: RunScores | None, reason: str | None = None) -> "LoadedRun":
        """Attach per-sample scores directly (for callers holding them in memory)."""
        self._scores = (scores, reason if scores is None else None)
        return self


def load(run: Any) -> LoadedRun:
    """A RunResult, a LoadedRun, or a path to a results JSON / run directory."""
    if isinstance(run, LoadedRun):
        return run
    if isinstance(run, RunResult):
        return LoadedRun(run)
    if isinstance(run, (str, os.PathLike)):
        text = str(run)
        if "://" in text and not text.startswith("file://"):
            source = text if text.endswith("/result.json") else text.rstrip("/") + "/result.json"
            return LoadedRun(load_result(text), source=source)
        p = Path(run)
        source = p / "result.json" if p.is_dir() else p
        return LoadedRun(load_run(p), source=str(source))
    raise ConfigError(f"expected a RunResult or a path to a result.json or run directory, not {type(run).__name__}")


def match_run(spec: str, runs: list[LoadedRun]) -> LoadedRun | None:
    """The run ``spec`` names among ``runs``: its label, name or run id, else a unique fingerprint prefix of six
    or more characters."""
    for r in runs:
        if spec in (r.label, r.result.name, r.result.run_id):
            return r
    hits = [r for r in runs if len(spec) >= 6 and r.result.fingerprint.startswith(spec)]
    return hits[0] if len(hits) == 1 else None


def unique_labels(runs: list[LoadedRun]) -> None:
    """Make labels distinct: a repeated name gains its run id prefix, then an index."""
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
    for r in runs:
        if seen[r.label] > 1:
            r.label = f"{r.label}#{r.result.run_id[:8]}"
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.label] = counts.get(r.label, 0) + 1
    dup = {k for k, v in counts.items() if v > 1}
    index: dict[str, int] = {}
    for r in runs:
        if r.label in dup:
            index[r.label] = index.get(r.label, 0) + 1
            r.label = f"{r.label}({index[r.label]})"


@dataclass
class Pairing:
    """The pairs two runs share on one metric, in sorted key order."""

    keys: list[Key] = field(default_factory=list)
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    a_stats: list[tuple[float, ...] | None] = field(default_factory=list)
    b_stats: list[tuple[float, ...] | None] = field(default_factory=list)
    #: rows present in both tables where only one side is scored
    scored_only_a: int = 0
    scored_only_b: int = 0
    #: rows present in both tables where both sides carry an unscored status
    unscored_both: int = 0
    #: rows present in one table only
    only_in_a: int = 0
    only_in_b: int = 0

    @property
    def n(self) -> int:
        return len(self.keys)

    @property
    def unpaired(self) -> int:
        """Rows scored in one run and unscored (or absent) in the other."""
        return self.scored_only_a + self.scored_only_b


def pair(sa: RunScores, sb: RunScores, metric: str) -> Pairing:
    ca = sa.cells.get(metric, {})
    cb = sb.cells.get(metric, {})
    out = Pairing(only_in_a=len(sa.keys - sb.keys), only_in_b=len(sb.keys - sa.keys))
    for key in sorted(sa.keys & sb.keys):
        x, y = ca.get(key), cb.get(key)
        xs = x is not None and x.scored
        ys = y is not None and y.scored
        if xs and ys:
            out.keys.append(key)
            out.a.append(x.value)  # type: ignore[union-attr,arg-type]
            out.b.append(y.value)  # type: ignore[union-attr,arg-type]
            out.a_stats.append(x.stats)  # type: ignore[union-attr]
            out.b_stats.append(y.stats)  # type: ignore[union-attr]
        elif xs:
            out.scored_only_a += 1
        elif ys:
            out.scored_only_b += 1
        elif x is not None and y is not None:
            out.unscored_both += 1
    # scored rows whose sample the other table lacks altogether are unpaired too
    for key in sa.keys - sb.keys:
        c = ca.get(key)
        if c is not None and c.scored:
            out.scored_only_a += 1
    for key in sb.keys - sa.keys:
        c = cb.get(key)
        if c is not None and c.scored:
            out.scored_only_b += 1
    return out
