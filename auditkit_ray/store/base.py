"""The result-store extension point and the local-directory store.

Writes are atomic: data goes to a temporary name in the same directory and is
then linked into place, so no reader ever sees a partial file, and a file that
is already present is never rewritten (``write_atomic`` returns False).
"""

from __future__ import annotations

import io
import os
import uuid
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import ConfigError, RunError


class ResultStore(ABC):
    """Paths are '/'-separated and relative to the store root."""

    @abstractmethod
    def write_atomic(self, rel: str, data: bytes) -> bool:
        """Write ``rel`` if absent; return False (writing nothing) if present."""

    @abstractmethod
    def read_bytes(self, rel: str) -> bytes: ...

    @abstractmethod
    def exists(self, rel: str) -> bool: ...

    @abstractmethod
    def list(self, prefix: str) -> list[str]:
        """Names (not paths) of the files directly under ``prefix``."""

    def list_dirs(self, prefix: str) -> list[str]:
        """Names of the sub-directories directly under ``prefix``."""
        return []

    #: reads kept in flight by ``read_many`` (a remote store: one request's latency each)
    prefetch: int = 8

    def read_many(self, rels: Iterable[str]) -> Iterator[bytes]:
        """The files' bytes in order, the next ``prefetch`` read ahead in
        threads while the caller works on the current one (memory: at most
        ``prefetch`` files at once)."""
        if self.prefetch <= 1:
            for rel in rels:
                yield self.read_bytes(rel)
            return
        from concurrent.futures import ThreadPoolExecutor

        todo = iter(rels)
        with ThreadPoolExecutor(self.prefetch, thread_name_prefix="auditkit-store-read") as pool:
            ahead: deque = deque()
            for rel in todo:
                ahead.append(pool.submit(self.read_bytes, rel))
                if len(ahead) >= self.prefetch:
                    break
            while ahead:
                data = ahead.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    ahead.append(pool.submit(self.read_bytes, nxt))
                yield data

    @abstractmethod
    def replace(self, rel: str, data: bytes) -> None:
        """Atomically write ``rel``, replacing any earlier version (run JSON, manifests)."""

    @abstractmethod
    def uri(self, rel: str = "") -> str: ...

    # parquet helpers ------------------------------------------------------
    def write_table(self, rel: str, table) -> bool:
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(table, buf)
        return self.write_atomic(rel, buf.getvalue())

    def read_table(self, rel: str):
        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(self.read_bytes(rel)))


class LocalStore(ResultStore):
    prefetch = 1  # a local read is cheap: no threads

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).absolute()

    def __reduce__(self):
        return (LocalStore, (str(self.root),))

    def _p(self, rel: str) -> Path:
        return self.root / rel

    def write_atomic(self, rel: str, data: bytes) -> bool:
        final = self._p(rel)
        if final.exists():
            return False
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex}")
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, final)  # fails if present: never overwrite a finished shard
                return True
            except FileExistsError:
                return False
            finally:
                tmp.unlink(missing_ok=True)
        except OSError as exc:
            raise RunError(f"result store {self.root}: cannot write {rel} ({exc.strerror or exc})") from None

    def replace(self, rel: str, data: bytes) -> None:
        final = self._p(rel)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex}")
            tmp.write_bytes(data)
            os.replace(tmp, final)
        except OSError as exc:
            raise RunError(f"result store {self.root}: cannot write {rel} ({exc.strerror or exc})") from None

    def read_bytes(self, rel: str) -> bytes:
        return self._p(rel).read_bytes()

    def exists(self, rel: str) -> bool:
        return self._p(rel).is_file()

    def list(self, prefix: str) -> list[str]:
        d = self._p(prefix)
        if not d.is_dir():
            return []
        return sorted(f.name for f in d.iterdir() if f.is_file() and not f.name.startswith("."))

    def list_dirs(self, prefix: str) -> list[str]:
        d = self._p(prefix)
        if not d.is_dir():
            return []
        return sorted(f.name for f in d.iterdir() if f.is_dir() and not f.name.startswith("."))

    def uri(self, rel: str = "") -> str:
        return str(self._p(rel)) if rel else str(self.root)


def open_store(spec: "str | object", endpoint_url: str | None = None, region: str | None = None) -> ResultStore:
    """A store from a path (a local directory, ``file://`` or
    ``s3://bucket/prefix``) or a StoreSpec carrying endpoint and region."""
    path = spec if isinstance(spec, str) else spec.path  # type: ignore[attr-defined]
    endpoint = endpoint_url or getattr(spec, "endpoint_url", None)
    region = region or getattr(spec, "region", None)
    if path.startswith("s3://"):
        from .s3 import S3Store

        return S3Store(path, endpoint_url=endpoint, region=region)
    if "://" in path and not path.startswith("file://"):
        scheme = path.split("://", 1)[0]
        raise ConfigError(f"store.path {path!r}: {scheme}:// is not supported (use a local directory or s3://bucket/prefix)")
    return LocalStore(path.removeprefix("file://"))
