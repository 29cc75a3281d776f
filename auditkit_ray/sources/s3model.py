"""Checkpoints under an ``s3://bucket/prefix/`` on any S3-compatible endpoint.

Identity: the prefix's *ETag manifest* (every object's relative key, size and
ETag), hashed (``content_id``). The driver lists the prefix once, when the
run is planned (``resolve``), and the run's identity carries that hash, not
the URI: the same bytes under two URIs are one model, new bytes under one URI
another.

Each node downloads a checkpoint once (``fetch``) into its own cache
directory (``AUDITKIT_RAY_MODEL_CACHE``, default
``~/.cache/auditkit-ray/models``), as ``<cache>/<content id>/``. The
download holds an exclusive ``fcntl`` lock on ``<content id>.lock``, so the
actors of one node wait for one download and then load it. It is written to
``.partial-<content id>-<pid>/``, every object checked for its size (and its
MD5 where the ETag is a plain one) and only then renamed into place: a
download killed midway leaves a partial directory that is never loaded and
is removed by the next download. Every completed download appends a line to
``<cache>/downloads.jsonl`` (the node's own record of what it fetched).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ModelSourceError, RunError

MODEL_CACHE_ENV = "AUDITKIT_RAY_MODEL_CACHE"
RECORD = "downloads.jsonl"
MANIFEST = ".auditkit-manifest.json"
_MD5 = re.compile(r"^[0-9a-f]{32}$")


def is_s3(path: str) -> bool:
    return path.startswith("s3://")


def cache_root() -> Path:
    return Path(os.environ.get(MODEL_CACHE_ENV) or "~/.cache/auditkit-ray/models").expanduser()


def split(uri: str) -> tuple[str, str]:
    """(bucket, prefix ending in ``/`` or empty)."""
    from ..store.s3 import split_s3_uri

    bucket, prefix = split_s3_uri(uri)
    return bucket, (prefix + "/" if prefix else "")


@dataclass(frozen=True)
class Obj:
    rel: str  # key below the prefix
    size: int
    etag: str  # without quotes


def content_id(objs: list[Obj]) -> str:
    rows = sorted([o.rel, o.size, o.etag] for o in objs)
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def _explain(uri: str, exc: Exception, field: str) -> str:
    """One line naming the source and what to do; never a credential (boto3's messages carry none, and only
    the error's code and class name are used)."""
    code = _code(exc)
    bucket = split(uri)[0]
    if code in ("NoSuchBucket",):
        return f"{field} {uri!r}: no such bucket {bucket!r}: check the bucket name and the endpoint " \
               "(model.endpoint_url or AWS_ENDPOINT_URL)"
    if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"):
        return f"{field} {uri!r}: access denied ({code}): check the credentials (AWS_ACCESS_KEY_ID and " \
               "AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the machine's role) and the bucket's policy"
    if code in ("NoSuchKey", "404"):
        return f"{field} {uri!r}: an object is missing (it changed while being read): plan the run again"
    if type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        return f"{field} {uri!r}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or " \
               "AWS_PROFILE, or give the machine a role)"
    if type(exc).__name__ in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError"):
        return f"{field} {uri!r}: the S3 endpoint is unreachable: check model.endpoint_url or AWS_ENDPOINT_URL"
    return f"{field} {uri!r}: cannot read the checkpoint ({type(exc).__name__}{': ' + code if code else ''})"


def listing(client: Any, uri: str, field: str = "model.path", error: type[Exception] = ConfigError) -> list[Obj]:
    bucket, prefix = split(uri)
    if not bucket:
        raise error(f"{field} {uri!r}: no bucket named: write s3://bucket/prefix/")
    out: list[Obj] = []
    token = None
    try:
        while True:
            kw: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            page = client.list_objects_v2(**kw)
            for o in page.get("Contents", []):
                rel = o["Key"][len(prefix):]
                if not rel or rel.endswith("/"):
                    continue
                if rel.startswith("/") or ".." in rel.split("/"):
                    raise error(f"{field} {uri!r}: object key {o['Key']!r} leads outside the prefix")
                out.append(Obj(rel, int(o["Size"]), str(o.get("ETag", "")).strip('"')))
            if not page.get("IsTruncated"):
                break
            token = page.get("NextContinuationToken")
    except error:
        raise
    except Exception as exc:  # noqa: BLE001 - botocore's errors, classified in _explain
        raise error(_explain(uri, exc, field)) from None
    return out


def _client(endpoint_url: str | None, region: str | None) -> Any:
    from ..store.s3 import s3_client

    return s3_client(endpoint_url, region)


def resolve(uri: str, endpoint_url: str | None = None, region: str | None = None, field: str = "model.path") -> str:
    """The checkpoint's content id, checked to be an HF-format checkpoint (a ``config.json``)."""
    objs = listing(_client(endpoint_url, region), uri, field, error=ModelSourceError)
    if not objs:
        raise ModelSourceError(f"{field} {uri!r}: no objects under this prefix: check the bucket and the prefix")
    if not any(o.rel == "config.json" for o in objs):
        raise ModelSourceError(f"{field} {uri!r}: not an HF-format checkpoint (no config.json directly under the "
                          "prefix): point at the checkpoint's own prefix")
    cid = content_id(objs)
    size = sum(o.size for o in objs)
    here = (cache_root() / cid / MANIFEST).is_file()
    logging.getLogger(__name__).info(
        "%s %s: %d files, %.1f MB (content %s); %s", field, uri, len(objs), size / 1e6, cid[:12],
        f"in this node's model cache {cache_root()}" if here else
        f"each node downloads it once into its model cache ({MODEL_CACHE_ENV}, here {cache_root()})")
    return cid


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch(uri: str, expected: str | None = None, endpoint_url: str | None = None, region: str | None = None) -> Path:
    """The node-local directory of the checkpoint, downloaded once per node. ``expected``: the content id the
    run was planned with; different bytes under the URI now fail the run instead of mixing two models."""
    root = cache_root()
    if expected:  # a download already made needs no listing
        done = root / expected
        if (done / MANIFEST).is_file():
            return done
    client = _client(endpoint_url, region)
    objs = listing(client, uri, error=RunError)
    cid = content_id(objs)
    if expected and cid != expected:
        raise RunError(f"model.path {uri!r}: the checkpoint changed since the run was planned (content "
                       f"{cid[:12]}, planned {expected[:12]}): plan the run again")
    root.mkdir(parents=True, exist_ok=True)
    final = root / cid
    with _locked(root / f"{cid}.lock"):
        if (final / MANIFEST).is_file():
            return final  # another actor of this node downloaded it while this one waited
        for stale in root.glob(f".partial-{cid}-*"):  # killed downloads: no live one holds the lock
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():  # no manifest: not ours to trust
            shutil.rmtree(final)
        tmp = root / f".partial-{cid}-{os.getpid()}"
        tmp.mkdir()
        started = time.time()
        bucket, prefix = split(uri)
        for o in objs:
            _download(client, bucket, prefix, o, tmp, uri)
        (tmp / MANIFEST).write_text(json.dumps({"uri": uri, "content_id": cid,
                                                "objects": [[o.rel, o.size, o.etag] for o in objs]}),
                                    encoding="utf-8")
        os.rename(tmp, final)
        with open(root / RECORD, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"content_id": cid, "uri": uri, "objects": len(objs),
                                 "bytes": sum(o.size for o in objs), "host": socket.gethostname(),
                                 "pid": os.getpid(), "seconds": round(time.time() - started, 3)}) + "\n")
    return final


def _download(client: Any, bucket: str, prefix: str, o: Obj, into: Path, uri: str) -> None:
    dest = into / o.rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    md5 = hashlib.md5(usedforsecurity=False) if _MD5.match(o.etag) else None
    size = 0
    try:
        body = client.get_object(Bucket=bucket, Key=prefix + o.rel, IfMatch=f'"{o.etag}"')["Body"]
        with open(dest, "wb") as fh:
            for chunk in iter(lambda: body.read(1 << 20), b""):
                fh.write(chunk)
                size += len(chunk)
                if md5 is not None:
                    md5.update(chunk)
    except Exception as exc:  # noqa: BLE001 - botocore's errors, classified in _explain
        if _code(exc) in ("PreconditionFailed", "412"):
            raise RunError(f"model.path {uri!r}: {o.rel} changed during the download: plan the run again") from None
        raise RunError(_explain(uri, exc, "model.path")) from None
    if size != o.size or (md5 is not None and md5.hexdigest() != o.etag):
        raise RunError(f"model.path {uri!r}: {o.rel} arrived damaged ({size} of {o.size} bytes"
                       f"{', MD5 mismatch' if size == o.size else ''}): run again")
