"""A run's per-sample scores as typed columns, written beside the ``scores`` JSON and read without it.

The ``scores`` column holds each row's scores as JSON text: readable by anyone, but a comparison of two
ten-million-sample runs would parse twenty million of them into Python objects. So a run shard also
stores, for every score name its rows carry, ``status:<name>`` (the status, dictionary-encoded; null where
the row has no score of that name), ``value:<name>`` (float64; null where there is no finite number), and,
where any of them has one, ``stats:<name>`` (the corpus statistics, a list of float64) and
``cluster:<name>`` (a cluster id from the score's metadata). Its footer says so (``TYPED_KEY``); a shard
without that mark (written before, or by hand) is read from its JSON, to the same values.

What the columns hold is what a reader of the JSON finds (``score_cell``): a value that is not a finite
number reads as none, statistics with anything that is not a finite number as none, a cluster id as the
text of its JSON value.

``read_columns`` reads, file by file, only the columns asked for: a reader's memory is the arrays it keeps
(8 bytes a sample for a value), never a Python object per row. pyarrow loads inside the functions.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..core.rowjson import dumps as row_dumps
from ..core.rowjson import loads as row_loads
from ..core.types import STATUS_VALUE

#: footer key (schema metadata) of a shard whose typed score columns are complete
TYPED_KEY = b"auditkit.typed_scores"
STATUS, VALUE, STATS, CLUSTER = "status:", "value:", "stats:", "cluster:"

#: where a cluster id may sit: a table column, or a score's metadata
CLUSTER_KEYS = ("cluster", "cluster_id")


def _status(score: dict[str, Any]) -> str:
    st = score.get("status", "scored")
    return str(getattr(st, "value", st))


def score_cell(score: dict[str, Any]) -> tuple[str, float | None, tuple[float, ...] | None, str | None]:
    """(status, value, statistics, cluster id) of one score as a reader of the stored JSON finds them."""
    value = score.get("value")
    value = float(value) if isinstance(value, (int, float)) else None
    if value is not None and not math.isfinite(value):
        value = None  # the JSON writes a NaN or an infinity as null
    meta = score.get("metadata") or {}
    stats = meta.get("stats") if isinstance(meta, dict) else None
    st: tuple[float, ...] | None = None
    if isinstance(stats, (list, tuple)):
        try:
            st = tuple(float(x) for x in stats)
        except (TypeError, ValueError):
            st = None
        if st is not None and not all(math.isfinite(x) for x in st):
            st = None  # written as null: float(None) fails, so the reader has none
    cl = None
    if isinstance(meta, dict):
        cl = next((meta[k] for k in CLUSTER_KEYS if meta.get(k) is not None), None)
    return _status(score), value, st, None if cl is None else str(row_loads(row_dumps(cl)))


def score_columns(scores: Sequence[Sequence[dict[str, Any]]]) -> dict[str, Any]:
    """The typed columns of a shard's rows (``scores[k]``: row k's scores as the JSON dicts), in name order."""
    import pyarrow as pa

    n = len(scores)
    codes: dict[str, list[int | None]] = {}  # per name: the status's code in ``seen`` per row
    values: dict[str, list[float | None]] = {}
    extra: dict[str, dict[int, tuple]] = {}  # per name: rows whose score has statistics or a cluster id
    seen: dict[str, int] = {}
    for k, row in enumerate(scores):
        for s in row:
            name = s.get("name") if isinstance(s, dict) else None
            if name is None:
                continue
            name = str(name)
            if s.get("metadata"):  # statistics, a cluster id: the full reading
                st, v, stats, cl = score_cell(s)
                if stats is not None or cl is not None:
                    extra.setdefault(name, {})[k] = (stats, cl)
                elif name in extra:
                    extra[name].pop(k, None)
            else:  # the common case: a status and a number
                st = s.get("status", "scored")
                st = STATUS_VALUE.get(st) or str(getattr(st, "value", st))
                v = s.get("value")
                if type(v) is not float:
                    v = float(v) if isinstance(v, (int, float)) else None
                if v is not None and not math.isfinite(v):
                    v = None
                if name in extra:
                    extra[name].pop(k, None)  # a name twice in a row: the last, as a reader of the JSON
            col = codes.get(name)
            if col is None:
                col = codes[name] = [None] * n
                values[name] = [None] * n
            code = seen.get(st)
            if code is None:
                code = seen[st] = len(seen)
            col[k] = code
            values[name][k] = v
    dictionary = pa.array(list(seen), pa.string())
    out: dict[str, Any] = {}
    for name in sorted(codes):
        out[STATUS + name] = pa.DictionaryArray.from_arrays(pa.array(codes[name], pa.int32()), dictionary)
        out[VALUE + name] = pa.array(values[name], pa.float64())
        got = extra.get(name) or {}
        if any(c[0] is not None for c in got.values()):
            out[STATS + name] = pa.array([list(got[k][0]) if k in got and got[k][0] is not None else None
                                          for k in range(n)], pa.list_(pa.float64()))
        if any(c[1] is not None for c in got.values()):
            out[CLUSTER + name] = pa.array([got[k][1] if k in got else None for k in range(n)], pa.string())
    return out


def mark_typed(table: Any) -> Any:
    """``table`` with the footer mark that its typed score columns are complete."""
    return table.replace_schema_metadata({**(table.schema.metadata or {}), TYPED_KEY: b"1"})


class ShardFile:
    """One Parquet file of a per-sample table: its schema's names, whether its typed columns are complete, its
    rows, and its columns read on demand. The file is open only while it is read (``release`` closes it): a
    table of thousands of files holds a few names and counts a file, not thousands of open files' footers."""

    def __init__(self, name: str, opener: Any) -> None:
        import pyarrow.parquet as pq

        self.name, self._opener = name, opener
        self._file: Any = pq.ParquetFile(opener())
        schema = self._file.schema_arrow
        self.names = frozenset(schema.names)
        self.typed = (schema.metadata or {}).get(TYPED_KEY) == b"1"
        self.num_rows = self._file.metadata.num_rows

    def has(self, column: str) -> bool:
        return column in self.names

    def read(self, columns: Iterable[str]) -> Any:
        """These columns (those the file has), as a table."""
        import pyarrow.parquet as pq

        if self._file is None:
            self._file = pq.ParquetFile(self._opener())
        return self._file.read(columns=[c for c in dict.fromkeys(columns) if self.has(c)])

    def release(self) -> None:
        self._file = None


def local_parquet_files(path: str) -> list[str]:
    """The Parquet files of a local table directory, as ``pyarrow.dataset`` finds them (by path; none hidden)."""
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        out += [os.path.join(root, f) for f in files if f.endswith(".parquet") and not f.startswith((".", "_"))]
    return sorted(out)


def shard_files(path: str, store: Any = None) -> Iterator[ShardFile]:
    """Each file of the per-sample table at ``path`` (a local directory, or, given ``store``, the store's
    ``.parquet`` files under it), in the order ``store.samples`` reads them."""
    if store is None:
        for name in local_parquet_files(path):
            yield ShardFile(name, lambda name=name: name)
        return
    names = [n for n in store.list("") if n.endswith(".parquet")]
    for name, data in zip(names, store.read_many(names)):
        first = [io.BytesIO(data)]  # the bytes read ahead serve the first open; a later one reads them again
        yield ShardFile(name, lambda name=name, first=first: first.pop() if first else
                        io.BytesIO(store.read_bytes(name)))
