"""The local-directory result store, and ``open_store`` (a store from a path).

Writes are atomic: data goes to a temporary name in the same directory and is
then linked into place, so no reader ever sees a partial file, and a file that
is already present is never rewritten (``write_atomic`` returns False).
``ResultStore`` (the extension point) lives in ``interface`` and is
re-exported here.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from ..errors import ConfigError, RunError
from .interface import ResultStore

__all__ = ["LocalStore", "ResultStore", "open_store"]


class LocalStore(ResultStore):
    prefetch = 1  # a local read is cheap: no threads

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).absolute()

    def __reduce__(self):
        return (LocalStore, (str(self.root),))

    def _p(self, rel: str) -> Path:
        return self.root / rel

    def check(self) -> None:
        """The root is a directory, or can be made one: its nearest existing folder is a writable directory."""
        p = self.root
        while not p.exists():
            if p.is_symlink():  # a dangling link: nothing can be made under it
                raise ConfigError(f"store.path {self.root}: {p} is a broken symbolic link")
            p = p.parent
        if not p.is_dir():
            raise ConfigError(f"store.path {self.root}: {'it' if p == self.root else p} is a file, not a directory "
                              "(a result store is a folder, or s3://bucket/prefix)")
        if not os.access(p, os.W_OK | os.X_OK):
            raise ConfigError(f"store.path {self.root}: {p} is not writable")

    def local_path(self, rel: str) -> str | None:
        return str(self._p(rel))

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

    def walk(self, prefix: str) -> list[tuple[str, int, float]]:
        d = self._p(prefix)
        if not d.is_dir():
            return []
        out = []
        for f in sorted(d.rglob("*")):
            if f.is_file() and not f.name.startswith("."):
                st = f.stat()
                out.append((f.relative_to(self.root).as_posix(), st.st_size, st.st_mtime))
        return out

    def delete(self, rels: Iterable[str]) -> int:
        n = 0
        for rel in rels:
            p = self._p(rel)
            try:
                p.unlink()
                n += 1
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise RunError(f"result store {self.root}: cannot delete {rel} ({exc.strerror or exc})") from None
            for parent in p.parents:  # directories left empty go too (a cleared entry leaves nothing behind)
                if parent == self.root or self.root not in parent.parents:
                    break
                try:
                    parent.rmdir()
                except OSError:
                    break
        return n

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

        timeouts = {k: getattr(spec, k) for k in ("connect_timeout_s", "retries") if getattr(spec, k, None) is not None}
        return S3Store(path, endpoint_url=endpoint, region=region, **timeouts)
    if "://" in path and not path.startswith("file://"):
        scheme = path.split("://", 1)[0]
        raise ConfigError(f"store.path {path!r}: {scheme}:// is not supported "
                          "(use a local directory or s3://bucket/prefix)")
    return LocalStore(path.removeprefix("file://"))
