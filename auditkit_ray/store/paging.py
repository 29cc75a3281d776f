"""A run's per-sample table a page at a time: the viewer's and the HTML report's reader.

The table is the run's Parquet files (one per shard), in sample order: files by name (shard order), rows by
``(index, repeat)`` within a file. ``PagedTable`` opens a file only when a page, a filter or a look-up needs
it, reads only the columns asked for, and keeps at most a few files open: what it holds is a row count per
file, never the rows of the run. Filters run a file at a time into index arrays (``scan``), so a run of ten
million samples costs its readers what they keep (8 bytes a matched row), not the table.

pyarrow loads inside the methods.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .columns import local_parquet_files

#: files kept open (their footers and the columns last read)
OPEN_FILES = 4


class PagedTable:
    """The per-sample table at ``path`` (a local directory, or ``store``'s ``.parquet`` files)."""

    def __init__(self, path: str, store: Any = None) -> None:
        self.path, self.store = path, store
        self.names = (local_parquet_files(path) if store is None
                      else [n for n in store.list("") if n.endswith(".parquet")])
        self._open: OrderedDict[int, Any] = OrderedDict()
        self._starts: Any = None
        self._lock = threading.RLock()

    def _file(self, k: int) -> Any:
        import pyarrow.parquet as pq

        with self._lock:
            f = self._open.get(k)
            if f is None:
                name = self.names[k]
                f = pq.ParquetFile(name if self.store is None else io.BytesIO(self.store.read_bytes(name)))
                self._open[k] = f
                while len(self._open) > OPEN_FILES:
                    self._open.popitem(last=False)
            else:
                self._open.move_to_end(k)
            return f

    def starts(self) -> Any:
        """The position of each file's first row, and the total at the end (one footer read per file)."""
        import numpy as np

        with self._lock:
            if self._starts is None:
                if self.store is None:
                    import pyarrow.parquet as pq

                    counts = [pq.read_metadata(n).num_rows for n in self.names]
                else:
                    counts = [self._file(k).metadata.num_rows for k in range(len(self.names))]
                self._starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
            return self._starts

    @property
    def total(self) -> int:
        return int(self.starts()[-1])

    def schema_names(self) -> list[str]:
        return list(self._file(0).schema_arrow.names) if self.names else []

    def read_file(self, k: int, columns: Iterable[str]) -> Any:
        """File ``k``'s rows, these columns (those it has), in sample order."""
        import pyarrow.compute as pc

        f = self._file(k)
        have = set(f.schema_arrow.names)
        order_cols = [c for c in ("index", "repeat") if c in have]
        want = [c for c in dict.fromkeys(columns) if c in have]
        t = f.read(columns=list(dict.fromkeys(want + order_cols)))
        if "index" in order_cols and t.num_rows > 1:
            idx = t.column("index")
            if not pc.all(pc.greater_equal(idx.slice(1), idx.slice(0, len(idx) - 1))).as_py():
                t = t.sort_by([(c, "ascending") for c in order_cols])
        return t.select(want)

    def scan(self, columns: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """(position of the file's first row, its rows with these columns), file by file."""
        starts = self.starts()
        for k in range(len(self.names)):
            yield int(starts[k]), self.read_file(k, columns)

    def rows(self, positions: Sequence[int], columns: Sequence[str]) -> list[dict[str, Any]]:
        """The rows at these positions (in the order given), as dicts: only the files that hold them are read."""
        import numpy as np

        starts = self.starts()
        pos = np.asarray(positions, dtype=np.int64)
        files = np.searchsorted(starts, pos, side="right") - 1
        out: list[dict[str, Any] | None] = [None] * len(pos)
        for k in np.unique(files):
            sel = np.nonzero(files == k)[0]
            t = self.read_file(int(k), columns).take(pos[sel] - starts[k])
            for i, row in zip(sel, t.to_pylist()):
                out[i] = row
        return out  # type: ignore[return-value]

    def positions_of(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Where each of these (sample_id, repeat) keys is (the first row of a key repeated); a scan of the id
        columns for the few keys asked for."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        wanted = {(str(s), int(r or 0)) for s, r in keys}
        if not wanted:
            return {}
        ids = pa.array(sorted({s for s, _ in wanted}), pa.string())
        out: dict[tuple[str, int], int] = {}
        for start, t in self.scan(["sample_id", "repeat"]):
            hit = np.nonzero(np.asarray(pc.fill_null(pc.is_in(pc.cast(t.column("sample_id"), pa.string()), ids),
                                                     False)))[0]
            if not len(hit):
                continue
            sids = t.column("sample_id").take(hit).to_pylist()
            reps = t.column("repeat").take(hit).to_pylist() if "repeat" in t.column_names else [0] * len(hit)
            for i, s, r in zip(hit.tolist(), sids, reps):
                key = (str(s), int(r or 0))
                if key in wanted and key not in out:
                    out[key] = start + i
        return out


def metric_cells(table: PagedTable, k: int, metrics: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    """Per metric, file ``k``'s status per row (a pyarrow string array, null where the row has no score of that
    name) and value (float64, NaN where there is no number), in sample order: from the typed score columns, or
    the ``scores`` JSON of a file without them (``store.columns``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..core.rowjson import loads
    from .columns import STATUS, TYPED_KEY, VALUE, score_cell

    f = table._file(k)
    out: dict[str, tuple[Any, Any]] = {}
    if (f.schema_arrow.metadata or {}).get(TYPED_KEY) == b"1":
        t = table.read_file(k, [c for m in metrics for c in (STATUS + m, VALUE + m)])
        for m in metrics:
            st = pc.cast(t.column(STATUS + m), pa.string()) if STATUS + m in t.column_names \
                else pa.nulls(t.num_rows, pa.string())
            va = pc.fill_null(t.column(VALUE + m), float("nan")).to_numpy() if VALUE + m in t.column_names \
                else np.full(t.num_rows, np.nan)
            out[m] = (st, va)
        return out
    t = table.read_file(k, ["scores"])
    blobs = t.column("scores").to_pylist() if "scores" in t.column_names else [None] * t.num_rows
    status: dict[str, list[Any]] = {m: [None] * len(blobs) for m in metrics}
    value = {m: np.full(len(blobs), np.nan) for m in metrics}
    for i, blob in enumerate(blobs):
        try:
            scores = loads(blob) if blob else []
        except ValueError:
            scores = []
        for s in scores if isinstance(scores, list) else []:
            name = s.get("name") if isinstance(s, dict) else None
            if name in status:
                st, v, _, _ = score_cell(s)
                status[name][i] = st
                if v is not None:
                    value[name][i] = v
    return {m: (pa.array(status[m], pa.string()), value[m]) for m in metrics}
