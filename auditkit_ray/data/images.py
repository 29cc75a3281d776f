"""Images in samples: what a reference may be, how it is resolved, and what of it enters the fingerprint.

A reference (a value of ``dataset.images_field``, or the ``url`` of an ``image_url`` content part of a chat
message) is one of:

- a local path, relative to the dataset file's folder (or absolute): read when the sample is read, so a
  missing file fails the plan; carried as a ``file://`` URL, sent by the ``api`` backend as a base64
  ``data:`` URL; its bytes' SHA-256 enters the dataset fingerprint;
- a ``data:image/...;base64,...`` URL: the image is in the dataset file itself (and so in its hash);
- an ``https://`` (or ``http://``) URL: passed on as it is, for a backend that fetches URLs itself
  (``api``); only the URL enters the fingerprint, not what it serves;
- an ``s3://bucket/key`` URI, read through the dataset's S3 settings (``dataset.endpoint_url``,
  ``dataset.region``, else the AWS variables; ``data.location.S3Location``): checked to exist when the
  sample is read; carried as the URI; its bytes' SHA-256 enters the fingerprint as a local file's does;
  read again in the generation actor, where the backend gets it as a ``data:`` URL (``inline_s3_images``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import threading
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..core.images import IMAGE_TYPES, file_bytes, prompt_images
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
        return _s3_ref(spec, ref, what)
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


def _s3_location(spec: Any, uri: str, what: str) -> Any:
    from .location import S3Location

    try:
        return S3Location(uri, getattr(spec, "endpoint_url", None), getattr(spec, "region", None))
    except DataError as exc:
        raise DataError(f"{what}: image {exc}") from None


def _s3_ref(spec: Any, uri: str, what: str) -> str:
    """An ``s3://`` image that is there (one HEAD request), as its URI."""
    if Path(uri.partition("?")[0]).suffix.lower() not in IMAGE_TYPES:
        raise DataError(f"{what}: {uri!r} is not an image file this version reads "
                        f"(suffixes: {', '.join(sorted(IMAGE_TYPES))})")
    loc = _s3_location(spec, uri, what)
    try:
        there = loc.exists() and not loc.is_dir()
    except DataError as exc:
        raise DataError(f"{what}: image {exc}") from None
    if not there:
        raise DataError(f"{what}: image {loc.not_found()}")
    return uri


def s3_image_bytes(spec: Any, uri: str, what: str) -> bytes:
    """The bytes of an ``s3://`` image, read with the dataset's S3 settings; errors name ``what`` and the URI."""
    loc = _s3_location(spec, uri, what)
    try:
        return loc.read_bytes()
    except DataError as exc:
        text = str(exc).replace("dataset file not found", "not found")
        raise DataError(f"{what}: image {text}") from None


def inline_s3_images(spec: Any, request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with each ``s3://`` image of its prompt as a base64 ``data:`` URL, for the backend: a
    copy, so the per-sample table keeps the URI. ``spec`` is the dataset's (its S3 settings)."""
    prompt = request.get("prompt")
    if not isinstance(prompt, list) or not any(u.startswith("s3://") for u in prompt_images(prompt)):
        return request
    what = f"sample {request.get('sample_id')!r}"
    msgs = []
    for m in prompt:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            parts = []
            for p in content:
                url = (p.get("image_url") or {}).get("url") if isinstance(p, dict) else None
                if isinstance(url, str) and url.startswith("s3://"):
                    mime = IMAGE_TYPES.get(Path(url).suffix.lower(), "application/octet-stream")
                    data = base64.b64encode(s3_image_bytes(spec, url, what)).decode("ascii")
                    p = {**p, "image_url": {**p["image_url"], "url": f"data:{mime};base64,{data}"}}
                parts.append(p)
            m = {**m, "content": parts}
        msgs.append(m)
    return {**request, "prompt": msgs}


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


_DIGESTS: dict[tuple[Any, ...], str] = {}


_S3_CLIENTS: dict[tuple[str | None, str | None], Any] = {}
_S3_LOCK = threading.Lock()


def _s3_version(spec: Any, uri: str) -> str | None:
    """The object's ETag, size and modification time (one HEAD request), which tell a cached hash from a
    stale one; None when they cannot be had (the read that follows then names the reason)."""
    try:
        from ..store.s3 import s3_client, split_s3_uri

        key = (getattr(spec, "endpoint_url", None), getattr(spec, "region", None))
        with _S3_LOCK:
            client = _S3_CLIENTS.get(key) or _S3_CLIENTS.setdefault(key, s3_client(*key))
        bucket, name = split_s3_uri(uri)
        head = client.head_object(Bucket=bucket, Key=name)
        return f"{head.get('ETag')}|{head.get('ContentLength')}|{head.get('LastModified')}"
    except Exception:  # noqa: BLE001 - unexplained here: s3_image_bytes names it
        return None


def s3_digest(spec: Any, uri: str, what: str) -> str:
    """SHA-256 of an ``s3://`` image's bytes, kept within the process per (endpoint, object, ETag, size,
    modification time). The bytes, not the ETag, are the identity: an ETag is no content hash for multipart
    or encrypted uploads and differs between S3-compatible servers; it only says when to read them again."""
    version = _s3_version(spec, uri)
    key = (getattr(spec, "endpoint_url", None), uri, version)
    if version is None or key not in _DIGESTS:
        value = hashlib.sha256(s3_image_bytes(spec, uri, what)).hexdigest()
        if version is None:
            return value
        _DIGESTS[key] = value
    return _DIGESTS[key]


def digest(url: str) -> str:
    """SHA-256 of a ``file://`` image's bytes, kept per (path, size, mtime) within the process."""
    path = Path(unquote(urlparse(url).path))
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(file_bytes(url)).hexdigest()
    return _DIGESTS[key]


def images_identity(spec: Any, records: list[tuple[str, dict]]) -> dict[str, Any] | None:
    """What of the dataset's local and ``s3://`` images enters its fingerprint: SHA-256 over each such image's
    reference and bytes, in record order; None when no record names one (data: and https URLs are in the
    dataset's own bytes)."""
    h = hashlib.sha256()
    n = n_s3 = 0
    field = getattr(spec, "images_field", None)
    for where, rec in records:
        rid = rec.get(getattr(spec, "id_field", "id"))
        what = f"{where}: sample {str(rid)!r}" if rid not in (None, "") else where
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
            if not isinstance(ref, str) or ref.startswith(("data:", "https://", "http://")):
                continue
            url = resolve_ref(spec, ref, what)
            h.update(ref.encode())
            h.update(b"\0")
            if url.startswith("s3://"):
                h.update(s3_digest(spec, url, what).encode())
                n_s3 += 1
            else:
                h.update(digest(url).encode())
                n += 1
    if not n and not n_s3:
        return None
    out: dict[str, Any] = {"local_images": n, "hash": h.hexdigest()}
    if n_s3:  # only then: the fingerprints of datasets of local images stay as they were
        out["s3_images"] = n_s3
    return out
