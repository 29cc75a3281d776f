"""The result-store extension point: what every store (local, S3) implements.

Writes are atomic: data goes to a temporary name (or a conditional PUT) and a
reader never sees a partial file; a file that is already present is never
rewritten (``write_atomic`` returns False). The stores themselves live in
``base`` (local directory, ``open_store``) and ``s3``, both over this module.
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator


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

    def check(self) -> None:
        """Fail now, with a ConfigError naming the store, when it cannot be used (a path that is a file, an
        endpoint that does not answer): a run checks its store before any work. A store that passes may still
        fail later (a disk filling up, an outage mid-run)."""

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

    def local_path(self, rel: str) -> str | None:
        """The file's path on this machine's file system, for a reader that reads only part of it (a Parquet
        footer, one column); None for a store that is not local."""
        return None

    def walk(self, prefix: str) -> list[tuple[str, int, float]]:
        """Every file under ``prefix``, at any depth: (path relative to the store root, bytes, modification time
        as a POSIX timestamp). What ``auditkit-ray cache`` sizes and ages entries with."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its files with sizes")

    def delete(self, rels: Iterable[str]) -> int:
        """Remove these files (absent ones are skipped); returns how many were removed. Only ``auditkit-ray
        cache clear`` removes anything from a store: a finished shard is otherwise never rewritten."""
        raise NotImplementedError(f"{type(self).__name__} cannot delete files")

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
