"""The metric contract: every metric declares its direction.

A subclass that does not set ``direction`` to a ``Direction`` raises
``TypeError`` when the class is created (pass ``abstract=True`` for
intermediate bases). ``requires`` names the fields a metric reads; when one is
absent (missing, null, or an empty list/string/object) the score is
``not_tested`` rather than a failure. Fields named in ``empty_is_evidence``
are absent only when missing or null: there an empty list is a recorded
result (a retrieval that found nothing), which the metric scores.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, ClassVar, Iterable

from .types import Generation, Sample, Score, Status


class Direction(str, Enum):
    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"

    @property
    def arrow(self) -> str:
        return "↑" if self is Direction.MAXIMIZE else "↓"

    def better(self, a: float, b: float) -> bool:
        """True when ``a`` is strictly better than ``b`` under this direction."""
        return a > b if self is Direction.MAXIMIZE else a < b


_MISSING = object()


class MissingEvidence(Exception):
    """Raised inside ``score`` when the evidence a metric needs is absent:
    the sample is recorded as ``unknown`` (unscored), never as 0."""


def resolve_field(path: str, sample: Sample, generation: Generation | None, context: dict | None) -> Any:
    """Look up a dotted field path such as ``target``, ``generation.tool_calls``,
    ``metadata.answer`` or ``context.extracted``. Returns ``_MISSING`` when absent."""
    getter = _GETTERS.get(path) or _field_getter(path)
    return getter(sample, generation, context)


_GETTERS: dict[str, Any] = {}


def _field_getter(path: str) -> Any:
    """``resolve_field`` for one path, compiled once: requirements are
    checked for every metric on every sample."""
    head, _, rest = path.partition(".")
    root = {"generation": 1, "context": 2}.get(head, 0)
    parts = (rest.split(".") if rest else []) if root else path.split(".")

    def walk(obj: Any, parts: list[str]) -> Any:
        for part in parts:
            if obj is None:
                return _MISSING
            obj = obj.get(part, _MISSING) if isinstance(obj, dict) else getattr(obj, part, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj

    if root == 0 and len(parts) == 1:  # a Sample field: the common case
        name = parts[0]

        def getter(sample: Any, generation: Any, context: Any) -> Any:
            if isinstance(sample, dict):
                return sample.get(name, _MISSING)
            return getattr(sample, name, _MISSING) if sample is not None else _MISSING
    elif root == 1:
        def getter(sample: Any, generation: Any, context: Any) -> Any:
            return walk(generation, parts)
    elif root == 2:
        def getter(sample: Any, generation: Any, context: Any) -> Any:
            return walk(context or {}, parts)
    else:
        def getter(sample: Any, generation: Any, context: Any) -> Any:
            return walk(sample, parts)
    _GETTERS[path] = getter
    return getter


_SIZED = (list, dict, tuple, str)


def _is_absent(value: Any) -> bool:
    return value is _MISSING or value is None or (isinstance(value, _SIZED) and not len(value))


def _is_unrecorded(value: Any) -> bool:
    return value is _MISSING or value is None


def _absent_column(path: str, items: list[tuple[Any, Any, Any]], cache: dict[str, list[bool]] | None,
                   empty_counts: bool = False) -> list[bool]:
    """Whether field ``path`` is absent, for each item (``missing_requirements``),
    taken from ``cache`` or worked out and put there. ``empty_counts``: an
    empty value is present (``Metric.empty_is_evidence``)."""
    key = "\0" + path if empty_counts else path
    if cache is not None and key in cache:
        return cache[key]
    get, absent = _GETTERS.get(path) or _field_getter(path), (_is_unrecorded if empty_counts else _is_absent)
    col = [absent(get(s, g, c)) for s, g, c in items]
    if cache is not None:
        cache[key] = col
    return col


class Metric(ABC):
    """Base class of every metric, built-in or user-defined.

    Subclasses set ``name``, ``direction`` and implement ``score``. Parameters
    given in the config arrive as keyword arguments and enter ``identity()``
    (and so the fingerprint).
    """

    name: ClassVar[str] = ""
    direction: ClassVar[Direction]
    requires: ClassVar[tuple[str, ...]] = ()
    #: required fields whose empty value is evidence to score (only missing or null is absent)
    empty_is_evidence: ClassVar[tuple[str, ...]] = ()
    family: ClassVar[str] = "custom"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ""
    #: "mean": per-sample values are averaged. "corpus": each scored sample
    #: carries sufficient statistics in ``score.metadata["stats"]``; shards
    #: merge them with ``combine`` (any order, any split) and ``finalize``
    #: turns the total into the corpus score (BLEU, chrF, TER, ...).
    aggregation: ClassVar[str] = "mean"
    #: "sample": ``score`` is called once per (sample, repeat).
    #: "group": ``score_group`` is called once per sample with the generations
    #: of all its repeats (pass@k, majority vote); the score is stored on the
    #: sample's repeat-0 row.
    scope: ClassVar[str] = "sample"
    #: the actor pool that runs the metric: "checks" (deterministic, CPU),
    #: "judges" (model-based), "oracles" (agent outcomes). None: from family.
    pool: ClassVar[str | None] = None

    @classmethod
    def pool_name(cls) -> str:
        if cls.pool:
            return cls.pool
        if cls.family.startswith("judge"):
            return "judges"
        if cls.family.startswith("oracle"):
            return "oracles"
        return "checks"

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        direction = cls.__dict__.get("direction", getattr(cls, "direction", None))
        if not isinstance(direction, Direction):
            raise TypeError(
                f"metric class {cls.__module__}.{cls.__qualname__} must declare "
                f"direction = Direction.MAXIMIZE or Direction.MINIMIZE (got {direction!r})"
            )
        if not cls.__dict__.get("name"):
            cls.name = snake_case(cls.__name__)

    def __init__(self, **params: Any) -> None:
        as_name = params.pop("as_name", None)
        self.on: str | None = params.get("on")
        self.params = params
        self.output_name = as_name or (f"{self.name}@{self.on}" if self.on else self.name)

    def prediction(self, generation: Generation, context: dict) -> str:
        """The text this metric scores: ``generation.text`` by default,
        ``raw`` for the untouched output, or the value an annotator extracted
        (``on: <annotator name>``)."""
        if self.on in (None, "text"):
            return generation.text
        if self.on == "raw":
            return generation.raw_text if generation.raw_text is not None else generation.text
        annotations = (context or {}).get("annotations") or {}
        if self.on not in annotations:
            raise MissingEvidence(f"no annotation {self.on!r} on this sample")
        value = annotations[self.on]
        if value is None:
            raise MissingEvidence(f"annotation {self.on!r} has no value for this sample (its extractor failed)")
        return str(value)

    # -- required -----------------------------------------------------------
    @abstractmethod
    def score(self, sample: Sample, generation: Generation, context: dict) -> Score | dict[str, Score]:
        """Score one sample: a Score, a dict of named Scores, or a number."""

    # -- defaulted hooks ----------------------------------------------------
    def score_batch(self, items: list[tuple[Sample, Generation, dict]]) -> list[Score | dict[str, Score]]:
        return [self.score(s, g, c) for s, g, c in items]

    def score_group(
        self, sample: Sample, generations: list[Generation], contexts: list[dict]
    ) -> Score | dict[str, Score]:
        """Score all repeats of one sample at once (metrics with scope = "group")."""
        raise TypeError(f"{type(self).__name__} declares scope='group' but no score_group()")

    def evaluate_groups(self, groups: list[tuple[Sample, list[Generation], list[dict]]]) -> list[list[Score]]:
        """``evaluate_batch`` for group metrics: requirements, errors and names
        handled the same way."""
        out: list[list[Score]] = []
        for sample, gens, ctxs in groups:
            missing = self.missing_requirements(sample, gens[0] if gens else None, ctxs[0] if ctxs else None)
            if missing:
                out.append([Score.not_tested(self.output_name, f"missing {', '.join(missing)}")])
                continue
            try:
                out.append(self._normalise(self.score_group(sample, gens, ctxs)))
            except Exception as exc:  # noqa: BLE001 - row errors become data
                out.append(self._normalise(exc))
        return out

    # -- corpus-level metrics (aggregation = "corpus") -------------------------
    def combine(self, a: list[float], b: list[float]) -> list[float]:
        """Merge two sufficient statistics (default: elementwise sum)."""
        if len(a) != len(b):
            raise ValueError(f"{self.output_name}: statistics of different lengths ({len(a)} vs {len(b)})")
        return [x + y for x, y in zip(a, b)]

    def finalize(self, stats: list[float]) -> float | None:
        """Corpus score from merged statistics (corpus metrics override this)."""
        raise TypeError(f"{type(self).__name__} declares aggregation='corpus' but no finalize()")

    def signature(self) -> str | None:
        """A reference implementation's signature to record (e.g. sacrebleu's)."""
        return None

    def identity(self) -> dict[str, Any]:
        cls = type(self)
        return {
            "name": self.output_name,
            "class": f"{cls.__module__}:{cls.__qualname__}",
            "version": cls.version,
            "direction": cls.direction.value,
            "params": self.params,
        }

    def missing_requirements(self, sample: Sample, generation: Generation | None, context: dict | None) -> list[str]:
        getters, keep = _GETTERS, self.empty_is_evidence
        return [
            f for f in self.requires
            if (_is_unrecorded if f in keep else _is_absent)((getters.get(f) or _field_getter(f))(sample, generation,
                                                                                                   context))
        ]

    def evaluate(self, sample: Sample, generation: Generation, context: dict) -> list[Score]:
        """Run ``score`` with the contract enforced: missing requirements give
        ``not_tested``, exceptions give ``error``, names are normalised."""
        return self.evaluate_batch([(sample, generation, context)])[0]

    def evaluate_batch(self, items: list[tuple[Sample, Generation, dict]], *,
                       absent: dict[str, list[bool]] | None = None) -> list[list[Score]]:
        """``evaluate`` on every item. ``absent``: a dict the caller keeps for
        one ``items`` list over several metrics (the scoring stage does), in
        which each required field's absence per item is worked out once and
        shared; without it, per call."""
        out: list[list[Score] | None] = [None] * len(items)
        todo: list[int] = []
        if type(self).missing_requirements is not Metric.missing_requirements:
            missing = [self.missing_requirements(s, g, c) for s, g, c in items]
        else:
            # missing_requirements' checks, a column per required field (per item and metric, this is hot)
            missing = [None] * len(items)
            keep = self.empty_is_evidence
            flags = [_absent_column(f, items, absent, f in keep) for f in self.requires]
            if flags:
                for i in range(len(items)):
                    if any(col[i] for col in flags):
                        missing[i] = [f for f, col in zip(self.requires, flags) if col[i]]
        for i, ((_, g, _), gone) in enumerate(zip(items, missing)):
            if gone:
                out[i] = [Score.not_tested(self.output_name, f"missing {', '.join(gone)}")]
            elif g is not None and g.error:
                out[i] = [Score.error(self.output_name, f"generation failed: {g.error}")]
            else:
                todo.append(i)
        if todo:
            name, normalise = self.output_name, self._normalise
            if type(self).score_batch is Metric.score_batch:
                # per item anyway: one item's exception (missing evidence) must not send the
                # whole batch round again
                score = self.score
                for i in todo:
                    try:
                        res = score(*items[i])
                    except Exception as exc:  # noqa: BLE001 - row errors become data
                        res = exc.with_traceback(None)  # kept with its traceback, it would tie this frame into a cycle
                    # a plain Score under this metric's name, the common case, as _normalise returns it
                    out[i] = [res] if type(res) is Score and res.name == name else normalise(res)
                return out  # type: ignore[return-value]  # every item has its scores
            batch = [items[i] for i in todo]
            try:
                results = self.score_batch(batch)
                if len(results) != len(batch):
                    raise ValueError(f"score_batch returned {len(results)} results for {len(batch)} items")
            except Exception as exc:  # noqa: BLE001 - row errors become data
                # isolate the failing items
                results = [exc.with_traceback(None)] if len(batch) == 1 else [self._try_score(item) for item in batch]
            for i, res in zip(todo, results):
                out[i] = normalise(res)
        return [o or [] for o in out]

    def _try_score(self, item: tuple[Sample, Generation, dict]) -> Any:
        """``score`` on one item, its exception returned as the result. The
        traceback is dropped: kept, it would tie the caller's frame (and every
        sample of the batch) into a reference cycle that only the cyclic
        garbage collector frees."""
        try:
            return self.score(*item)
        except Exception as exc:  # noqa: BLE001 - row errors become data
            return exc.with_traceback(None)

    def _normalise(self, res: Any) -> list[Score]:
        if isinstance(res, MissingEvidence):
            return [Score.unknown(self.output_name, str(res))]
        if isinstance(res, Exception):
            return [Score.error(self.output_name, f"{type(res).__name__}: {res}")]
        if isinstance(res, Score):
            if res.name != self.output_name:
                res = res.model_copy(update={"name": self.output_name})
            return [res]
        if isinstance(res, dict):
            scores = []
            for key, s in res.items():
                if not isinstance(s, Score):
                    return [
                        Score.error(self.output_name, f"score() returned {type(s).__name__} for {key!r}, not a Score")
                    ]
                full = (
                    key
                    if key == self.output_name or key.startswith(self.output_name + ".")
                    else f"{self.output_name}.{key}"
                )
                scores.append(s.model_copy(update={"name": full}))
            return scores
        if isinstance(res, (int, float)) and not isinstance(res, bool):
            try:
                return [Score.scored(self.output_name, float(res))]
            except ValueError as exc:
                return [Score.error(self.output_name, str(exc))]
        return [Score.error(self.output_name, f"score() returned {type(res).__name__}, not a Score")]


def snake_case(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def metric_info(cls: type[Metric]) -> dict[str, Any]:
    return {
        "name": cls.name,
        "direction": cls.direction.value,
        "family": cls.family,
        "requires": list(cls.requires),
        "description": cls.description or (inspect.getdoc(cls) or "").split("\n")[0],
    }


def statuses() -> Iterable[str]:
    return [s.value for s in Status]
