"""The data contracts every stage speaks: Sample, Generation, Score.

Stdlib and pydantic only. Between the pipeline's stages a shard's Samples
travel pickled (validated once, on the driver) and its Generations and Scores
as their JSON-mode dicts; what is stored is JSON (``pipeline/tables.py``).
"""

from __future__ import annotations

import hashlib
import json
import math
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class ImageURL(_Model):
    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ContentPart(_Model):
    """One part of a chat message's content, in OpenAI's form: ``{"type": "text", "text": ...}`` or
    ``{"type": "image_url", "image_url": {"url": ...}}`` (``data/images.py`` says which URLs)."""

    type: Literal["text", "image_url"]
    text: str | None = None
    image_url: ImageURL | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "ContentPart":
        if self.type == "text" and (self.text is None or self.image_url is not None):
            raise ValueError("a 'text' content part holds text (and no image_url)")
        if self.type == "image_url" and (self.image_url is None or self.text is not None):
            raise ValueError("an 'image_url' content part holds image_url: {url: ...} (and no text)")
        return self


class Message(_Model):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    tool_calls: list["ToolCall"] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class ToolCall(_Model):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class Sample(_Model):
    """One evaluation item.

    ``id`` is stable: taken from the dataset when it has one, otherwise derived
    from the content (``content_id``). RAG and agent fields are optional; a
    metric that needs one that is absent scores ``not_tested``.
    """

    id: str
    input: str | list[Message]
    #: image URLs for the prompt (``dataset.images_field``): ``data:``, ``https://``, or ``file://`` for a local
    #: file (resolved against the dataset file's folder when read)
    images: list[str] | None = None
    target: str | list[str] | None = None
    choices: list[str] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # RAG
    retrieved_contexts: list[dict[str, Any]] | None = None
    gold_evidence: list[str] | None = None
    corpus_snapshot: dict[str, Any] | None = None
    # agents
    tools: list[dict[str, Any]] | None = None
    reference_tool_calls: list[list[ToolCall]] | None = None
    expected_state: dict[str, Any] | None = None

    @property
    def targets(self) -> list[str]:
        if self.target is None:
            return []
        return [self.target] if isinstance(self.target, str) else list(self.target)


class Generation(_Model):
    """What a backend produced for one request.

    ``raw_text`` is the untouched output; ``text`` is what scoring reads by
    default (equal to raw unless the backend strips e.g. special tokens).
    Token counts say where they came from; timing says whether it is per
    request or a batch's wall time spread over its requests.
    """

    text: str = ""
    raw_text: str | None = None
    tool_calls: list[list[ToolCall]] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    token_source: Literal["tokenizer", "provider", "engine"] | None = None
    latency_s: float | None = None
    latency_scope: Literal["request", "batch"] | None = None
    time_to_first_token_s: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _raw_defaults_to_text(self) -> "Generation":
        if self.raw_text is None:
            self.raw_text = self.text
        return self


class Status(str, Enum):
    SCORED = "scored"
    UNKNOWN = "unknown"
    NOT_TESTED = "not_tested"
    ERROR = "error"


class Score(_Model):
    """One metric's verdict on one sample.

    Only ``scored`` carries a value; the other statuses carry a reason and are
    never averaged in (missing evidence is not a zero).
    """

    name: str
    value: float | None = None
    status: Status = Status.SCORED
    reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("value", mode="before")
    @classmethod
    def _coerce(cls, v: Any) -> Any:
        if isinstance(v, bool):
            return float(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Score":
        if self.status is Status.SCORED:
            if self.value is None or not math.isfinite(self.value):
                raise ValueError(
                    f"score {self.name!r}: status 'scored' needs a finite value, got {self.value!r}"
                )
        elif self.value is not None:
            raise ValueError(f"score {self.name!r}: status {self.status.value!r} carries no value")
        return self

    @classmethod
    def scored(cls, name: str, value: float, **kw: Any) -> "Score":
        meta, reason = kw.get("metadata", {}), kw.get("reason")
        if (
            type(value) in (float, int, bool)
            and type(name) is str
            and math.isfinite(value)
            and kw.keys() <= {"metadata", "reason"}
            and (reason is None or type(reason) is str)
            and type(meta) is dict
            and all(type(k) is str for k in meta)
        ):
            # the common case, already valid: skip the validator (hot in scoring stages: one per sample
            # and metric); what model_construct would build, without its per-field loop
            if cls is Score and _DIRECT_CONSTRUCT:
                m = _new_model(cls)
                _setattr(m, "__dict__", {"name": name, "value": float(value), "status": Status.SCORED, "reason": reason,
                                         "metadata": meta})
                _setattr(m, "__pydantic_fields_set__", set(_SCORE_FIELDS))
                _setattr(m, "__pydantic_extra__", None)
                _setattr(m, "__pydantic_private__", None)
                return m
            return cls.model_construct(
                name=name, value=float(value), status=Status.SCORED, reason=reason, metadata=meta
            )
        return cls(name=name, value=value, status=Status.SCORED, **kw)

    def to_json_dict(self) -> dict[str, Any]:
        """``model_dump(mode="json")`` without the serializer: the metadata
        goes as it is, so dump the result with ``default=jsonable`` (which
        converts what JSON lacks, as the serializer would)."""
        return {"name": self.name, "value": self.value, "status": STATUS_VALUE[self.status], "reason": self.reason,
                "metadata": self.metadata}

    @classmethod
    def read_json_dict(cls, d: dict[str, Any]) -> "Score | ScoreRecord":
        """``model_validate`` for what ``to_json_dict`` wrote, for read-only
        use (merging thousands of rows): a plain ``ScoreRecord`` with Score's
        fields when the dict is valid as it is, a validated Score (or its
        error) otherwise."""
        fields = _checked_fields(d)
        return cls.model_validate(d) if fields is None else ScoreRecord(**fields)

    @classmethod
    def unknown(cls, name: str, reason: str, **kw: Any) -> "Score":
        return cls(name=name, status=Status.UNKNOWN, reason=reason, **kw)

    @classmethod
    def not_tested(cls, name: str, reason: str, **kw: Any) -> "Score":
        return cls(name=name, status=Status.NOT_TESTED, reason=reason, **kw)

    @classmethod
    def error(cls, name: str, reason: str, **kw: Any) -> "Score":
        return cls(name=name, status=Status.ERROR, reason=reason, **kw)


class ScoreRecord:
    """A valid Score's fields, read-only use only (no pydantic)."""

    __slots__ = ("name", "value", "status", "reason", "metadata")

    def __init__(
        self, name: str, value: float | None, status: Status, reason: str | None, metadata: dict[str, Any]
    ) -> None:
        self.name, self.value, self.status, self.reason, self.metadata = name, value, status, reason, metadata


def _checked_fields(d: Any) -> dict[str, Any] | None:
    """Score's fields from a stored dict when pydantic would accept it
    unchanged; None when it needs the full validation."""
    status = _STATUSES.get(d.get("status", "scored")) if isinstance(d, dict) else None
    if status is None or not _SCORE_FIELDS.issuperset(d):
        return None
    name, value, reason, meta = d.get("name"), d.get("value"), d.get("reason"), d.get("metadata", {})
    if not (
        type(name) is str
        and (reason is None or type(reason) is str)
        and type(meta) is dict
        and (value is None if status is not Status.SCORED else type(value) in (float, int) and math.isfinite(value))
    ):
        return None
    return {
        "name": name,
        "value": None if value is None else float(value),
        "status": status,
        "reason": reason,
        "metadata": meta,
    }


_STATUSES = {st.value: st for st in Status}
STATUS_VALUE = {st: st.value for st in Status}
_SCORE_FIELDS = frozenset(Score.model_fields)
_new_model = object.__new__
_setattr = object.__setattr__
# Score.scored sets the instance's attributes itself only while pydantic builds models as it does
# now: plain fields, no post-init hook, no private attributes, not a root model
_DIRECT_CONSTRUCT = (
    _SCORE_FIELDS == {"name", "value", "status", "reason", "metadata"}
    and not getattr(Score, "__pydantic_post_init__", None)
    and not getattr(Score, "__private_attributes__", None)
    and not getattr(Score, "__pydantic_root_model__", False)
)


def jsonable(v: Any) -> Any:
    """``json.dumps(..., default=jsonable)``: what pydantic's JSON mode does
    with values JSON has no type for (sets, paths, dates, numpy arrays...)."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(v)


def content_id(payload: Any) -> str:
    """A stable id derived from a sample's content (16 hex chars of SHA-256)."""
    data = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


Message.model_rebuild()
