"""Images in samples: what a reference may be, how it is resolved, and what of it enters the fingerprint.

A reference (a value of ``dataset.images_field``, or the ``url`` of an ``image_url`` content part of a chat
message) is one of:

- a local path, relative to the dataset file's folder (or absolute): read when the sample is read, so a
  missing file fails the plan; carried as a ``file://`` URL, sent by the ``api`` backend as a base64
  ``data:`` URL; its bytes' SHA-256 enters the dataset fingerprint;
- a ``data:image/...;base64,...`` URL: the image is in the dataset file itself (and so in its hash);
- an ``https://`` (or ``http://``) URL: passed on as it is, for a backend that fetches URLs itself
  (``api``); only the URL enters the fingerprint, not what it serves.

``s3://`` images are refused for now, with a message saying so.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..core.images import IMAGE_TYPES, file_bytes
from ..errors import DataError

#: the data root the cluster's operator may set (``pipeline/plan.py`` reads the same variable)
DATA_ROOT_ENV = "AUDITKIT_RAY_DATA_ROOT"


def _base_dir(spec: Any) -> Path | None:
    """The folder relative image paths are read from: the dataset file's (or directory's) own."""
    path = getattr(spec, "path", None)
    if not path or "://" in path:
        return None
    p = Path(path)
    return p if p.is_dir() else p.parent


def resolve_ref(spec: Any, ref: Any, what: str) -> str:
    """One image reference as the URL a prompt carries (``file://`` for a local file); ``what`` names the
    sample and field in errors."""
    if not isinstance(ref, str) or not ref.strip():
        raise DataError(f"{what}: an image reference is a path or URL string, got {ref!r}")
    if ref.startswith("data:"):
        head, sep, payload = ref.partition(",")
        if not sep or not head.startswith("data:image/") or not head.endswith(";base64"):
            raise DataError(f"{what}: a data URL image must read data:image/<type>;base64,<data>")
        try:
            base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise DataError(f"{what}: the data URL image is not valid base64") from None
        return ref
    if ref.startswith(("https://", "http://")):
        return ref
    if ref.startswith("s3://"):
        raise DataError(f"{what}: s3:// images are not supported yet ({ref}); use a local path, a data: URL "
                        "or an https URL")
    if ref.startswith("file://"):
        path = Path(unquote(urlparse(ref).path))
    elif "://" in ref:
        raise DataError(f"{what}: unsupported image URL scheme in {ref!r} (a local path, data:, https:// or http://)")
    else:
        path = Path(ref).expanduser()
        if not path.is_absolute():
            base = _base_dir(spec)
            if base is None:
                raise DataError(f"{what}: the relative image path {ref!r} needs a local dataset file to be "
                                "relative to; give an absolute path, a data: URL or an https URL")
            path = base / path
    if not path.is_file():
        raise DataError(f"{what}: image file {str(path)!r} not found")
    root = os.environ.get(DATA_ROOT_ENV)
    if root:  # as for the files a config names (pipeline/plan.py check_data_root): no way out of the data root
        base, resolved = Path(root).resolve(), path.resolve()
        if resolved != base and base not in resolved.parents:
            raise DataError(f"{what}: image {ref!r} resolves to {resolved}, outside the data root {base} "
                            f"({DATA_ROOT_ENV})")
    if path.suffix.lower() not in IMAGE_TYPES:
        raise DataError(f"{what}: {str(path)!r} is not an image file this version reads "
                        f"(suffixes: {', '.join(sorted(IMAGE_TYPES))})")
    return path.resolve().as_uri()


def sample_images(spec: Any, where: str, rid: str, rec: dict) -> list[str] | None:
    """The resolved references of a record's ``dataset.images_field`` (one reference or a list), or None
    when the dataset names no images field or the record has no value in it."""
    field = getattr(spec, "images_field", None)
    if not field:
        return None
    value = rec.get(field)
    if value is None or value == []:
        return None
    refs = value if isinstance(value, list) else [value]
    return [resolve_ref(spec, r, f"{where}: sample {rid!r} field {field!r}") for r in refs]


def resolve_message_parts(spec: Any, where: str, rid: str, messages: list[Any]) -> None:
    """Resolve, in place, the ``image_url`` parts of validated chat messages (``core.types.Message``)."""
    for i, m in enumerate(messages):
        if isinstance(m.content, list):
            for j, part in enumerate(m.content):
                if part.image_url is not None:
                    part.image_url.url = resolve_ref(spec, part.image_url.url,
                                                     f"{where}: sample {rid!r} message {i} part {j}")


_DIGESTS: dict[tuple[str, int, int], str] = {}


def digest(url: str) -> str:
    """SHA-256 of a ``file://`` image's bytes, kept per (path, size, mtime) within the process."""
    path = Path(unquote(urlparse(url).path))
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(file_bytes(url)).hexdigest()
    return _DIGESTS[key]


def images_identity(spec: Any, records: list[tuple[str, dict]]) -> dict[str, Any] | None:
    """What of the dataset's local images enters its fingerprint: SHA-256 over each local image's reference
    and bytes, in record order; None when no record names a local image (data: and https URLs are in the
    dataset's own bytes)."""
    h = hashlib.sha256()
    n = 0
    field = getattr(spec, "images_field", None)
    for where, rec in records:
        refs: list[Any] = []
        if field and rec.get(field) is not None:
            value = rec[field]
            refs += value if isinstance(value, list) else [value]
        inp = rec.get(spec.input_field)
        if isinstance(inp, list):
            for m in inp:
                content = m.get("content") if isinstance(m, dict) else None
                if isinstance(content, list):
                    refs += [(p.get("image_url") or {}).get("url") for p in content
                             if isinstance(p, dict) and p.get("type") == "image_url"]
        for ref in refs:
            if not isinstance(ref, str) or ref.startswith(("data:", "https://", "http://", "s3://")):
                continue
            url = resolve_ref(spec, ref, where)
            h.update(ref.encode())
            h.update(b"\0")
            h.update(digest(url).encode())
            n += 1
    return {"local_images": n, "hash": h.hexdigest()} if n else None
