"""RunResult: the versioned, fingerprinted record of one run.

Written as JSON with ``format: FORMAT_VERSION``. A reader refuses a newer
format with a message naming both versions, and upgrades older ones through
``_UPGRADERS`` (format N -> N+1 functions).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._version import __version__
from ..errors import ResultFormatError
from .metric import Direction

FORMAT_VERSION = 1

#: format N -> function upgrading a dict of format N to format N+1
_UPGRADERS: dict[int, Callable[[dict], dict]] = {}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricSummary(_Model):
    name: str
    direction: Direction
    family: str = "custom"
    mean: float | None = None
    n: int = 0
    total: int = 0
    unscored: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    stderr: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str | None = None
    confidence: float = 0.95
    identity: dict[str, Any] = Field(default_factory=dict)
    #: corpus-level metrics record their own signature (e.g. sacrebleu's)
    signature: str | None = None


class Perf(_Model):
    wall_s: float | None = None
    generation_s: float | None = None
    samples: int = 0
    throughput_samples_per_s: float | None = None
    tokens_per_s: float | None = None
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    latency_p99_s: float | None = None
    latency_scope: str | None = None
    model_size_bytes: int | None = None
    cost: float | None = None


class TokenUsage(_Model):
    prompt: int = 0
    completion: int = 0
    source: str | None = None


class SampleError(_Model):
    sample_id: str
    stage: str
    message: str


class RunResult(_Model):
    format: int = FORMAT_VERSION
    run_id: str
    name: str = ""
    fingerprint: str
    generation_fingerprint: str | None = None
    dataset_fingerprint: str | None = None
    package_version: str = __version__
    seed: int | None = None
    repeat: int = 0
    config: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, MetricSummary] = Field(default_factory=dict)
    perf: Perf = Field(default_factory=Perf)
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    errors: list[SampleError] = Field(default_factory=list)
    error_count: int = 0
    samples_path: str | None = None
    backend: dict[str, Any] = Field(default_factory=dict)
    created_at: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(self.to_json(), encoding="utf-8")
        os.replace(tmp, path)
        return path

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>") -> "RunResult":
        if not isinstance(data, dict):
            raise ResultFormatError(f"{source}: not a results object (got {type(data).__name__})")
        fmt = data.get("format")
        if not isinstance(fmt, int) or isinstance(fmt, bool):
            raise ResultFormatError(f"{source}: missing or invalid 'format' field (expected an integer, this version writes {FORMAT_VERSION})")
        if fmt > FORMAT_VERSION:
            raise ResultFormatError(
                f"{source}: results format {fmt} is newer than this auditkit-ray ({__version__}) can read "
                f"(format {FORMAT_VERSION}); upgrade auditkit-ray"
            )
        while fmt < FORMAT_VERSION:
            up = _UPGRADERS.get(fmt)
            if up is None:
                raise ResultFormatError(f"{source}: results format {fmt} is not supported (this version reads {FORMAT_VERSION})")
            data = up(dict(data))
            fmt = data["format"]
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise ResultFormatError(f"{source}: invalid results file at {loc}: {first['msg']}") from None

    @classmethod
    def load(cls, path: str | os.PathLike) -> "RunResult":
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ResultFormatError(f"{path}: cannot read results file ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise ResultFormatError(f"{path}: results file is not UTF-8 text") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ResultFormatError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        return cls.from_dict(data, source=str(path))


def load_run(path: str | os.PathLike) -> RunResult:
    """Read a results JSON (or a run directory holding ``result.json``)."""
    p = Path(path)
    if p.is_dir():
        p = p / "result.json"
    return RunResult.load(p)
