"""Planning a large JSON Lines or Parquet dataset in Ray tasks.

On the driver alone, reading, validating and sharding a dataset costs tens
of microseconds per sample, serially, before anything runs. Here the driver decodes the file and finds
where its samples start (JSON Lines), or reads its Arrow tables (Parquet),
and cuts it at shard boundaries into parts, each a run of whole shards.
Ray tasks read, validate and build the requests of every part but the
first, and return their rows and their samples' ids; the driver does the
same for the first part while they run (it would otherwise wait for them,
and a task's fresh worker process takes about a second to start and import
what it needs). The driver then checks the ids across parts.

The result is the plan, and any error the error, that the driver alone would
have built, in the same order: every sample is read (a bad line or a
duplicate id anywhere is reported first, the earliest in the file) before
any prompt error, and nothing runs before the whole dataset has passed.
Content-derived ids that collide are numbered in file order by the driver's
reader, so a plan that meets one is built again on the driver (rare:
identical records without ids).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Iterator

from .. import errors
from ..errors import AuditKitError, DataError, RunError

#: the first part (the driver's) is this many times a task's part: a task's worker starts its part a second or
#: two after the driver starts its own, so at equal shares the driver would finish first and wait for it
DRIVER_SHARE = 1.3


def _records(source: tuple) -> Iterator[tuple[str, dict]]:
    """(where, record) of one part, named as the driver's reader names them:
    ``("jsonl", path, text, first_line)`` or ``("parquet", [(file, first_row,
    Arrow IPC stream), ...])``."""
    from ..data.readers import jsonl_records

    if source[0] == "jsonl":
        yield from jsonl_records(source[1], source[2], source[3])
        return
    import pyarrow as pa

    for file, first, stream in source[1]:
        for i, rec in enumerate(pa.ipc.open_stream(stream).read_all().to_pylist(), start=first):
            yield f"{file} row {i}", rec


def plan_part(spec_json: str, source: tuple, first_shard: int, end_shard: int, done: list[int]) -> dict[str, Any]:
    """In a task: shards ``first_shard .. end_shard - 1``, whose records are
    ``source`` (``_records``). Returns the samples' ids (with where they
    are and whether the id was derived from the content), the first error of
    each phase (reading, then building), and the rows of the shards not in
    ``done``."""
    from ..adapters.prompt import PromptAdapter
    from ..config.models import RunSpec
    from ..core.gcpause import gc_paused
    from ..core.types import content_id
    from ..data.readers import given_id, sample_of
    from .shard_rows import agent_metadata_fn, shard_row

    spec = RunSpec.model_validate_json(spec_json)
    d = spec.dataset
    out: dict[str, Any] = {"ids": [], "where": [], "derived": [], "load_error": None, "build_error": None, "rows": {},
                           "pid": os.getpid()}
    with gc_paused():
        pairs = []
        try:
            for where, rec in _records(source):
                rid = given_id(d, rec)
                derived = rid is None
                if derived:
                    rid = content_id(rec)
                out["ids"].append(rid)
                out["where"].append(where)
                out["derived"].append(derived)
                pairs.append((sample_of(d, where, rec, rid), rec))
        except AuditKitError as exc:
            out["load_error"] = (type(exc).__name__, str(exc))
            return out
        del source
        size = spec.shard_size
        if not (end_shard - first_shard - 1) * size < len(pairs) <= (end_shard - first_shard) * size:
            raise RuntimeError(f"plan part {first_shard}..{end_shard}: {len(pairs)} samples for "
                               f"{end_shard - first_shard} shards")
        adapter = PromptAdapter(spec.prompt, d, spec.seed, [])
        meta = agent_metadata_fn(spec)
        skip = set(done)
        where = dict(zip(out["ids"], out["where"]))
        try:
            for i in range(first_shard, end_shard):
                lo = (i - first_shard) * size
                row = shard_row(spec, adapter, meta, i, pairs[lo : lo + size], keep=i not in skip,
                                locations=where)
                if row is not None:
                    out["rows"][i] = row
        except AuditKitError as exc:
            out["build_error"] = (type(exc).__name__, str(exc))
        del pairs  # freed by reference counting while the collector is paused, not walked when it resumes
    return out


def _error(kind: tuple[str, str]) -> AuditKitError:
    cls = getattr(errors, kind[0], None)
    if isinstance(cls, type) and issubclass(cls, AuditKitError) and cls is not errors.MissingExtraError:
        return cls(kind[1])
    return DataError(kind[1])


def _jsonl_parts(path: Any, size: int) -> tuple[int, Callable[[int, int], tuple]]:
    """The file's sample count, and the ``source`` of shards ``s0 .. s1 - 1``."""
    from ..data.readers import decode_text

    text = decode_text(path)  # a file that is not UTF-8 fails here, naming its line
    lines = text.split("\n")  # the driver's reader splits at "\n" only, too
    del text
    starts = [k for k, line in enumerate(lines) if line.strip()]  # line index of each sample
    n = len(starts)

    def source(s0: int, s1: int) -> tuple:
        a = starts[s0 * size]
        b = starts[s1 * size] if s1 * size < n else len(lines)
        return ("jsonl", str(path), "\n".join(lines[a:b]), a + 1)

    return n, source


def _parquet_parts(path: Any, size: int) -> tuple[int, Callable[[int, int], tuple]]:
    """As ``_jsonl_parts``, for a Parquet file or directory; a part's rows
    travel as an Arrow IPC stream (a pickled slice would carry its whole table)."""
    import pyarrow as pa

    from ..data.readers import parquet_files, parquet_table

    tables = []
    offset = 0
    for f in parquet_files(path):
        t = parquet_table(f)
        tables.append((f, t, offset))
        offset += t.num_rows

    def ipc(table: Any) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return sink.getvalue().to_pybytes()

    def source(s0: int, s1: int) -> tuple:
        lo, hi = s0 * size, min(s1 * size, offset)
        segments = []
        for f, t, off in tables:
            a, b = max(lo, off), min(hi, off + t.num_rows)
            if a < b:
                segments.append((str(f), a - off, ipc(t.slice(a - off, b - a))))
        return ("parquet", segments)

    return offset, source


def plan_in_tasks(spec: Any, is_done: Callable[[int], bool], tasks: int,
                  address: str | None) -> tuple[int, dict[int, dict[str, bytes]], list[int]] | None:
    """(samples, rows of pending shards, the process that read each part:
    the driver first), or None where the
    driver must plan alone (too few shards to split, colliding content ids,
    an empty file: the driver's reader reports that)."""
    from ..data.readers import dataset_location, detect_format
    from .runtime import init_ray, unwrap_error

    path = dataset_location(spec.dataset)  # a local path or an s3:// URI, read on the driver
    size = spec.shard_size
    parts_of = _jsonl_parts if detect_format(path, spec.dataset.format) == "jsonl" else _parquet_parts
    n, source = parts_of(path, size)
    n_shards = math.ceil(n / size)
    if n_shards < 2:
        return None
    ray = init_ray(address, spec.execution)
    if tasks < 0:
        tasks = int(ray.cluster_resources().get("CPU", 1))
    parts = min(tasks, n_shards)
    if parts < 2:
        return None
    # the driver's part is the larger: a task's part starts only once its worker process has started
    # and imported what it needs, while the driver starts on its own at once
    weights = [DRIVER_SHARE] + [1.0] * (parts - 1)
    bounds = [0] + [min(n_shards - (parts - k), max(k, round(sum(weights[:k]) * n_shards / sum(weights))))
                    for k in range(1, parts)] + [n_shards]
    spec_json = spec.model_dump_json(by_alias=True)
    spans = list(zip(bounds, bounds[1:]))
    remote = ray.remote(num_cpus=1, max_calls=1)(plan_part)  # each worker exits after its part: its heap goes back
    refs = [remote.remote(spec_json, source(s0, s1), s0, s1, [i for i in range(s0, s1) if is_done(i)])
            for s0, s1 in spans[1:]]
    (s0, s1), own = spans[0], None
    try:
        # the first part on the driver, while the tasks read the others
        own = plan_part(spec_json, source(s0, s1), s0, s1, [i for i in range(s0, s1) if is_done(i)])
        del source
        results = [own, *ray.get(refs)]
    except Exception as exc:  # noqa: BLE001 - a part failed outside the checks above
        if own is None:  # the driver's own part: the tasks' work is not wanted
            for ref in refs:
                ray.cancel(ref, force=True)
        inner = unwrap_error(exc)
        if isinstance(inner, AuditKitError):
            raise inner from None
        raise RunError(f"planning {path} in parts failed: {type(inner).__name__}: "
                       f"{str(inner).splitlines()[0] if str(inner) else ''}") from exc
    seen: dict[str, tuple[str, bool]] = {}
    for r in results:
        for rid, where, derived in zip(r["ids"], r["where"], r["derived"]):
            first = seen.get(rid)
            if first is not None:
                if derived or first[1]:
                    return None  # identical records without ids: the driver's reader numbers them in file order
                raise DataError(f"{where}: duplicate sample id {rid!r} (first at {first[0]})")
            seen[rid] = (where, derived)
        if r["load_error"]:
            raise _error(r["load_error"])
    for r in results:
        if r["build_error"]:
            raise _error(r["build_error"])
    return n, {i: row for r in results for i, row in r["rows"].items()}, [r["pid"] for r in results]
