"""Where a dataset file lives: a local path or an ``s3://`` URI.

The readers take either through one small interface (``Location``), so that
an ``s3://bucket/key`` is never turned into a ``Path`` (which would fold its
``//``). S3 goes through pyarrow's S3 filesystem
(``auditkit_ray.store.s3.arrow_s3_filesystem``): the endpoint and region from
the run file (``dataset.endpoint_url``, ``dataset.region``) or the AWS
environment, the credentials only from the environment.

An S3 location's ``content_hash`` is computed by ``pipeline.identity.hash_path``'s
rule (an object: its bytes alone; a prefix: each object's name relative to it,
then its bytes), so the same files locally and on S3 have the same dataset
fingerprint, whatever the file and the object are called.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

from ..errors import DataError


def is_s3(path: Any) -> bool:
    return isinstance(path, str) and path.startswith("s3://")


class Location:
    """A dataset file or directory; ``str()`` is how messages name it."""

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    def exists(self) -> bool: ...
    def is_dir(self) -> bool: ...
    def has(self, child: str) -> bool: ...
    def read_bytes(self) -> bytes: ...
    def size(self) -> int: ...
    def parquet_files(self) -> list[Location]: ...
    def read_parquet(self) -> Any: ...

    def open_stream(self) -> Any:
        """The file's bytes as a binary file that reads in pieces and seeks (a large file is never held whole)."""
        raise NotImplementedError

    def parquet_file(self) -> Any:
        """The file as a ``pyarrow.parquet.ParquetFile`` (its row groups read one at a time)."""
        raise NotImplementedError

    def not_found(self, field: str | None = None) -> DataError:
        """``field``: the run file's field that names it (``dataset.path``...), said first when known."""
        if field:
            where = f" ({Path(self.name).absolute()})" if not is_s3(self.name) else ""
            return DataError(f"{field} {self.name!r}: file not found{where}")
        return DataError(f"{self.name}: dataset file not found")

    def is_file(self) -> bool:
        return self.exists() and not self.is_dir()


class LocalLocation(Location):
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.name = str(self.path)

    def exists(self) -> bool:
        return self.path.exists()

    def is_dir(self) -> bool:
        return self.path.is_dir()

    def has(self, child: str) -> bool:
        return (self.path / child).exists()

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()

    def size(self) -> int:
        return self.path.stat().st_size

    def parquet_files(self) -> list[Location]:
        return [LocalLocation(p) for p in sorted(self.path.glob("*.parquet"))] if self.is_dir() else [self]

    def read_parquet(self) -> Any:
        from ..errors import require

        return require("pyarrow.parquet", "ray").read_table(self.path)

    def open_stream(self) -> Any:
        return open(self.path, "rb")

    def parquet_file(self) -> Any:
        from ..errors import require

        return require("pyarrow.parquet", "ray").ParquetFile(self.path)


class S3Location(Location):
    """An object or a prefix in an S3 bucket."""

    def __init__(self, uri: str, endpoint_url: str | None = None, region: str | None = None) -> None:
        from ..store.s3 import arrow_s3_filesystem, split_s3_uri

        bucket, key = split_s3_uri(uri)
        if not bucket:
            raise DataError(f"{uri}: an s3:// URI names a bucket: s3://bucket/key")
        self.name = uri.rstrip("/") if key else uri
        self.key = f"{bucket}/{key}" if key else bucket
        self.endpoint_url, self.region = endpoint_url, region
        self.fs = arrow_s3_filesystem(endpoint_url, region)
        self._info: Any = None

    def __reduce__(self):
        return (S3Location, (self.name, self.endpoint_url, self.region))

    def _failed(self, exc: Exception) -> DataError:
        from ..core.secrets import scrub_text

        text = str(exc)
        for var in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"):
            if os.environ.get(var):
                text = text.replace(os.environ[var], "***")
        low = text.lower()
        if "access_denied" in low or "accessdenied" in low or "forbidden" in low or "403" in low:
            return DataError(f"{self.name}: access denied; check the AWS credentials in the environment "
                             "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, or the machine's role) and the bucket policy")
        if "network_connection" in low or "could not resolve" in low or "couldn't connect" in low:
            from ..store.s3 import s3_endpoint

            return DataError(f"{self.name}: the S3 endpoint {s3_endpoint(self.endpoint_url) or '(AWS)'} cannot be "
                             "reached; set dataset.endpoint_url or AWS_ENDPOINT_URL")
        if "nosuchbucket" in low or "no_such_bucket" in low or "bucket does not exist" in low:
            return DataError(f"{self.name}: no such bucket; check the URI and dataset.endpoint_url")
        first = scrub_text(text).strip().splitlines()[0] if text.strip() else type(exc).__name__
        return DataError(f"{self.name}: cannot read from S3 ({first})")

    def _stat(self) -> Any:
        if self._info is None:
            try:
                self._info = self.fs.get_file_info(self.key)
            except OSError as exc:
                raise self._failed(exc) from None
        return self._info

    def exists(self) -> bool:
        from pyarrow.fs import FileType

        return self._stat().type != FileType.NotFound

    def is_dir(self) -> bool:
        from pyarrow.fs import FileType

        return self._stat().type == FileType.Directory

    def _files(self) -> list[Any]:
        """Every object under the prefix, by name relative to it, as ``pipeline.identity.hash_path`` orders them."""
        from pyarrow.fs import FileSelector, FileType

        try:
            infos = self.fs.get_file_info(FileSelector(self.key, recursive=True))
        except OSError as exc:
            raise self._failed(exc) from None
        files = [i for i in infos if i.type == FileType.File and not i.base_name.startswith(".")]
        return sorted(files, key=lambda i: PurePosixPath(i.path).parts)

    def _child(self, info: Any) -> S3Location:
        loc = S3Location(f"s3://{info.path}", self.endpoint_url, self.region)
        loc._info = info
        return loc

    def has(self, child: str) -> bool:
        return S3Location(f"{self.name}/{child}", self.endpoint_url, self.region).exists()

    def read_bytes(self) -> bytes:
        try:
            with self.fs.open_input_stream(self.key) as f:
                return f.read()
        except FileNotFoundError:
            raise DataError(f"{self.name}: dataset file not found") from None
        except OSError as exc:
            raise self._failed(exc) from None

    def size(self) -> int:
        return int(self._stat().size or 0)

    def parquet_files(self) -> list[Location]:
        if not self.is_dir():
            return [self]
        prefix = self.key + "/"
        return [self._child(i) for i in self._files()
                if i.path.endswith(".parquet") and "/" not in i.path[len(prefix):]]

    def read_parquet(self) -> Any:
        from ..errors import require

        pq = require("pyarrow.parquet", "s3")
        try:
            return pq.read_table(self.key, filesystem=self.fs)
        except OSError as exc:
            raise self._failed(exc) from None

    def open_stream(self) -> Any:
        try:
            return self.fs.open_input_file(self.key)  # random access: a part is read from its offset
        except FileNotFoundError:
            raise DataError(f"{self.name}: dataset file not found") from None
        except OSError as exc:
            raise self._failed(exc) from None

    def parquet_file(self) -> Any:
        from ..errors import require

        pq = require("pyarrow.parquet", "s3")
        try:
            return pq.ParquetFile(self.fs.open_input_file(self.key))
        except OSError as exc:
            raise self._failed(exc) from None

    def not_found(self, field: str | None = None) -> DataError:
        from pyarrow.fs import FileType

        bucket = self.key.partition("/")[0]
        try:
            there = self.fs.get_file_info(bucket).type != FileType.NotFound
        except OSError as exc:
            return self._failed(exc)
        name = f"{field} {self.name!r}" if field else self.name
        if not there:
            return DataError(f"{name}: no such bucket {bucket!r}; check the URI and the endpoint "
                             "(dataset.endpoint_url or AWS_ENDPOINT_URL)")
        return DataError(f"{name}: no such object or prefix in bucket {bucket!r}")

    def content_hash(self) -> str:
        """SHA-256 as ``pipeline.identity.hash_path`` computes it for the same files on disk; cached
        per (object, size, modification time) within the process."""
        if self.is_dir():
            root = self.key + "/"
            infos = self._files()
            items = [(i.path[len(root):], i.path) for i in infos]
        else:
            infos = [self._stat()]
            items = [(None, self.key)]  # one object: its bytes alone, as hash_path does for one file
        key = (self.endpoint_url, *((i.path, i.size, i.mtime_ns) for i in infos))
        if key not in _HASHES:
            try:
                _HASHES[key] = _digest(self.fs, items)
            except OSError as exc:
                raise self._failed(exc) from None
        return _HASHES[key]


_HASHES: dict[tuple, str] = {}


def _digest(fs: Any, items: Iterable[tuple[str | None, str]]) -> str:
    h = hashlib.sha256()
    for rel, key in items:
        if rel is not None:
            h.update(rel.encode())
            h.update(b"\0")
        with fs.open_input_stream(key) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def locate(path: str | os.PathLike | Location, endpoint_url: str | None = None,
           region: str | None = None) -> Location:
    """The location ``path`` names: an ``s3://`` URI or a local path."""
    if isinstance(path, Location):
        return path
    if is_s3(path):
        return S3Location(str(path), endpoint_url, region)
    return LocalLocation(path)
