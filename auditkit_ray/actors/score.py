"""The scoring stages: annotators and metrics over a shard's outputs, one
pool of actors per kind of metric (``POOLS``); the last pool writes the run
shard (atomically, before returning) and tallies it for the driver."""

from __future__ import annotations

import os
import time
from typing import Any

from ..core.gcpause import gc_paused
from ..core.metric import Metric
from ..core.types import Generation, Sample
from . import tables
from .context import DriverContext, RunContext, Runs, worker_info
from .generate import Generator, stored_generations
from .shard import ShardOutcome, ShardPayload, StageFields, outcome_batch, payload_batch, read_batch, unpack
from .tally import TALLY_KEY, ShardTally, corpus_metrics, run_metrics

#: the scoring pools, in pipeline order (a metric names its own: ``Metric.pool_name``)
POOLS = ("checks", "judges", "oracles")

#: where the first pool's shards get their outputs (``ScoreStage``)
GENERATION = ("given", "inline", "cached")


def score_fields(first: bool, final: bool) -> StageFields:
    """A scoring pool's fields: the first adds the annotations; all but the last add their scores
    (the last turns the payload into a ``ShardOutcome``)."""
    reads = ("run", "items", "generations", "worker") + (() if first else ("annotations", "scores"))
    return StageFields(f"ScoreStage({'first' if first else 'later'} pool{', final' if final else ''})", reads=reads,
                       adds=(("annotations",) if first else ()) + (() if final else ("scores",)))


class ScoreStage:
    """One scoring pool: annotators (first pool only) and the run's metrics
    whose ``pool_name()`` is this pool. The first pool (``first``) annotates;
    the last (``final``) writes the run shard.

    ``generation`` says where the first pool's shards get their outputs:
    ``given`` by a generation stage before it; ``inline``, a backend with no
    model (``generates_inline``) run here, so that its shards skip one
    process and one hand-off; ``cached``, read from the generation cache
    (every pending shard's outputs are stored: no backend at all)."""

    def __init__(self, runs: Runs, pool: str = "checks", final: bool = True, generation: str = "given",
                 first: bool = True, driver: DriverContext | None = None) -> None:
        if generation not in GENERATION:
            raise ValueError(f"ScoreStage: generation must be one of {GENERATION}, got {generation!r}")
        self.generation = generation
        self._generator = Generator(runs, driver=driver) if generation == "inline" else None
        self.ctx = self._generator.ctx if self._generator is not None else RunContext(runs, driver)
        self.pool = pool
        self.final = final
        if generation != "given" and not first:
            raise ValueError(f"ScoreStage: only the first pool makes or reads outputs, not {generation!r}")
        self.fields = score_fields(first=first, final=final)
        self._worker = worker_info()
        self._scorers: dict[str, tuple[list, list, dict]] = {}

    def _with_generations(self, payload: ShardPayload) -> ShardPayload:
        if self.generation == "inline":
            return self._generator.generate_shard(payload)
        if self.generation == "cached":
            _, store, layout = self.ctx.of(self.fields.stage, payload.run)
            stored_generations(payload, store, layout).worker = self._worker
        return payload

    def _scorer(self, key: str) -> tuple[list, list, dict]:
        """The run's annotators, this pool's metrics, and (for the tally) the
        run's corpus metrics, whichever pool scores them."""
        if key not in self._scorers:
            from ..annotators.extract import build_annotator
            from ..judges.textmodel import judge_text_model

            spec = self.ctx.specs[key]
            annotators = [(a.name, build_annotator(a, judge_text_model)) for a in spec.annotators]
            every = run_metrics(spec)
            self._scorers[key] = (annotators, [m for m in every if m.pool_name() == self.pool], corpus_metrics(every))
        return self._scorers[key]

    def score_shard(self, payload: ShardPayload, samples: list[Sample]) -> ShardPayload | ShardOutcome:
        from ..annotators.extract import apply_annotators_batch

        self.fields.require(payload)
        key = payload.run
        _, store, layout = self.ctx.of(self.fields.stage, key)
        annotators, metrics, corpus = self._scorer(key)
        items = payload.items
        gens = [Generation.model_validate(g) for g in payload.generations]
        if payload.annotations is None:
            payload.annotations = apply_annotators_batch(annotators, gens, [it["request"]["sample_id"] for it in items])
        annotations = payload.annotations
        contexts = [{"annotations": a, "prompt": it["request"]["prompt"], "repeat": it["request"]["repeat"]}
                    for a, it in zip(annotations, items)]
        # per item: earlier pools' scores as their dicts, then this pool's as Score objects
        per_item: list[list[Any]] = [list(p) for p in payload.scores or [[] for _ in items]]
        batch = list(zip(samples, gens, contexts))
        groups: dict[str, list[int]] = {}
        for k, it in enumerate(items):
            groups.setdefault(it["request"]["sample_id"], []).append(k)
        absent: dict[str, list[bool]] = {}  # required fields' absence per item, worked out once for all the metrics
        for metric in metrics:
            if metric.scope == "group":
                order = list(groups.values())
                results = metric.evaluate_groups([(samples[ks[0]], [gens[k] for k in ks], [contexts[k] for k in ks])
                                                  for ks in order])
                for ks, scores in zip(order, results):
                    per_item[min(ks, key=lambda k: items[k]["request"]["repeat"])].extend(scores)
                continue
            shared = type(metric).evaluate_batch is Metric.evaluate_batch  # an override may not take ``absent``
            scored = metric.evaluate_batch(batch, absent=absent) if shared else metric.evaluate_batch(batch)
            for k, scores in enumerate(scored):
                per_item[k].extend(scores)
        if not self.final:
            # the next pool gets plain dicts (pickled with the shard)
            payload.scores = [[s if type(s) is dict else s.to_json_dict() for s in p] for p in per_item]
            return payload
        timing = {"generated_at": payload.generated_at, "scored_at": time.time(), "scored_by": os.getpid()}
        table = tables.run_table(payload.shard, items, [s.target for s in samples], payload.generations, annotations,
                                 [[s if type(s) is dict else tables.score_row(s) for s in p] for p in per_item],
                                 {**payload.worker, **timing})
        tally = self._tally(items, payload.generations, per_item, corpus)
        # the tally rides in the shard's footer: a resumed run's driver reads it there, not the rows
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), TALLY_KEY: tally.to_json()})
        store.write_table(layout.shard(payload.shard), table)
        return ShardOutcome(
            run=key,
            shard=payload.shard,
            n=len(items),
            tally=tally,
            generated=payload.generated,
            generation_s=payload.generation_s,
            completion_tokens=sum(g.completion_tokens or 0 for g in gens) if payload.generated else 0,
            model_size_bytes=payload.model_size_bytes,
        )

    @staticmethod
    def _tally(items: list[dict], gens: list[dict], scores: list[list[Any]], corpus: dict) -> ShardTally:
        """The summary's share of the shard just written, from the same rows:
        the driver merges tallies, not the files."""
        return ShardTally.of_rows(({"sample_id": it["request"]["sample_id"],
                                    "repeat": it["request"].get("repeat", 0), "error": g.get("error"), "scores": sc,
                                    "latency_s": g.get("latency_s"), "latency_scope": g.get("latency_scope"),
                                    "prompt_tokens": g.get("prompt_tokens"),
                                    "completion_tokens": g.get("completion_tokens"),
                                    "token_source": g.get("token_source"), "gen_metadata": g.get("metadata") or {}}
                                   for it, g, sc in zip(items, gens, scores)), corpus)

    @gc_paused()
    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        rows = read_batch(batch)
        out = [self.score_shard(self._with_generations(payload), unpack(cell)) for payload, cell in rows]
        if not self.final:
            return payload_batch(out, [cell for _, cell in rows])
        return outcome_batch(out)


def pools_needed(specs: list[Any]) -> list[str]:
    """The scoring pools the runs' metrics need, in pipeline order (at least the first)."""
    used = {m.pool_name() for spec in specs for m in run_metrics(spec)}
    return [p for p in POOLS if p in used] or ["checks"]
