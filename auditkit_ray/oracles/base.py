"""The oracle extension point: one required method, ``verdict``.

An oracle decides whether an agent's episode *achieved the task*:
``success | failure | unknown | error``, with a reason and the evidence it
looked at. It is the headline of an agent evaluation; trajectory metrics are
diagnostics.

``OracleMetric`` exposes any oracle as a Metric (family ``oracle``,
direction MAXIMIZE) so the pipeline runs it like one:

=========  ==============================
verdict    Score
=========  ==============================
success    scored 1.0
failure    scored 0.0
unknown    status unknown (unscored)
error      status error
=========  ==============================

``MissingEvidence`` raised inside ``verdict`` gives ``unknown``; any other
exception gives ``error``. A sample lacking what the oracle ``requires``
(Sample fields, also looked up in ``metadata``) is ``not_tested``.

A user oracle runs from YAML through the generic ``oracle`` metric::

    metrics:
      - name: oracle
        params: {oracle: "mypkg.oracles:RefundIssued", threshold: 2}

or in Python with ``oracle_metric(RefundIssued)(threshold=2)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ..core.metric import Direction, Metric, MissingEvidence
from ..core.types import Generation, Sample, Score


class Outcome(str, Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    UNKNOWN = "unknown"
    ERROR = "error"


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Outcome
    reason: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def success(cls, reason: str | None = None, **evidence: Any) -> "Verdict":
        return cls(status=Outcome.SUCCESS, reason=reason, evidence=evidence)

    @classmethod
    def failure(cls, reason: str | None = None, **evidence: Any) -> "Verdict":
        return cls(status=Outcome.FAILURE, reason=reason, evidence=evidence)

    @classmethod
    def unknown(cls, reason: str, **evidence: Any) -> "Verdict":
        return cls(status=Outcome.UNKNOWN, reason=reason, evidence=evidence)

    @classmethod
    def error(cls, reason: str, **evidence: Any) -> "Verdict":
        return cls(status=Outcome.ERROR, reason=reason, evidence=evidence)

    @property
    def decided(self) -> bool:
        """True for success or failure (the oracle had the evidence it needed)."""
        return self.status in (Outcome.SUCCESS, Outcome.FAILURE)

    def to_score(self, name: str, **metadata: Any) -> Score:
        meta = {"verdict": self.status.value, "evidence": self.evidence, **metadata}
        if self.status is Outcome.SUCCESS:
            return Score.scored(name, 1.0, reason=self.reason, metadata=meta)
        if self.status is Outcome.FAILURE:
            return Score.scored(name, 0.0, reason=self.reason, metadata=meta)
        if self.status is Outcome.UNKNOWN:
            return Score.unknown(name, self.reason or "unknown", metadata=meta)
        return Score.error(name, self.reason or "error", metadata=meta)


class Oracle(ABC):
    """Base class of outcome oracles. Subclasses implement ``verdict``;
    parameters arrive as keyword arguments and enter ``identity()`` (and so
    the run fingerprint), with ``version``."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    family: ClassVar[str] = "oracle"
    description: ClassVar[str] = ""
    #: Sample fields the oracle needs (looked up on the Sample, then in its
    #: metadata); when one is absent the score is not_tested
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **params: Any) -> None:
        self.params = params

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            from ..core.metric import snake_case

            cls.name = snake_case(cls.__name__)

    @abstractmethod
    def verdict(self, sample: Sample, generation: Generation, context: dict) -> Verdict:
        """Decide the outcome of one episode."""

    # -- defaulted hooks ----------------------------------------------------
    def missing(self, sample: Sample, generation: Generation | None, context: dict | None) -> list[str]:
        from ..agents.trace import sample_field

        return [f for f in self.requires if sample_field(sample, f) is None]

    def identity(self) -> dict[str, Any]:
        cls = type(self)
        return {"class": f"{cls.__module__}:{cls.__qualname__}", "version": cls.version, "params": self.params}

    def check(self, sample: Sample, generation: Generation, context: dict) -> Verdict:
        """``verdict`` with the contract enforced (never raises)."""
        try:
            v = self.verdict(sample, generation, context or {})
        except MissingEvidence as exc:
            return Verdict.unknown(str(exc))
        except Exception as exc:  # noqa: BLE001 - errors are data
            return Verdict.error(f"{type(exc).__name__}: {exc}")
        if not isinstance(v, Verdict):
            return Verdict.error(f"{type(self).__name__}.verdict returned {type(v).__name__}, not a Verdict")
        return v


class OracleMetric(Metric, abstract=True):
    """Adapter: an Oracle as a Metric. Subclasses set ``oracle_class``."""

    direction = Direction.MAXIMIZE
    family = "oracle"
    oracle_class: ClassVar[type[Oracle] | None] = None

    def __init__(self, **params: Any) -> None:
        as_name = params.pop("as_name", None)
        cls = self.oracle_class
        if cls is None:
            raise TypeError(f"{type(self).__name__} has no oracle_class")
        self.oracle = cls(**params)
        super().__init__(**params, as_name=as_name)

    def missing_requirements(self, sample: Sample, generation: Generation | None, context: dict | None) -> list[str]:
        # ``requires`` mirrors the oracle's (for listings); the oracle decides
        return self.oracle.missing(sample, generation, context)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        return self.oracle.check(sample, generation, context).to_score(self.output_name)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "oracle": self.oracle.identity()}


def oracle_metric(oracle_cls: type[Oracle], *, name: str | None = None) -> type[OracleMetric]:
    """A Metric class running ``oracle_cls`` (family from the oracle)."""
    if not (isinstance(oracle_cls, type) and issubclass(oracle_cls, Oracle)):
        raise TypeError(f"{oracle_cls!r} is not an Oracle subclass")
    attrs = {
        "name": name or oracle_cls.name,
        "requires": oracle_cls.requires,
        "oracle_class": oracle_cls,
        "family": oracle_cls.family,
        "version": oracle_cls.version,
        "description": oracle_cls.description or (oracle_cls.__doc__ or "").strip().split("\n")[0],
        "__module__": oracle_cls.__module__,
        "__qualname__": f"{oracle_cls.__qualname__}Metric",
    }
    return type(f"{oracle_cls.__name__}Metric", (OracleMetric,), attrs)


class GenericOracle(OracleMetric):
    """Run any Oracle subclass named by ``oracle: "package.module:Class"``
    (other parameters go to the oracle). Scores are named after the oracle."""

    name = "oracle"
    description = "any user Oracle (oracle: 'package.module:Class') run as a metric"

    def __init__(self, *, oracle: str, as_name: str | None = None, **params: Any) -> None:
        from ..agents.matching import load_callable

        cls = load_callable(oracle, "oracle")
        if not (isinstance(cls, type) and issubclass(cls, Oracle)):
            raise TypeError(f"oracle {oracle!r} is not a subclass of auditkit_ray.oracles.Oracle")
        self.oracle = cls(**params)
        self.family_override = cls.family
        Metric.__init__(self, oracle=oracle, **params, as_name=as_name or cls.name)
