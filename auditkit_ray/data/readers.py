"""Read a dataset file into ``Sample`` objects with stable ids.

Errors name the file and the line (or row) and never leave a half-read
dataset behind: a dataset is read whole before any work starts.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Iterator

from ..core.limits import MAX_DEPTH
from ..core.rowjson import loads as row_loads
from ..core.shown import shown_text
from ..core.types import Sample, content_id
from ..errors import DataError, require
from .images import resolve_message_parts, sample_images
from .location import LocalLocation, Location, locate

_SUFFIX = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def detect_format(path: Path | Location, declared: str | None) -> str:
    """The dataset's format: ``declared``, else a directory's content or the file's suffix.
    ``path`` is a local path or a ``Location`` (``data.location``: local or S3)."""
    loc = locate(path)
    if declared:
        return declared
    if loc.is_dir():
        if loc.has("dataset_info.json") or loc.has("dataset_dict.json"):
            return "hf"
        if loc.parquet_files():
            return "parquet"
        raise DataError(f"{loc}: a directory, but neither a saved HF dataset nor Parquet files; set dataset.format")
    fmt = _SUFFIX.get(loc.suffix.lower())
    if fmt is None:
        raise DataError(f"{loc}: cannot tell the format from the suffix {loc.suffix!r}; set dataset.format")
    return fmt


def decode_text(path: Path | Location) -> str:
    path = locate(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise path.not_found() from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read dataset ({exc.strerror or exc})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)  # the decoder counts after the mark
        line = raw[:start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: dataset is not valid UTF-8 (byte {start})") from None


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep to read"
    return shown_text(getattr(exc, "msg", None) or str(exc), 120)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and mappings more than ``limit`` deep (walked without recursion: only
    asked of rows whose text has that many brackets)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            if depth > limit:
                return True
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def _jsonl(path: Location) -> Iterator[tuple[str, dict]]:
    return jsonl_records(path, decode_text(path))


def _split_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` as ``io.StringIO(text)`` gives them (split at "\\n", each with its "\\n"), one at a
    time: a StringIO holds a copy of the text at four bytes a character."""
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start)
        if stop < 0:
            yield text[start:]
            return
        yield text[start:stop + 1]
        start = stop + 1


def jsonl_records(path: Path | Location | str, text: str, first_line: int = 1) -> Iterator[tuple[str, dict]]:
    """JSON Lines ``text`` (part of ``path`` that starts at line
    ``first_line``) as (where, record); blank lines are skipped."""
    for i, line in enumerate(_split_lines(text), start=first_line):
        if line.strip():
            yield _record(path, i, line)


def _record(path: Any, i: int, line: str) -> tuple[str, dict]:
    """(where, record) of line ``i``, a JSON object no deeper than ``MAX_DEPTH``."""
    try:
        rec = row_loads(line)
    except (ValueError, RecursionError) as exc:  # a JSONDecodeError; an integer of thousands of digits
        raise DataError(f"{path}:{i}: invalid JSON line ({_why(exc)})") from None
    if (line.count("[") + line.count("{") > MAX_DEPTH) and _deeper_than(rec, MAX_DEPTH):
        raise DataError(f"{path}:{i}: a row nested more than {MAX_DEPTH} levels deep (the limit)")
    if not isinstance(rec, dict):
        raise DataError(f"{path}:{i}: each line must be a JSON object, got {type(rec).__name__}")
    return f"{path}:{i}", rec


def _json(path: Location) -> Iterator[tuple[str, dict]]:
    text = decode_text(path)
    try:
        data = row_loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{path}: invalid JSON ({_why(exc)})") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(data, MAX_DEPTH + 1):
        raise DataError(f"{path}: a row nested more than {MAX_DEPTH} levels deep (the limit)")
    if isinstance(data, dict):
        for key in ("data", "samples", "examples", "rows"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of objects (or {{'data': [...]}})")
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise DataError(f"{path}: item {i} is {type(rec).__name__}, not an object")
        yield f"{path}[{i}]", rec


def _csv(path: Location) -> Iterator[tuple[str, dict]]:
    reader = csv.DictReader(io.StringIO(decode_text(path), newline=""))
    for i, rec in enumerate(reader, start=2):
        if None in rec:
            raise DataError(f"{path}:{i}: more fields than the header has")
        yield f"{path}:{i}", dict(rec)


def parquet_table(path: Path | Location) -> Any:
    path = locate(path)
    try:
        return path.read_parquet()
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types
        raise DataError(f"{path}: cannot read Parquet ({exc})") from None


def parquet_files(path: Path | Location) -> list[Location]:
    """The Parquet files of a dataset: the file, or a directory's, by name."""
    return locate(path).parquet_files()


def _parquet(path: Location) -> Iterator[tuple[str, dict]]:
    for i, rec in enumerate(parquet_table(path).to_pylist()):
        yield f"{path} row {i}", rec


def _hf(path: Path, split: str | None) -> Iterator[tuple[str, dict]]:
    datasets = require("datasets", "lmeval")
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"{path}: cannot load HF dataset from disk ({exc})") from None
    if isinstance(ds, datasets.DatasetDict):
        if split is None:
            raise DataError(f"{path}: a DatasetDict with splits {list(ds)}; set dataset.split")
        if split not in ds:
            raise DataError(f"{path}: no split {split!r} (have {list(ds)})")
        ds = ds[split]
    for i, rec in enumerate(ds):
        yield f"{path} row {i}", dict(rec)


def read_records(path: str | Path | Location, fmt: str | None = None, split: str | None = None, *,
                 endpoint_url: str | None = None, region: str | None = None,
                 field: str | None = None) -> list[tuple[str, dict]]:
    """(where, record) pairs in file order; ``where`` names file and line.
    ``path``: a local path or an ``s3://`` URI (on ``endpoint_url``/``region``, else the AWS environment's).
    ``field``: the run file's field that names it, for the message when it is not there."""
    p = locate(path, endpoint_url, region)
    if not p.exists():
        raise p.not_found(field)
    kind = detect_format(p, fmt)
    if kind == "jsonl":
        return list(_jsonl(p))
    if kind == "json":
        return list(_json(p))
    if kind == "csv":
        return list(_csv(p))
    if kind == "parquet":
        return [r for f in parquet_files(p) for r in _parquet(f)]
    if not isinstance(p, LocalLocation):
        raise DataError(f"{p}: a saved HF dataset (format 'hf') is read from a local directory only; "
                        "store it as Parquet (Dataset.to_parquet) to read it from S3")
    return list(_hf(p.path, split))


def dataset_location(spec: Any) -> Location:
    """Where ``dataset.path`` is, with the dataset's S3 endpoint and region."""
    return locate(spec.path, spec.endpoint_url, spec.region)


_LAST_READ: list[tuple[tuple, list[tuple[str, dict]]]] = []

#: a local JSON Lines file at least this large is not kept after a read (``dataset_records``), and is read a
#: piece at a time where the records are only passed over (``iter_dataset_records``)
STREAM_BYTES = 64 << 20


def forget_last_read() -> None:
    """Drop the records ``dataset_records`` keeps of its last read: the plan calls it once it has them, so a
    run does not hold its dataset's records for its whole length."""
    _LAST_READ.clear()


#: bytes a pass over a file (``file_lines``) reads at a time
SCAN_CHUNK = 1 << 20


def file_lines(loc: Location) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, bytes without the newline) of each line of a file split at "\\n" as
    ``decode_text`` and ``jsonl_records`` split it (a UTF-8 byte order mark at the start is not part of the
    first line), read ``SCAN_CHUNK`` bytes at a time and a line at a time; a line that is not UTF-8 fails as
    ``decode_text`` fails."""
    with loc.open_stream() as f:
        buf, lineno, pos = b"", 0, 0  # base: the file offset of buf[0]
        head = f.read(3)
        chunk = f.read(SCAN_CHUNK) if head == b"\xef\xbb\xbf" else head + f.read(SCAN_CHUNK)
        base = 3 if head == b"\xef\xbb\xbf" else 0
        while True:
            buf, base, pos = buf[pos:] + chunk, base + pos, 0
            while True:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    break
                lineno += 1
                yield lineno, base + pos, _checked(loc, buf[pos:nl], lineno, base + pos)
                pos = nl + 1
            chunk = f.read(SCAN_CHUNK)
            if not chunk:
                if pos < len(buf):  # a last line without a newline
                    lineno += 1
                    yield lineno, base + pos, _checked(loc, buf[pos:], lineno, base + pos)
                return


def _checked(loc: Location, line: bytes, lineno: int, offset: int) -> bytes:
    if not line.isascii():
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{loc}:{lineno}: dataset is not valid UTF-8 (byte {offset + exc.start})") from None
    return line


def is_blank(line: bytes) -> bool:
    """A line ``jsonl_records`` skips (``str.strip`` leaves nothing)."""
    return not (line.strip() if line.isascii() else line.decode("utf-8").strip())


def _jsonl_stream(loc: Location) -> Iterator[tuple[str, dict]]:
    """``_jsonl``'s records, read a piece at a time."""
    for i, _, line in file_lines(loc):
        if not is_blank(line):
            yield _record(loc, i, line.decode("utf-8"))


def iter_dataset_records(spec: Any) -> Iterator[tuple[str, dict]]:
    """``dataset_records(spec)`` one record at a time: a large local JSON Lines file is read a piece at a
    time and never held whole (the fingerprint's pass over the records); anything else as it reads."""
    if not spec.hub:
        loc = dataset_location(spec)
        if (isinstance(loc, LocalLocation) and loc.path.is_file() and loc.size() >= STREAM_BYTES
                and detect_format(loc, spec.format) == "jsonl"):
            yield from _jsonl_stream(loc)
            return
    yield from dataset_records(spec)


def dataset_records(spec: Any) -> list[tuple[str, dict]]:
    """The records of the dataset a ``DatasetSpec`` names: a file or directory
    (local or S3), or a Hub dataset (``dataset.hub``). A local file read twice in a row unchanged (the
    fingerprint's view of it, then the plan) is parsed once: the last read is kept."""
    if spec.hub:
        from .hub import hub_records

        return hub_records(spec)
    loc = dataset_location(spec)
    key = None
    if isinstance(loc, LocalLocation) and loc.path.is_file():
        st = loc.path.stat()
        key = (str(loc.path), st.st_size, st.st_mtime_ns, spec.format, spec.split)
        if _LAST_READ and _LAST_READ[0][0] == key:
            return list(_LAST_READ[0][1])
    records = read_records(loc, spec.format, spec.split, field="dataset.path")
    _LAST_READ[:] = [(key, records)] if key is not None and key[1] < STREAM_BYTES else []
    return list(records)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


#: columns that map onto Sample's RAG and agent fields when a dataset has them
STRUCTURED_FIELDS = (
    "retrieved_contexts",
    "gold_evidence",
    "corpus_snapshot",
    "tools",
    "reference_tool_calls",
    "expected_state",
)


def load_samples(spec: Any, locations: dict[str, str] | None = None) -> tuple[list[Sample], list[dict]]:
    """Samples and their raw records (the prompt template reads the records); ``locations``: filled with
    each sample's place in the dataset (``file:line``), for errors found later (a prompt that cannot be
    built)."""
    records = dataset_records(spec)
    if spec.limit:
        records = records[: spec.limit]
    if not records:
        raise DataError(f"{spec.hub or spec.path}: the dataset has no samples")
    samples: list[Sample] = []
    raws: list[dict] = []
    seen: dict[str, str] = {}
    for where, rec in records:
        rid = given_id(spec, rec)
        if rid is None:
            base = content_id(rec)
            rid, k = base, 1
            while rid in seen:  # identical content: deterministic suffix
                k += 1
                rid = f"{base}~{k}"
        elif rid in seen:
            raise DataError(f"{where}: duplicate sample id {rid!r} (first at {seen[rid]})")
        seen[rid] = where
        if locations is not None:
            locations[rid] = where
        samples.append(sample_of(spec, where, rec, rid))
        raws.append(rec)
    return samples, raws


def given_id(spec: Any, rec: dict) -> str | None:
    """The record's own id (``dataset.id_field``), or None when it has none
    (its id is then derived from its content)."""
    rid = rec.get(spec.id_field)
    if rid is None or rid == "":
        return None
    return _text(rid)


def sample_of(spec: Any, where: str, rec: dict, rid: str) -> Sample:
    """One record as a validated ``Sample`` with id ``rid``; a record that
    does not fit names ``where`` (file and line)."""
    target = rec.get(spec.target_field) if spec.target_field else None
    if isinstance(target, list):
        target = [_text(t) for t in target]
    elif target is not None:
        target = _text(target)
    choices = rec.get(spec.choices_field) if spec.choices_field else None
    inp = rec.get(spec.input_field)
    structured = {k: rec[k] for k in STRUCTURED_FIELDS if rec.get(k) is not None}
    extra = {
        k: v
        for k, v in rec.items()
        if k not in (spec.id_field, spec.target_field, spec.input_field) and k not in structured
    }
    images = sample_images(spec, where, rid, rec)
    try:
        sample = Sample(
            id=rid,
            input=_text(inp) if inp is not None and not isinstance(inp, list) else (inp or ""),
            images=images,
            target=target,
            choices=[_text(c) for c in choices] if isinstance(choices, list) else None,
            metadata=extra,
            **structured,
        )
    except Exception as exc:  # noqa: BLE001 - pydantic error for odd shapes
        raise DataError(f"{where}: sample {rid!r} cannot be read: {str(exc).splitlines()[0]}") from None
    if isinstance(sample.input, list):
        resolve_message_parts(spec, where, rid, sample.input)
    return sample
