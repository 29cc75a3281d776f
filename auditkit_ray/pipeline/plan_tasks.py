"""Planning a large JSON Lines or Parquet dataset in Ray tasks.

On the driver alone, reading, validating and sharding a dataset costs tens
of microseconds per sample, serially, before anything runs, and holds every
sample. Here the driver passes over the file once to find where each shard
starts (JSON Lines: a byte offset and a line number per shard; Parquet: the
files' row counts), never holding more than a piece of it, and cuts it at
shard boundaries into parts of at most ``PART_BYTES``, each a run of whole
shards. Ray tasks read, validate and build the requests of every part but the
first, a few parts in flight at a time; the driver does the same for the first
part while they run (a task's fresh worker process takes about a second to
start and import what it needs). A part is read a shard at a time, and each
pending shard's row goes to Ray's object store as soon as it is built: the
plan holds one object reference per shard, never the rows, so the driver's
memory scales with shards, not samples.

Each part returns a 64-bit hash of every sample's id: the driver checks the
ids across parts on those (8 bytes a sample, for the check only). The result
is the plan, and any error the error, that the driver alone would have built,
in the same order: every sample is read (a bad line anywhere is reported
first, the earliest in the file) before any prompt error, and nothing runs
before the whole dataset has passed. Two equal hashes (a duplicate id, two
identical records without ids, whose content-derived ids the driver's reader
numbers in file order, or a collision of two different ids, about one chance
in 300,000 at ten million samples) send the plan back to the driver, which
builds it, or reports the duplicate, itself.
"""

from __future__ import annotations

import hashlib
import math
import os
from array import array
from typing import Any, Callable, Iterator

from .. import errors
from ..errors import AuditKitError, DataError, RunError

#: the first part (the driver's) is this many times a task's part: a task's worker starts its part a second or
#: two after the driver starts its own, so at equal shares the driver would finish first and wait for it
DRIVER_SHARE = 1.3

#: a part's bytes at most (JSON Lines text, or Parquet rows as Arrow IPC): what travels to one task, and, with
#: the parts in flight, what the driver holds of the dataset at once
PART_BYTES = 16 << 20

#: a part's rows summary: the last thing a part yields, after its shards' rows
SUMMARY = "summary"


def id_hash(rid: str) -> int:
    """A sample id's 64-bit hash (the same in every process: not Python's salted ``hash``)."""
    return int.from_bytes(hashlib.blake2b(rid.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def _records(source: tuple) -> Iterator[tuple[str, dict]]:
    """(where, record) of one part, named as the driver's reader names them:
    ``("jsonl", path, UTF-8 bytes, first_line)`` or ``("parquet", [(file, first_row,
    Arrow IPC stream), ...])``."""
    from ..data.readers import jsonl_records

    if source[0] == "jsonl":
        yield from jsonl_records(source[1], source[2].decode("utf-8"), source[3])
        return
    import pyarrow as pa

    for file, first, stream in source[1]:
        reader = pa.ipc.open_stream(stream)
        i = first
        for batch in reader:
            for rec in batch.to_pylist():
                yield f"{file} row {i}", rec
                i += 1


def plan_part(spec_json: str, source: tuple, first_shard: int, end_shard: int,
              done: list[int]) -> Iterator[dict[str, Any]]:
    """Shards ``first_shard .. end_shard - 1``, whose records are ``source`` (``_records``), read a shard at a
    time: yields the row of each shard not in ``done``, in shard order (as soon as it is built, and none once
    a sample failed), then the part's summary (``{SUMMARY: ...}``): a hash of each sample's id
    (``id_hash``), in file order, the first error of each phase
    (reading, then building), the shards whose rows it yielded, and the process that read it."""
    import numpy as np

    from ..adapters.prompt import PromptAdapter
    from ..config.models import RunSpec
    from ..core.gcpause import gc_paused
    from ..core.types import content_id
    from ..data.readers import given_id, sample_of
    from .shard_rows import agent_metadata_fn, shard_row

    spec = RunSpec.model_validate_json(spec_json)
    d = spec.dataset
    size = spec.shard_size
    hashes = array("Q")
    out: dict[str, Any] = {"load_error": None, "build_error": None, "rows": [], "pid": os.getpid(), "n": 0}
    adapter = PromptAdapter(spec.prompt, d, spec.seed, [])
    meta = agent_metadata_fn(spec)
    skip = set(done)
    shard = first_shard
    pairs: list[tuple[Any, dict]] = []
    where_of: dict[str, str] = {}  # the shard's samples' places (file:line), for a prompt that cannot be built

    def build() -> dict[str, bytes] | None:
        nonlocal shard
        row = None
        if out["build_error"] is None:
            try:
                row = shard_row(spec, adapter, meta, shard, pairs, keep=shard not in skip, locations=where_of)
            except AuditKitError as exc:
                out["build_error"] = (type(exc).__name__, str(exc))
        pairs.clear()
        where_of.clear()
        shard += 1
        return row

    with gc_paused():
        try:
            for where, rec in _records(source):
                rid = given_id(d, rec)
                if rid is None:
                    rid = content_id(rec)
                hashes.append(id_hash(rid))
                pairs.append((sample_of(d, where, rec, rid), rec))
                where_of[rid] = where
                if len(pairs) == size:
                    row = build()
                    if row is not None:
                        out["rows"].append(shard - 1)
                        yield row
            if pairs:
                row = build()
                if row is not None:
                    out["rows"].append(shard - 1)
                    yield row
        except AuditKitError as exc:
            out["load_error"] = (type(exc).__name__, str(exc))
        out["n"] = len(hashes)
        if out["load_error"] is None and shard != end_shard:
            raise RuntimeError(f"plan part {first_shard}..{end_shard}: {len(hashes)} samples for "
                               f"{end_shard - first_shard} shards")
        out["hashes"] = np.frombuffer(hashes, dtype=np.uint64)
        del source
    yield {SUMMARY: out}


def _error(kind: tuple[str, str]) -> AuditKitError:
    cls = getattr(errors, kind[0], None)
    if isinstance(cls, type) and issubclass(cls, AuditKitError) and cls is not errors.MissingExtraError:
        return cls(kind[1])
    return DataError(kind[1])


def _jsonl_parts(path: Any, size: int) -> tuple[int, list[int], Callable[[int, int], tuple]]:
    """The file's sample count, each shard's bytes (for cutting parts), and the ``source`` of shards
    ``s0 .. s1 - 1``. One pass over the file, a piece at a time: a byte offset and a line number per shard."""
    from ..data.readers import file_lines, is_blank

    starts: list[tuple[int, int]] = []  # (byte offset, line number) of each shard's first sample
    n = 0
    end = 0
    for lineno, offset, line in file_lines(path):  # a file that is not UTF-8 fails here, naming its line
        end = offset + len(line) + 1
        if is_blank(line):
            continue
        if n % size == 0:
            starts.append((offset, lineno))
        n += 1
    ends = [b for b, _ in starts[1:]] + [end]
    weights = [b - a for (a, _), b in zip(starts, ends)]

    def source(s0: int, s1: int) -> tuple:
        a, first_line = starts[s0]
        b = ends[s1 - 1]
        with path.open_stream() as f:
            if a:
                f.seek(a)
            data = f.read(b - a)
        return ("jsonl", str(path), data, first_line)  # checked UTF-8 by the pass above: decoded by the part

    return n, weights, source


def _parquet_parts(path: Any, size: int) -> tuple[int, list[int], Callable[[int, int], tuple]]:
    """As ``_jsonl_parts``, for a Parquet file or directory, from the files' row counts; a part's rows travel
    as an Arrow IPC stream, read a row group at a time."""
    import pyarrow as pa

    from ..data.readers import parquet_files

    files = []
    offset = 0
    weights_of_rows: list[float] = []
    for f in parquet_files(path):
        pf = f.parquet_file()
        meta = pf.metadata
        files.append((f, offset, [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]))
        per_row = (sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
                   / max(1, meta.num_rows))
        weights_of_rows.append(per_row)
        offset += meta.num_rows
    n = offset
    n_shards = math.ceil(n / size) if n else 0
    weights = []
    for i in range(n_shards):
        lo, hi = i * size, min((i + 1) * size, n)
        w = 0.0
        for (_, off, groups), per_row in zip(files, weights_of_rows):
            rows = sum(groups)
            a, b = max(lo, off), min(hi, off + rows)
            if a < b:
                w += (b - a) * per_row
        weights.append(int(w) + 1)

    def rows_of(f: Any, groups: list[int], a: int, b: int) -> Any:
        """Rows ``a .. b - 1`` of file ``f`` as one table, reading only the row groups that hold them."""
        pf = f.parquet_file()
        want, first, start = [], None, 0
        for g, k in enumerate(groups):
            if start < b and start + k > a:
                want.append(g)
                first = start if first is None else first
            start += k
        table = pf.read_row_groups(want)
        return table.slice(a - first, b - a)

    def ipc(table: Any) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table, max_chunksize=size)
        return sink.getvalue().to_pybytes()

    def source(s0: int, s1: int) -> tuple:
        lo, hi = s0 * size, min(s1 * size, n)
        segments = []
        for f, off, groups in files:
            rows = sum(groups)
            a, b = max(lo, off), min(hi, off + rows)
            if a < b:
                segments.append((str(f), a - off, ipc(rows_of(f, groups, a - off, b - off))))
        return ("parquet", segments)

    return n, weights, source


def _cut(weights: list[float], parts: int) -> list[int]:
    """Shard boundaries of ``parts`` parts of about equal weight (the first ``DRIVER_SHARE`` times the
    others'); each part has at least one shard."""
    n_shards = len(weights)
    shares = [DRIVER_SHARE] + [1.0] * (parts - 1)
    total = float(sum(weights)) or 1.0
    bounds, acc, i = [0], 0.0, 0
    for k in range(1, parts):
        target = total * sum(shares[:k]) / sum(shares)
        while i < n_shards and acc + weights[i] / 2 < target:
            acc += weights[i]
            i += 1
        i = max(i, bounds[-1] + 1)  # at least one shard in the part
        i = min(i, n_shards - (parts - k))  # and one left for each part after it
        acc = float(sum(weights[:i]))
        bounds.append(i)
    return bounds + [n_shards]


def plan_in_tasks(spec: Any, is_done: Callable[[int], bool], tasks: int,
                  address: str | None) -> tuple[int, dict[int, dict[str, Any]], list[int]] | None:
    """(samples, each pending shard's row as ``{"ref": ObjectRef}``, the process that read each part: the
    driver first), or None where the driver must plan alone (too few shards to split, two equal id hashes,
    an empty file: the driver's reader reports that)."""
    import numpy as np

    from ..actors.shard import REF
    from ..data.readers import dataset_location, detect_format
    from .runtime import init_ray, unwrap_error

    path = dataset_location(spec.dataset)  # a local path or an s3:// URI, read on the driver
    size = spec.shard_size
    parts_of = _jsonl_parts if detect_format(path, spec.dataset.format) == "jsonl" else _parquet_parts
    n, weights, source = parts_of(path, size)
    n_shards = len(weights)
    if n_shards < 2:
        return None
    ray = init_ray(address, spec.execution)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    if tasks < 0:
        tasks = cpus
    # at least one part per task asked for, and parts small enough that what is in flight stays small
    parts = min(n_shards, max(tasks, math.ceil(sum(weights) / PART_BYTES)))
    if parts < 2:
        return None
    bounds = _cut(weights, parts)
    spans = list(zip(bounds, bounds[1:]))
    window = max(1, min(parts - 1, cpus))  # parts in tasks at once (the driver reads the first meanwhile)
    spec_json = spec.model_dump_json(by_alias=True)
    remote = ray.remote(num_cpus=1)(plan_part)

    def submit(s0: int, s1: int) -> Any:
        return remote.remote(spec_json, source(s0, s1), s0, s1, [i for i in range(s0, s1) if is_done(i)])

    rows: dict[int, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    pending = list(spans[1:])
    flight = [(span, submit(*span)) for span in pending[:window]]
    pending = pending[window:]
    try:
        # the first part on the driver, while the tasks read the others; its rows go to the object store too
        s0, s1 = spans[0]
        own, summary = [], None
        for item in plan_part(spec_json, source(s0, s1), s0, s1, [i for i in range(s0, s1) if is_done(i)]):
            if SUMMARY in item:
                summary = item[SUMMARY]
            else:
                own.append(ray.put(item))
        rows.update({i: {REF: ref} for i, ref in zip(summary["rows"], own)})
        results.append(summary)
        while flight:
            _, gen = flight.pop(0)
            refs = list(gen)  # the part's rows, then its summary: waits for the part to finish
            summary = ray.get(refs[-1])[SUMMARY]
            rows.update({i: {REF: ref} for i, ref in zip(summary["rows"], refs[:-1])})
            results.append(summary)
            if pending:
                nxt = pending.pop(0)
                flight.append((nxt, submit(*nxt)))
    except Exception as exc:  # noqa: BLE001 - a part failed outside the checks above
        for _, gen in flight:
            try:
                ray.cancel(gen, force=True)
            except Exception:  # noqa: BLE001, S110 - best effort: the error below matters more
                pass
        inner = unwrap_error(exc)
        if isinstance(inner, AuditKitError):
            raise inner from None
        raise RunError(f"planning {path} in parts failed: {type(inner).__name__}: "
                       f"{str(inner).splitlines()[0] if str(inner) else ''}") from exc
    hashes = np.concatenate([r.pop("hashes") for r in results])
    hashes.sort()  # in place: the check's memory is the hashes', 8 bytes a sample
    if hashes.size > 1 and bool((hashes[1:] == hashes[:-1]).any()):
        return None  # a duplicate id, identical records without ids, or a collision: the driver's reader decides
    del hashes
    for r in results:
        if r["load_error"]:
            raise _error(r["load_error"])
    for r in results:
        if r["build_error"]:
            raise _error(r["build_error"])
    return n, rows, [r["pid"] for r in results]
