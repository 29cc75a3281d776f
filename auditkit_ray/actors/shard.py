"""What travels between the driver and the pipeline's stages: one shard.

A row of the Ray Data pipeline is one shard, in two columns, each a pickle
(protocol 5):

- ``payload``: a ``ShardPayload`` (what the driver planned, and what each
  stage adds to it), or, out of the last stage, a ``ShardOutcome`` (what the
  driver needs of a finished shard);
- ``samples``: the validated ``Sample`` of each item, in item order (repeats
  and choices of one sample are the same object, pickled once).

The pipeline's input rows hold neither: they carry ``ref``, a reference to
the planned row (``payload`` and ``samples``) in Ray's object store, where the
plan put it as it was built (``Plan.row``), so that the driver never holds
every shard's row at once; the first stage fetches it (``read_batch``). They
also carry ``run`` (the run's fingerprint) in a column of their own, so that
runs over one dataset share their planned rows; from the first stage on it
travels in the payload.

Pickle rather than JSON: the samples are validated once, on the driver, and
not dumped to JSON and validated again in every stage, which costs about
twice what pickling them does. A stage that does not read the samples passes
their bytes on untouched. Nothing outside the pipeline's own stages reads
these bytes: what is stored (Parquet shards, results) stays JSON.

Each stage declares the payload fields it reads and those it adds
(``StageFields``) and checks the first on every shard it receives
(``require``): a stage wired in the wrong order fails naming the stage and
the field, not with an AttributeError deep inside.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, fields
from typing import Any

from ..errors import RunError
from .tally import ShardTally

PAYLOAD, SAMPLES, RUN, REF = "payload", "samples", "run", "ref"


def pack(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=5)


def unpack(data: Any) -> Any:
    return pickle.loads(data)


@dataclass
class ShardPayload:
    """One shard on its way through the stages.

    Planned by the driver: ``shard`` and ``items`` (one per request:
    ``{"request": {...}}``, plus ``"record"``, the raw dataset record, when the
    run retrieves). A field left at ``None`` has not been added yet."""

    shard: int
    items: list[dict[str, Any]]
    #: the run's fingerprint: set from the input row's ``run`` column by the first stage
    run: str | None = None
    #: per item, a ``Generation`` as its JSON dict (the generation stage, or the generation cache)
    generations: list[dict[str, Any]] | None = None
    #: whether the generations were made in this run (not read from the cache)
    generated: bool = False
    #: this shard's share of its generation actor's busy time
    generation_s: float = 0.0
    generated_at: float | None = None
    #: the process that made (or read) the generations: host, pid, GPUs
    worker: dict[str, Any] | None = None
    model_size_bytes: int | None = None
    #: per item, the annotators' outputs (the first scoring pool)
    annotations: list[dict[str, Any]] | None = None
    #: per item, the scores of the pools before this one, as JSON dicts
    scores: list[list[dict[str, Any]]] | None = None


@dataclass
class ShardOutcome:
    """What the last scoring pool returns to the driver of a shard it wrote."""

    run: str
    shard: int
    n: int
    #: the summary's share of the rows just written (``ShardTally``): the driver merges tallies, not files
    tally: ShardTally
    generated: bool
    generation_s: float
    completion_tokens: int
    model_size_bytes: int | None


PAYLOAD_FIELDS = frozenset(f.name for f in fields(ShardPayload))


@dataclass(frozen=True)
class StageFields:
    """The payload fields a stage reads and those it adds."""

    stage: str
    reads: tuple[str, ...]
    adds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.reads + self.adds) - PAYLOAD_FIELDS)
        if unknown:
            raise ValueError(f"{self.stage}: no such shard field {unknown}")

    def require(self, payload: Any) -> ShardPayload:
        """``payload`` itself, once it is a ShardPayload with every field this stage reads."""
        if not isinstance(payload, ShardPayload):
            raise RunError(f"{self.stage}: expected a ShardPayload, got {type(payload).__name__}")
        for name in self.reads:
            if getattr(payload, name) is None:
                raise RunError(f"{self.stage}: shard {payload.shard} arrived without {name!r} "
                               f"(the stage reads {', '.join(self.reads)})")
        return payload


def planned_row(shard: int, items: list[dict[str, Any]], samples: list[Any]) -> dict[str, bytes]:
    """A pending shard's row as the driver plans it (without ``run``: ``Plan.row`` adds it)."""
    return {PAYLOAD: pack(ShardPayload(shard, items)), SAMPLES: pack(samples)}


def read_batch(batch: dict[str, Any]) -> list[tuple[ShardPayload, bytes]]:
    """Each row's payload (unpacked) and its samples (still packed: a stage
    that does not read them passes them on as they are); an input row's are
    fetched from the object store first."""
    if REF in batch:
        import ray

        planned = ray.get(list(batch[REF]))
        out = [(unpack(row[PAYLOAD]), row[SAMPLES]) for row in planned]
    else:
        out = [(unpack(p), s) for p, s in zip(batch[PAYLOAD], batch[SAMPLES])]
    if RUN in batch:
        for (payload, _), run in zip(out, batch[RUN]):
            payload.run = str(run)
    return out


def _objects(values: list[Any]) -> Any:
    """A 1-d object array (``np.array`` would make bytes a fixed-width dtype)."""
    import numpy as np

    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def payload_batch(payloads: list[ShardPayload], samples: list[bytes]) -> dict[str, Any]:
    """The batch a stage hands to the next one."""
    import numpy as np

    return {
        "shard": np.array([p.shard for p in payloads], dtype=np.int64),
        PAYLOAD: _objects([pack(p) for p in payloads]),
        SAMPLES: _objects(samples),
    }


def row_batch(row: dict[str, Any]) -> dict[str, Any]:
    """A batch of one pipeline input row (``Plan.row``), as Ray Data hands a stage one row: each field a
    one-element array."""
    return {k: _objects([v]) for k, v in row.items()}


def outcome_batch(outcomes: list[ShardOutcome]) -> dict[str, Any]:
    """The batch the last stage hands to the driver."""
    import numpy as np

    return {"shard": np.array([o.shard for o in outcomes], dtype=np.int64),
            PAYLOAD: _objects([pack(o) for o in outcomes])}


def read_outcome(data: Any) -> ShardOutcome:
    out = unpack(data)
    if not isinstance(out, ShardOutcome):
        raise RunError(f"the pipeline's last stage returned a {type(out).__name__}, not a ShardOutcome")
    return out
