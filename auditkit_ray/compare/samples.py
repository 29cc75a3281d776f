"""Runs as comparisons see them: the RunResult plus its per-sample scores.

A run's per-sample table (``RunResult.samples_path``, Parquet shards) is read
once, lazily, column-wise (``store.columns``): first the keys (``sample_id``,
``repeat``), then, per metric as a comparison asks for it, only that metric's
status, value, statistics and cluster columns (a table without them is read
from its ``scores`` JSON, to the same values). A run keeps its keys once, in
sorted order (``(sample_id, repeat)``, the first row of a key kept when the
table repeats it), and each metric as arrays over them (``MetricColumn``):
about 9 bytes a sample a metric, never a Python object per sample. When the
table cannot be read the run still compares on its summaries and the reason
travels with every statistic that needed it.

Pairing two runs on one metric (``pair``) matches rows by
``(sample_id, repeat)``, in sorted key order (so resampling does not depend
on how the shards happen to be laid out), and keeps only pairs where both
sides are ``scored``; the others are counted. The paired values are arrays:
what paired tests (here, and the non-inferiority test) take.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.gcpause import gc_paused
from ..core.result import RunResult, load_run
from ..core.rowjson import loads as row_loads
from ..errors import ConfigError
from ..store.columns import CLUSTER, CLUSTER_KEYS, STATS, STATUS, VALUE, score_cell, shard_files
from ..store.samples import first_line, load_result, samples_location, table_store

Key = tuple[str, int]

#: ``MetricColumn.state``: the row has no score of the metric, has one not scored, has a scored value
ABSENT, UNSCORED, SCORED = -1, 0, 1


@dataclass
class MetricColumn:
    """One metric of one run, over the run's sorted keys."""

    #: ABSENT, UNSCORED or SCORED per key (int8)
    state: Any
    #: the value per key (float64; NaN where there is none)
    value: Any
    #: corpus statistics: width per key (-1: none) and the values, a row per key padded with NaN; None: no key has any
    stats_width: Any = None
    stats: Any = None
    #: cluster ids per key (a pyarrow string array, null where none); None: no key has one
    cluster: Any = None

    @property
    def scored(self) -> Any:
        return self.state == SCORED


class RunScores:
    """Per-sample scores of one run: its keys in sorted order, and each metric's columns over them.

    A table stored in key order (the common case) is not held: its keys are known by their count and a digest,
    and read again only where a comparison needs them (two runs with other keys, cluster ids, the keys of the
    samples a diff lists)."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.duplicates: int = table.duplicates
        self.metrics: dict[str, MetricColumn] = {}

    @property
    def n(self) -> int:
        return self.table.n

    @property
    def digest(self) -> str | None:
        """A SHA-256 of the sorted keys (None when not worked out: a table not in key order, or with a key twice)."""
        return self.table.digest

    @property
    def has_repeats(self) -> bool:
        """Some sample has several keys (repeats)."""
        return self.table.has_repeats

    @property
    def sample_id(self) -> Any:
        """The sorted keys' sample ids (a pyarrow array; read on first use)."""
        return self.table.keys()[0]

    @property
    def repeat(self) -> Any:
        """The sorted keys' repeats (int32; read on first use)."""
        return self.table.keys()[1]

    def metric(self, name: str) -> MetricColumn | None:
        """The metric's columns (read on first use); None when no row has a score of that name. Only the last
        metric asked for is kept: comparisons and leaderboards take their metrics one after another."""
        if name not in self.metrics:
            self.metrics.clear()
            self.metrics[name] = self.table.metric(name)
        return self.metrics[name]

    def keys_at(self, positions: Any) -> list[Key]:
        """The keys at these positions, as (sample_id, repeat) tuples."""
        import numpy as np

        pos = np.asarray(positions, dtype=np.int64)
        if not pos.size:
            return []
        return self.table.keys_at(pos)


class _Unreadable(Exception):
    """A per-sample table that cannot be read: the reason."""


def _np():
    from ..errors import require

    return require("numpy", "stats")


def _stats_matrix(lists: Any) -> tuple[Any, Any]:
    """Widths (-1: none) and a row per key, padded with NaN, of a list<float64> array."""
    import pyarrow.compute as pc

    np = _np()
    valid = np.asarray(lists.is_valid())
    widths = np.where(valid, np.asarray(pc.fill_null(pc.list_value_length(lists), 0)), -1).astype(np.int32)
    w = max(0, int(widths.max())) if len(widths) else 0
    if valid.all() and (widths == w).all():
        return widths, lists.flatten().to_numpy(zero_copy_only=False).reshape(len(widths), w)
    mat = np.full((len(widths), w), np.nan)
    for k, row in enumerate(lists.to_pylist()):  # some keys without, or of other widths: row by row
        if row:
            mat[k, :len(row)] = row
    return widths, mat


class _Table:
    """The files of a run's per-sample table, its keys' order, and its metrics read on demand."""

    def __init__(self, result: RunResult, path: str) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        np = _np()
        self.path = path
        store = table_store(result, path)
        if store is None and not Path(path).exists():
            raise _Unreadable(f"per-sample table {path} does not exist")
        self.files = list(shard_files(path, store))
        if not self.files:
            raise _Unreadable(f"per-sample table {path} does not exist")
        missing = [c for c in ("sample_id", "repeat", "scores") if not self.files[0].has(c)]
        if missing:
            raise _Unreadable(f"per-sample table {path} lacks column(s) {', '.join(missing)}")
        self.cluster_col = next((c for c in CLUSTER_KEYS if self.files[0].has(c)), None)
        self.order = None  # per sorted key: its row in the table as stored (None: the same)
        self.kept = None  # per stored row: whether it is its key's first (None: every row is)
        self._keys: tuple[Any, Any] | None = None
        rows = sum(f.num_rows for f in self.files)
        if not self._scan_keys(rows):
            sid, rep = self._read_keys()
            # sort by key, stably: of the rows of one key, the first stored comes first and is kept
            order = pc.sort_indices(pa.table({"s": sid, "r": rep}), sort_keys=[("s", "ascending"), ("r", "ascending")])
            self.order = order.to_numpy().astype(np.int64 if rows >= 2**31 else np.int32)
            del order
            sid, rep = sid.take(self.order), rep[self.order]
            if rows > 1:
                same = np.asarray(pc.equal(sid.slice(1), sid.slice(0, rows - 1)))
                dup = np.concatenate([[False], same & (rep[1:] == rep[:-1])])
                self.has_repeats = bool((same & (rep[1:] != rep[:-1])).any())
                del same
            else:
                dup = np.zeros(rows, bool)
            self.duplicates = int(dup.sum())
            if self.duplicates:
                keep = ~dup
                sid, rep = sid.filter(pa.array(keep)), rep[keep]
                self.order = self.order[keep]
                self.kept = np.zeros(rows, bool)
                self.kept[self.order] = True
            self._keys = (sid, rep)
            self.digest = None
        self.n = rows - self.duplicates
        self.names = None if not all(f.typed for f in self.files) else sorted(
            {c[len(STATUS):] for f in self.files for c in f.names if c.startswith(STATUS)})
        self.parsed: dict[str, MetricColumn] | None = None
        pa.default_memory_pool().release_unused()

    def _file_keys(self, f: Any) -> tuple[Any, Any]:
        """One file's sample ids (text, null as "None") and repeats (int32, null as 0), as stored."""
        import pyarrow as pa
        import pyarrow.compute as pc

        np = _np()
        t = f.read(["sample_id", "repeat"])
        f.release()
        sid = t.column("sample_id") if "sample_id" in t.column_names else pa.nulls(f.num_rows, pa.string())
        rep = t.column("repeat") if "repeat" in t.column_names else pa.nulls(f.num_rows, pa.int64())
        return (pc.fill_null(pc.cast(sid, pa.string()), "None").combine_chunks(),
                pc.fill_null(pc.cast(rep, pa.int64()), 0).to_numpy().astype(np.int32))

    def _scan_keys(self, rows: int) -> bool:
        """One pass over the keys, a file at a time, holding none of them: whether the table is stored in key
        order; if so, the rows that repeat a key (``kept``), whether samples repeat, and the keys' digest."""
        import hashlib

        import pyarrow.compute as pc

        np = _np()
        h = hashlib.sha256()
        dups: list[Any] = []
        repeats = False
        prev: tuple[str, int] | None = None
        start = 0
        for f in self.files:
            sid, rep = self._file_keys(f)
            n = len(rep)
            if n:
                first = (sid[0].as_py(), int(rep[0]))
                if prev is not None:
                    if first < prev:
                        return False
                    if first == prev:
                        dups.append(np.array([start]))
                    elif first[0] == prev[0]:
                        repeats = True
                if n > 1:
                    a, b = sid.slice(1), sid.slice(0, n - 1)
                    gt = np.asarray(pc.greater(a, b))
                    same = np.asarray(pc.equal(a, b))
                    if not bool((gt | (same & (rep[1:] >= rep[:-1]))).all()):
                        return False
                    d = same & (rep[1:] == rep[:-1])
                    if d.any():
                        dups.append(np.nonzero(d)[0] + start + 1)
                    repeats = repeats or bool((same & (rep[1:] != rep[:-1])).any())
                offsets = np.frombuffer(sid.buffers()[1], dtype=np.int32)[sid.offset:sid.offset + n + 1]
                h.update((offsets - offsets[0]).astype(np.int64).tobytes())
                h.update(sid.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]])
                h.update(rep.tobytes())
                prev = (sid[n - 1].as_py(), int(rep[n - 1]))
            start += n
        self.has_repeats = repeats
        self.duplicates = int(sum(len(d) for d in dups))
        if self.duplicates:
            self.kept = np.ones(rows, bool)
            self.kept[np.concatenate(dups)] = False
        self.digest = None if self.duplicates else h.hexdigest()
        return True

    def _read_keys(self) -> tuple[Any, Any]:
        import pyarrow as pa

        np = _np()
        sids, reps = [], []
        for f in self.files:
            sid, rep = self._file_keys(f)
            sids.append(sid)
            reps.append(rep)
        return pa.chunked_array(sids, pa.string()), (np.concatenate(reps) if reps else np.empty(0, np.int32))

    def keys(self) -> tuple[Any, Any]:
        """The sorted unique keys: sample ids (a pyarrow array) and repeats (int32), read on first use."""
        if self._keys is None:
            sid, rep = self._read_keys()
            self._keys = (self.arrange(sid), self.arrange(rep))
        return self._keys

    def keys_at(self, positions: Any) -> list[Key]:
        """The keys at these positions of the sorted keys, read from the files that hold them (or the keys held)."""
        np = _np()
        if self._keys is not None:
            sid, rep = self._keys
            return list(zip(sid.take(positions).to_pylist(), rep[positions].tolist()))
        stored = positions if self.kept is None else np.nonzero(self.kept)[0][positions]
        starts = np.cumsum([0] + [f.num_rows for f in self.files])
        which = np.searchsorted(starts, stored, side="right") - 1
        out: list[Key | None] = [None] * len(stored)
        for k in np.unique(which):
            sel = np.nonzero(which == k)[0]
            sid, rep = self._file_keys(self.files[int(k)])
            local = stored[sel] - starts[k]
            for i, s_, r_ in zip(sel.tolist(), sid.take(local).to_pylist(), rep[local].tolist()):
                out[i] = (s_, r_)
        return out  # type: ignore[return-value]

    def arrange(self, stored: Any) -> Any:
        """A per-row array (numpy or pyarrow) in the run's sorted key order, each key's first row."""
        import pyarrow as pa

        if self.order is not None:
            return stored.take(self.order) if isinstance(stored, (pa.Array, pa.ChunkedArray)) else stored[self.order]
        if self.kept is not None:
            return stored.filter(pa.array(self.kept)) if isinstance(stored, (pa.Array, pa.ChunkedArray)) \
                else stored[self.kept]
        return stored

    def metric(self, name: str) -> MetricColumn | None:
        if self.names is None:  # a table without typed columns: every metric from the JSON, at once
            if self.parsed is None:
                self.parsed = self._parse()
            return self.parsed.get(name)
        if name not in self.names:
            return None
        return self._typed(name)

    def _typed(self, name: str) -> MetricColumn:
        import pyarrow as pa
        import pyarrow.compute as pc

        np = _np()
        states, values, stats, clusters = [], [], [], []
        has_stats = has_cluster = False
        for f in self.files:
            t = f.read([STATUS + name, VALUE + name, STATS + name, CLUSTER + name]
                       + ([self.cluster_col] if self.cluster_col else []))
            f.release()
            n = f.num_rows
            v = t.column(VALUE + name) if VALUE + name in t.column_names else pa.nulls(n, pa.float64())
            v = pc.fill_null(pc.cast(v, pa.float64()), float("nan")).to_numpy()
            if STATUS + name in t.column_names:
                st = pc.cast(t.column(STATUS + name), pa.string())
                scored = np.asarray(pc.fill_null(pc.equal(st, "scored"), False)) & ~np.isnan(v)
                state = np.where(scored, SCORED, np.where(np.asarray(pc.is_valid(st)), UNSCORED, ABSENT))
            else:
                state = np.full(n, ABSENT)
            states.append(state.astype(np.int8))
            values.append(v)
            if STATS + name in t.column_names:
                has_stats = True
                stats.append(t.column(STATS + name))
            else:
                stats.append(pa.nulls(n, pa.list_(pa.float64())))
            cl = t.column(CLUSTER + name) if CLUSTER + name in t.column_names else pa.nulls(n, pa.string())
            if self.cluster_col:  # a table column of cluster ids comes first
                col = pc.cast(t.column(self.cluster_col), pa.string())
                cl = pc.coalesce(col, pc.cast(cl, pa.string()))
            has_cluster = has_cluster or cl.null_count < n
            clusters.append(pc.cast(cl, pa.string()) if has_cluster else None)
        empty = np.empty(0)
        out = MetricColumn(state=self.arrange(np.concatenate(states) if states else empty.astype(np.int8)),
                           value=self.arrange(np.concatenate(values) if values else empty))
        del states, values
        if has_stats:
            lists = pa.chunked_array([c for s in stats for c in s.chunks], pa.list_(pa.float64()))
            out.stats_width, out.stats = _stats_matrix(self.arrange(lists.combine_chunks()))
        if has_cluster:
            cl = pa.chunked_array([c for f, s in zip(self.files, clusters) for c in
                                   (s if s is not None else pa.nulls(f.num_rows, pa.string())).chunks], pa.string())
            out.cluster = self.arrange(cl.combine_chunks())
        pa.default_memory_pool().release_unused()
        return out

    def _parse(self) -> dict[str, MetricColumn]:
        """Every metric from the ``scores`` JSON of the rows kept (the first of each key), in stored order."""
        import pyarrow as pa

        np = _np()
        n_rows = sum(f.num_rows for f in self.files)
        kept = self.kept
        cells: dict[str, dict[int, tuple]] = {}
        row = 0
        for f in self.files:
            t = f.read(["sample_id", "scores"] + ([self.cluster_col] if self.cluster_col else []))
            f.release()
            blobs = t.column("scores").to_pylist()
            sids = t.column("sample_id").to_pylist()
            clus = t.column(self.cluster_col).to_pylist() if self.cluster_col else [None] * len(blobs)
            for blob, sid, clu in zip(blobs, sids, clus):
                if kept is None or kept[row]:
                    try:
                        scores = row_loads(blob) if blob else []
                    except (TypeError, json.JSONDecodeError):
                        raise _Unreadable(f"per-sample table {self.path}: row {str(sid)!r} has unreadable scores "
                                          "JSON") from None
                    for s in scores if isinstance(scores, list) else []:
                        if not isinstance(s, dict) or "name" not in s:
                            continue
                        status, value, stats, cl = score_cell(s)
                        if clu is not None:
                            cl = str(clu)
                        cells.setdefault(s["name"], {})[row] = (status, value, stats, cl)
                row += 1
        out = {}
        arrange = self.arrange
        for name, got in cells.items():
            status: list[Any] = [None] * n_rows
            value = np.full(n_rows, np.nan)
            for r, c in got.items():
                status[r] = c[0]
                if c[1] is not None:
                    value[r] = c[1]
            st = arrange(pa.array(status, pa.string()))
            value = arrange(value)
            present = np.asarray(st.is_valid())
            scored = np.asarray(pa.compute.fill_null(pa.compute.equal(st, "scored"), False)) & ~np.isnan(value)
            mc = MetricColumn(state=np.where(scored, SCORED, np.where(present, UNSCORED, ABSENT)).astype(np.int8),
                              value=value)
            if any(c[2] is not None for c in got.values()):
                widths = np.full(n_rows, -1, np.int32)
                w = max(len(c[2]) for c in got.values() if c[2] is not None)
                mat = np.full((n_rows, w), np.nan)
                for r, c in got.items():
                    if c[2] is not None:
                        widths[r] = len(c[2])
                        mat[r, :len(c[2])] = c[2]
                mc.stats_width, mc.stats = arrange(widths), arrange(mat)
            if any(c[3] is not None for c in got.values()):
                mc.cluster = arrange(pa.array([got[r][3] if r in got else None for r in range(n_rows)], pa.string()))
            out[str(name)] = mc
        return out


@gc_paused()
def read_scores(result: RunResult, base_dir: str | os.PathLike | None = None) -> tuple[RunScores | None, str | None]:
    """Read a run's per-sample keys (its metrics are read as they are asked for). Returns ``(scores, None)``
    or ``(None, reason)``; never raises for an unreadable table."""
    path = None
    try:
        path = samples_location(result, base_dir)
        table = _Table(result, path)
        scores = RunScores(table)
        if table.names is None:  # the JSON is read now, so that an unreadable row is the reason
            table.parsed = table._parse()
        return scores, None
    except (ConfigError, _Unreadable) as exc:
        return None, str(exc)
    except ImportError:
        return None, "reading per-sample tables needs pyarrow: pip install 'auditkit-ray[ray]'"
    except Exception as exc:  # noqa: BLE001 - whatever makes a stored table unreadable becomes the reason
        return None, f"cannot read per-sample table {path}: {first_line(exc)}"


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
    """The pairs two runs share on one metric, in sorted key order: the paired values as float64 arrays."""

    #: the run the keys are read from, and the paired keys' positions in it (None: every key, in order)
    run: RunScores | None = None
    positions: Any = None
    a: Any = None
    b: Any = None
    #: per pair, the corpus statistics (a 2-d float64 array) of each side; None when some pair lacks them or
    #: their widths differ (``stats_problem`` says which)
    a_stats: Any = None
    b_stats: Any = None
    stats_problem: str | None = None
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
        return 0 if self.a is None else len(self.a)

    @property
    def unpaired(self) -> int:
        """Rows scored in one run and unscored (or absent) in the other."""
        return self.scored_only_a + self.scored_only_b

    def keys_at(self, which: Any) -> list[Key]:
        """The keys of the pairs at these indices (into ``a`` and ``b``)."""
        np = _np()
        if self.run is None:
            return []
        which = np.asarray(which, dtype=np.int64)
        return self.run.keys_at(which if self.positions is None else self.positions[which])

    @property
    def keys(self) -> list[Key]:
        return self.keys_at(range(self.n))


def _matched(sa: RunScores, sb: RunScores) -> tuple[Any, Any]:
    """Positions in ``sa`` and in ``sb`` of the keys both have, in sorted key order; (None, None) when the two
    runs have the same keys (the common case: every position, no index arrays)."""
    import pyarrow as pa

    np = _np()
    if sa.n == sb.n and sa.digest is not None and sa.digest == sb.digest:
        return None, None  # the same keys in the same order, known without reading them again
    if sa.n == sb.n and np.array_equal(sa.repeat, sb.repeat) and sa.sample_id.equals(sb.sample_id):
        return None, None
    ta = pa.table({"s": sa.sample_id, "r": sa.repeat, "ia": np.arange(sa.n)})
    tb = pa.table({"s": sb.sample_id, "r": sb.repeat, "ib": np.arange(sb.n)})
    j = ta.join(tb, keys=["s", "r"], join_type="inner")
    ia, ib = j.column("ia").to_numpy(), j.column("ib").to_numpy()
    by = np.argsort(ia, kind="stable")  # the first run's positions are in sorted key order
    return ia[by], ib[by]


def at_positions(arr: Any, idx: Any) -> Any:
    """``arr[idx]``, or ``arr`` itself for ``idx`` None (every position)."""
    return arr if idx is None else arr[idx]


def _stats_of(mc: MetricColumn | None, positions: Any, n: int) -> tuple[Any, Any]:
    np = _np()
    if mc is None or mc.stats is None:
        return np.full(n, -1, np.int32), None
    return at_positions(mc.stats_width, positions), at_positions(mc.stats, positions)


def pair(sa: RunScores, sb: RunScores, metric: str) -> Pairing:
    np = _np()
    ca, cb = sa.metric(metric), sb.metric(metric)
    ia, ib = _matched(sa, sb)
    common = sa.n if ia is None else len(ia)
    out = Pairing(run=sa, only_in_a=sa.n - common, only_in_b=sb.n - common)
    xa = at_positions(ca.state, ia) if ca is not None else np.full(common, -1, np.int8)
    yb = at_positions(cb.state, ib) if cb is not None else np.full(common, -1, np.int8)
    xs, ys = xa == SCORED, yb == SCORED
    both = xs & ys
    out.scored_only_a = int(np.count_nonzero(xs & ~ys))
    out.scored_only_b = int(np.count_nonzero(ys & ~xs))
    out.unscored_both = int(np.count_nonzero(~xs & ~ys & (xa != ABSENT) & (yb != ABSENT)))
    del xa, yb, xs, ys
    # scored rows whose sample the other table lacks altogether are unpaired too
    for col, n, idx, attr in ((ca, sa.n, ia, "scored_only_a"), (cb, sb.n, ib, "scored_only_b")):
        if col is not None and common < n:
            there = np.zeros(n, bool)
            there[idx] = True
            setattr(out, attr, getattr(out, attr) + int(np.count_nonzero((col.state == SCORED) & ~there)))
    if both.all():  # every shared key paired: the positions are the shared ones, the values no copy
        pa_, pb_ = ia, ib
    else:
        pick = np.nonzero(both)[0]
        pa_, pb_ = (pick if ia is None else ia[pick]), (pick if ib is None else ib[pick])
    del both
    out.positions = pa_
    out.a = at_positions(ca.value, pa_) if ca is not None else np.empty(0)
    out.b = at_positions(cb.value, pb_) if cb is not None else np.empty(0)
    wa, ma = _stats_of(ca, pa_, out.n)
    wb, mb = _stats_of(cb, pb_, out.n)
    if out.n:
        if (wa < 0).any() or (wb < 0).any():
            out.stats_problem = "some scored samples lack metadata.stats, so the corpus score cannot be resampled"
        else:
            widths = set(np.unique(wa).tolist()) | set(np.unique(wb).tolist())
            if len(widths) != 1:
                out.stats_problem = f"per-sample statistics have different lengths ({sorted(widths)})"
            else:
                w = widths.pop()
                out.a_stats, out.b_stats = ma[:, :w], mb[:, :w]
    return out
