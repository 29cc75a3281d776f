"""A run's stored results read back: its RunResult and its per-sample table.

Every reader of per-sample tables (the facade's ``samples_table``, comparisons,
reports, the MLflow mirror, re-scoring a stored run) goes through
:func:`read_samples_table`, so a run in any store (a local directory or
``s3://``) reads the same way. The table is the run's Parquet shards
(``RunResult.samples_path``), one row per sample and repeat, in sample order:
sorted by ``(shard, index, repeat)``.

A remote table is read through the store itself (``open_store`` on the
table's URI, with the endpoint and region the run was stored with), so its
credentials and retries are the store's. pyarrow loads inside the functions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..core.result import RunResult, load_run
from ..errors import ConfigError
from .base import open_store

#: the sort that puts a table in sample order (the columns present are used)
SAMPLE_ORDER = ("shard", "index", "repeat")

RESULT_FILE = "result.json"


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def load_result(path: str | os.PathLike, *, endpoint_url: str | None = None, region: str | None = None) -> RunResult:
    """A RunResult from a run directory or its ``result.json``, local or ``s3://``."""
    text = str(path)
    if not _is_remote(text):
        return load_run(text.removeprefix("file://"))
    uri = text.rstrip("/")
    run_dir = uri.rsplit("/", 1)[0] if uri.endswith("/" + RESULT_FILE) else uri
    store = open_store(run_dir, endpoint_url, region)
    try:
        data = json.loads(store.read_bytes(RESULT_FILE))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir}: no {RESULT_FILE} (not a finished run)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{store.uri(RESULT_FILE)}: not valid JSON ({exc})") from None
    return RunResult.from_dict(data, source=store.uri(RESULT_FILE))


def as_result(result_or_path: Any) -> RunResult:
    """A RunResult as given, or read from a run directory / ``result.json`` (local or ``s3://``)."""
    if isinstance(result_or_path, RunResult):
        return result_or_path
    if isinstance(result_or_path, (str, os.PathLike)):
        return load_result(result_or_path)
    raise ConfigError(f"expected a RunResult or a path to a result.json or run directory, "
                      f"not {type(result_or_path).__name__}")


def samples_location(result: RunResult, base_dir: str | os.PathLike | None = None) -> str:
    """Where the run's per-sample table lives: its ``samples_path``, a relative
    local path resolved against ``base_dir`` (the folder of the result.json it
    was read from) when it is not found as it is."""
    path = result.samples_path
    if not path:
        raise ConfigError(f"run {result.name!r} has no per-sample table (samples_path is empty)")
    if not _is_remote(path):
        path = path.removeprefix("file://")
        if not Path(path).is_absolute() and base_dir is not None and not Path(path).exists():
            path = str(Path(base_dir) / path)
    return path


def _store_options(result: RunResult) -> tuple[str | None, str | None]:
    cfg = (result.config or {}).get("store") or {}
    return cfg.get("endpoint_url"), cfg.get("region")


def table_store(result: RunResult, path: str) -> Any:
    """The store a remote per-sample table at ``path`` is read through (with the endpoint and region the run was
    stored with); None for a local one (read from the file system)."""
    return open_store(path, *_store_options(result)) if _is_remote(path) else None


def _read_remote(result: RunResult, uri: str, columns: list[str] | None) -> Any:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    store = open_store(uri, *_store_options(result))
    names = [name for name in store.list("") if name.endswith(".parquet")]
    if not names:
        raise ConfigError(f"per-sample table {uri} does not exist")
    tables = []
    for data in store.read_many(names):
        buf = io.BytesIO(data)
        have = pq.read_schema(buf).names
        tables.append(pq.read_table(buf, columns=[c for c in columns if c in have] if columns is not None else None))
    return pa.concat_tables(tables)


def _read_local(path: str, columns: list[str] | None) -> Any:
    import pyarrow.dataset as pads

    if not Path(path).exists():
        raise ConfigError(f"per-sample table {path} does not exist")
    ds = pads.dataset(path, format="parquet")
    cols = None if columns is None else [c for c in columns if c in ds.schema.names]
    return ds.to_table(columns=cols)


def _run_dir(path: str | os.PathLike) -> str | None:
    """The local folder of a run given as a directory or its result.json (None for a remote one)."""
    text = str(path)
    if _is_remote(text):
        return None
    p = Path(text.removeprefix("file://"))
    return str(p if p.is_dir() else p.parent)


def read_samples_table(result_or_path: Any, columns: Sequence[str] | None = None, *, required: Iterable[str] = (),
                       base_dir: str | os.PathLike | None = None, sort: bool = True) -> Any:
    """The per-sample table of a run (a pyarrow Table) from a RunResult, a run
    directory or a ``result.json`` path, local or ``s3://``; in sample order
    (``shard``, ``index``, ``repeat``) unless ``sort`` is False.

    ``columns``: only these (the ones the table has); ``required``: columns
    whose absence is an error; ``base_dir``: where a relative ``samples_path``
    is resolved (default: the run directory given). Raises ``ConfigError``
    when the run has no table, the table does not exist or lacks a required
    column."""
    result = as_result(result_or_path)
    if base_dir is None and isinstance(result_or_path, (str, os.PathLike)):
        base_dir = _run_dir(result_or_path)
    return _read(result, samples_location(result, base_dir), columns, required, sort)


def _read(result: RunResult, path: str, columns: Sequence[str] | None, required: Iterable[str], sort: bool) -> Any:
    wanted = None if columns is None else list(dict.fromkeys(columns))
    read = None if wanted is None else wanted + ([c for c in SAMPLE_ORDER if c not in wanted] if sort else [])
    table = _read_remote(result, path, read) if _is_remote(path) else _read_local(path, read)
    names = table.schema.names
    missing = [c for c in required if c not in names]
    if missing:
        raise ConfigError(f"per-sample table {path} lacks column(s) {', '.join(missing)}")
    if sort:
        order = [(c, "ascending") for c in SAMPLE_ORDER if c in names]
        if order:
            table = table.sort_by(order)
    if wanted is not None:
        keep = [c for c in wanted if c in names]
        if keep != names:
            table = table.select(keep)
    return table


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when empty)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def try_read_samples_table(result: RunResult, columns: Sequence[str] | None = None, *, required: Iterable[str] = (),
                           base_dir: str | os.PathLike | None = None, sort: bool = True) -> tuple[Any, str | None]:
    """``(table, None)``, or ``(None, reason)`` when the table cannot be read:
    comparisons and reports still work on a run's summaries, and say why the
    per-sample part is missing."""
    try:
        path = samples_location(result, base_dir)
        return _read(result, path, columns, required, sort), None
    except ConfigError as exc:
        return None, str(exc)
    except ImportError:
        return None, "reading per-sample tables needs pyarrow: pip install 'auditkit-ray[ray]'"
    except Exception as exc:  # noqa: BLE001 - whatever makes a stored table unreadable becomes the reason
        return None, f"cannot read per-sample table {path}: {first_line(exc)}"
