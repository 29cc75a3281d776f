"""S3 (and S3-compatible) result store through boto3.

S3 has no rename, so an atomic write is a conditional PUT
(``IfNoneMatch="*"``): the object appears whole or not at all, and an object
that is already there is never overwritten. Endpoint and region come from the
store config or the usual AWS variables (``AWS_ENDPOINT_URL``,
``AWS_DEFAULT_REGION``); credentials only from the environment or the
machine's role, never from the config.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from ..errors import ConfigError, RunError, require
from .interface import ResultStore

log = logging.getLogger(__name__)

_CLIENT_LOCK = threading.Lock()

RETRYABLE = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError")


def s3_endpoint(endpoint_url: str | None = None) -> str | None:
    """The endpoint a config names, else the standard AWS variables' (boto3 reads them too; pyarrow does not)."""
    return endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def s3_region(region: str | None = None) -> str:
    return region or os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or "us-east-1"


#: seconds to wait for an S3 endpoint to accept a connection, and retries of a request that could not connect or
#: was throttled (``store.connect_timeout_s``, ``store.retries``)
CONNECT_TIMEOUT_S, RETRIES = 5.0, 4


def s3_client(endpoint_url: str | None = None, region: str | None = None, *, max_pool: int = 10,
              connect_timeout_s: float = CONNECT_TIMEOUT_S, retries: int = RETRIES, read_timeout_s: float = 60) -> Any:
    """A boto3 S3 client on any S3-compatible endpoint (``s3_endpoint``); credentials only from the
    environment or the machine's role. Not thread-safe to create: callers creating clients from threads lock."""
    boto3 = require("boto3", "s3")
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=s3_endpoint(endpoint_url), region_name=s3_region(region),
        config=Config(retries={"max_attempts": retries + 1, "mode": "standard"}, connect_timeout=connect_timeout_s,
                      read_timeout=read_timeout_s, max_pool_connections=max(10, max_pool)),
    )


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key/...`` as (bucket, key), the key without leading or trailing slash."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri}")
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key.strip("/")


_ARROW_FS: dict[tuple[str | None, str, str], Any] = {}


def arrow_s3_filesystem(endpoint_url: str | None = None, region: str | None = None) -> Any:
    """A ``pyarrow.fs.S3FileSystem`` on ``s3_endpoint``/``s3_region`` (pyarrow ignores
    ``AWS_ENDPOINT_URL``: it is passed on here), one per process, endpoint and region. Credentials
    come from the AWS environment or the machine's role, never from a config. Its paths are
    ``bucket/key`` (``split_s3_uri``)."""
    import hashlib

    endpoint, reg = s3_endpoint(endpoint_url), s3_region(region)
    # pyarrow reads the credentials when the filesystem is made: new ones in the environment make a new one
    creds = hashlib.sha256("\0".join(os.environ.get(k, "") for k in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")).encode()).hexdigest()
    key = (endpoint, reg, creds)
    with _CLIENT_LOCK:
        fs = _ARROW_FS.get(key)
        if fs is None:
            pafs = require("pyarrow.fs", "s3")
            kw: dict[str, Any] = {"region": reg, "connect_timeout": 5, "request_timeout": 60}
            if endpoint:
                scheme, sep, host = endpoint.partition("://")
                kw.update(endpoint_override=host.rstrip("/") if sep else endpoint, scheme=scheme if sep else "https")
            fs = _ARROW_FS[key] = pafs.S3FileSystem(**kw)
    return fs


class S3Store(ResultStore):
    def __init__(self, uri: str, endpoint_url: str | None = None, region: str | None = None,
                 retry_s: float = 60.0, connect_timeout_s: float = CONNECT_TIMEOUT_S, retries: int = RETRIES) -> None:
        if not uri.startswith("s3://"):
            raise ValueError(f"not an s3:// URI: {uri}")
        rest = uri[len("s3://"):]
        self.bucket, _, prefix = rest.partition("/")
        self.prefix = prefix.strip("/")
        self.uri_root = uri.rstrip("/")
        self.endpoint_url = s3_endpoint(endpoint_url)
        self.region = s3_region(region)
        self.retry_s = retry_s
        self.connect_timeout_s, self.retries = connect_timeout_s, retries
        self._c = None
        self._waiting_said = False

    def __reduce__(self):
        return (S3Store, (self.uri_root, self.endpoint_url, self.region, self.retry_s, self.connect_timeout_s,
                          self.retries))

    def check(self) -> None:
        """One listing request, one attempt, within ``connect_timeout_s``: a wrong endpoint, a missing bucket or
        refused credentials fail here in seconds, naming what to fix, instead of after the retries a store that
        is down for a while gets."""
        where = self.endpoint_url or f"AWS S3 ({self.region})"
        try:
            # a listing of one key answers at once: an endpoint silent for twice the connect wait is not one
            client = s3_client(self.endpoint_url, self.region, connect_timeout_s=self.connect_timeout_s, retries=0,
                               read_timeout_s=2 * self.connect_timeout_s)
            client.list_objects_v2(Bucket=self.bucket, Prefix=self._key(""), MaxKeys=1)
        except Exception as exc:  # noqa: BLE001 - classified below
            name, code = type(exc).__name__, self._code(exc)
            if name in RETRYABLE or name in ("ConnectionError", "ProxyConnectionError", "SSLError"):
                raise ConfigError(f"result store {self.uri_root}: no answer from {where} ({name}; "
                                  f"store.connect_timeout_s is {self.connect_timeout_s:g}s); check store.endpoint_url "
                                  "(or AWS_ENDPOINT_URL), or raise store.connect_timeout_s") from None
            if name in ("NoCredentialsError", "PartialCredentialsError"):
                raise ConfigError(f"result store {self.uri_root}: no AWS credentials ({name}); set "
                                  "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run where the "
                                  "machine's role gives them") from None
            if code == "NoSuchBucket":
                raise ConfigError(f"result store {self.uri_root}: no bucket {self.bucket!r} at {where}") from None
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
                raise ConfigError(f"result store {self.uri_root}: {where} refused the credentials ({code}); they "
                                  "come from the environment (AWS_ACCESS_KEY_ID, AWS_PROFILE) or the machine's "
                                  "role") from None
            first = (str(exc).splitlines() or [name])[0]
            raise ConfigError(f"result store {self.uri_root}: {where} answered {code or name}: {first}") from None

    # ------------------------------------------------------------------ plumbing
    def _client(self):
        if self._c is None:
            with _CLIENT_LOCK:  # creating boto3 clients is not thread-safe (read_many reads in threads)
                if self._c is None:
                    self._c = self._new_client()
        return self._c

    def _new_client(self):
        return s3_client(self.endpoint_url, self.region, max_pool=self.prefetch,
                         connect_timeout_s=self.connect_timeout_s, retries=self.retries)

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _call(self, what: str, fn, *args: Any, **kw: Any) -> Any:
        """Retry while the endpoint is unreachable (a store that is down for a
        while), then fail with a clear error."""
        deadline = time.monotonic() + self.retry_s
        delay = 0.2
        while True:
            try:
                return fn(*args, **kw)
            except Exception as exc:  # noqa: BLE001 - classified below
                name = type(exc).__name__
                if name in RETRYABLE and time.monotonic() < deadline:
                    if not self._waiting_said:  # what it waits for, once: the retries may take a while
                        self._waiting_said = True
                        log.warning("result store %s: unreachable while trying to %s (%s); retrying for up to "
                                    "%gs", self.uri_root, what, name, self.retry_s)
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                if name in RETRYABLE:
                    raise RunError(f"result store {self.uri_root}: unreachable while trying to {what} "
                                   f"({exc})") from None
                raise

    @staticmethod
    def _code(exc: Exception) -> str:
        return str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))

    # ------------------------------------------------------------------ interface
    def write_atomic(self, rel: str, data: bytes) -> bool:
        c = self._client()
        if self.exists(rel):
            return False
        try:
            self._call(f"write {rel}", c.put_object, Bucket=self.bucket, Key=self._key(rel), Body=data, IfNoneMatch="*")
            return True
        except Exception as exc:  # noqa: BLE001
            if self._code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                return False
            if isinstance(exc, RunError):
                raise
            raise RunError(f"result store {self.uri_root}: cannot write {rel} ({exc})") from None

    def replace(self, rel: str, data: bytes) -> None:
        try:
            self._call(f"write {rel}", self._client().put_object, Bucket=self.bucket, Key=self._key(rel), Body=data)
        except RunError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise RunError(f"result store {self.uri_root}: cannot write {rel} ({exc})") from None

    def read_bytes(self, rel: str) -> bytes:
        try:
            obj = self._call(f"read {rel}", self._client().get_object, Bucket=self.bucket, Key=self._key(rel))
        except Exception as exc:  # noqa: BLE001
            if self._code(exc) in ("NoSuchKey", "404"):
                raise FileNotFoundError(self.uri(rel)) from None
            raise
        return obj["Body"].read()

    def exists(self, rel: str) -> bool:
        try:
            self._call(f"look up {rel}", self._client().head_object, Bucket=self.bucket, Key=self._key(rel))
            return True
        except Exception as exc:  # noqa: BLE001
            if self._code(exc) in ("404", "NoSuchKey", "NotFound"):
                return False
            if isinstance(exc, RunError):
                raise
            raise RunError(f"result store {self.uri_root}: cannot look up {rel} ({exc})") from None

    def _pages(self, prefix: str, **extra: Any) -> Any:
        """The pages of ``list_objects_v2`` under ``prefix/`` (``extra``: e.g. ``Delimiter``)."""
        c = self._client()
        full = self._key(prefix).rstrip("/") + "/"
        token = None
        while True:
            kw: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full, **extra}
            if token:
                kw["ContinuationToken"] = token
            try:
                page = self._call(f"list {prefix}", c.list_objects_v2, **kw)
            except RunError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise RunError(f"result store {self.uri_root}: cannot list {prefix} ({exc})") from None
            yield page
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def _listing(self, prefix: str) -> tuple[list[str], list[str]]:
        full = self._key(prefix).rstrip("/") + "/"
        files, dirs = [], []
        for page in self._pages(prefix, Delimiter="/"):
            files += [o["Key"][len(full):] for o in page.get("Contents", [])]
            dirs += [p["Prefix"][len(full):].rstrip("/") for p in page.get("CommonPrefixes", [])]
        return sorted(f for f in files if f and not f.startswith(".")), sorted(dirs)

    def list(self, prefix: str) -> list[str]:
        return self._listing(prefix)[0]

    def list_dirs(self, prefix: str) -> list[str]:
        return self._listing(prefix)[1]

    def walk(self, prefix: str) -> list[tuple[str, int, float]]:
        root = self._key("")
        out: list[tuple[str, int, float]] = []
        for page in self._pages(prefix):
            for o in page.get("Contents", []):
                rel = o["Key"][len(root):] if root else o["Key"]
                if not rel.rsplit("/", 1)[-1].startswith("."):
                    out.append((rel, int(o["Size"]), o["LastModified"].timestamp()))
        return sorted(out)

    def delete(self, rels: Iterable[str]) -> int:
        keys = [self._key(r) for r in rels]
        n = 0
        for k in range(0, len(keys), 1000):  # the most one request deletes
            part = keys[k:k + 1000]
            try:
                res = self._call("delete", self._client().delete_objects, Bucket=self.bucket,
                                 Delete={"Objects": [{"Key": key} for key in part], "Quiet": True})
            except RunError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise RunError(f"result store {self.uri_root}: cannot delete ({exc})") from None
            errors = res.get("Errors") or []
            if errors:
                raise RunError(f"result store {self.uri_root}: cannot delete {errors[0].get('Key')} "
                               f"({errors[0].get('Message') or errors[0].get('Code')})")
            n += len(part)
        return n

    def uri(self, rel: str = "") -> str:
        return f"{self.uri_root}/{rel}" if rel else self.uri_root
