"""Driver merge: per-sample shards -> RunResult.

Summaries come from the stored rows only, so a resumed run and an
uninterrupted one give the same numbers. Each shard's rows are tallied
(``ShardTally``) in (shard, index) order, by the scoring actor that wrote
them or, for a shard written by an earlier run, by the driver from the
stored file; the tallies are then combined in shard order, whatever order
the actors finished in.
"""

from __future__ import annotations

import io
import math
from datetime import datetime, timezone
from typing import Any, Iterable

from .._version import __version__
from ..actors.tally import COLUMNS, MAX_LISTED_ERRORS, ShardTally, corpus_metrics, run_metrics
from ..core.gcpause import gc_paused
from ..core.result import MAX_LISTED_FLAKY, Perf, RunResult, SampleError, TokenUsage
from ..core.summary import Accumulator
from ..store.base import ResultStore
from .plan import Plan


def iter_rows(store: ResultStore, plan: Plan, shards: Iterable[int] | None = None):
    """Per-sample rows of a run (or of the given shards), shard by shard in
    shard order (memory bounded by one shard, whatever the run's size)."""
    import pyarrow.parquet as pq

    # a remote store reads the next shards while this one is parsed
    todo = range(plan.n_shards) if shards is None else shards
    for data in store.read_many(plan.layout.shard(i) for i in todo):
        table = pq.read_table(io.BytesIO(data))
        cols = [c for c in COLUMNS if c in table.column_names]
        yield table.sort_by("index").select(cols).to_pylist()


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def tally_stored(store: ResultStore, plan: Plan, shards: list[int], metrics: list[Any]) -> dict[int, ShardTally]:
    """Tally stored shards (those no actor tallied in this run)."""
    corpus = corpus_metrics(metrics)
    out = {}
    for i, rows in zip(shards, iter_rows(store, plan, shards)):
        out[i] = ShardTally.of_rows(rows, corpus, stored=True)
    return out


@gc_paused()
def merge(plan: Plan, store: ResultStore, *, wall_s: float, generated: int, generation_s: float, new_tokens: int,
          model_size: int | None = None, tallies: dict[int, ShardTally] | None = None,
          reused: Iterable[int] = ()) -> RunResult:
    """The run's RunResult from its shards' tallies: those the scoring actors
    sent (``tallies``), the rest read from the store. What names the run
    (fingerprints, model and dataset identity, config) is the plan's
    (``Plan.identity``), worked out when it was planned. ``reused``: the shards
    whose rows were stored before this invocation (its perf counts them as
    ``stored``; the rest it generated or re-scored)."""
    spec, ident = plan.spec, plan.identity
    metric_objs = run_metrics(spec)
    tallies = dict(tallies or {})
    tallies.update(tally_stored(store, plan, [i for i in range(plan.n_shards) if i not in tallies], metric_objs))

    acc = Accumulator(metric_objs)
    total = ShardTally()
    flaky: dict[str, list[str]] = {}  # per score name: every flaky sample, in shard order
    for i in range(plan.n_shards):  # in shard order, whoever tallied what
        t = tallies[i]
        for name, st in t.stats.items():
            acc.stats[name] = acc.stats[name].merge(st) if name in acc.stats else st
        for name, vals in t.corpus.items():
            acc.corpus[name] = acc.metrics[name].combine(acc.corpus[name], vals) if name in acc.corpus else list(vals)
        total.n_rows += t.n_rows
        total.errors.extend(t.errors[: MAX_LISTED_ERRORS - len(total.errors)])
        total.error_count += t.error_count
        total.latencies.extend(t.latencies)
        total.scopes |= t.scopes
        total.prompt_tokens += t.prompt_tokens
        total.completion_tokens += t.completion_tokens
        total.token_source = total.token_source or t.token_source
        if t.cost is not None:
            total.cost = (total.cost or 0.0) + t.cost
        total.retries += t.retries
        total.cached += t.cached
        for name, ids in t.flaky.items():
            flaky.setdefault(name, []).extend(ids)  # a shard holds all of a sample's repeats: no id twice
    summaries = acc.summaries()
    for name, ids in flaky.items():
        if name in summaries:
            summaries[name].flaky = len(ids)
            summaries[name].flaky_samples = ids[:MAX_LISTED_FLAKY]
    errors = [SampleError(sample_id=sid, stage=stage, message=msg) for sid, stage, msg in total.errors]
    tokens = TokenUsage(prompt=total.prompt_tokens, completion=total.completion_tokens, source=total.token_source)
    latencies, scopes = total.latencies, total.scopes
    stored = sum(tallies[i].n_rows for i in set(reused) if i in tallies)
    if spec.model.replays_generations():  # its outputs were read, not generated: scored again
        generated, generation_s, new_tokens = 0, 0.0, 0

    perf = Perf(
        wall_s=wall_s,
        generation_s=generation_s or None,
        samples=total.n_rows,
        generated=generated,
        rescored=max(0, total.n_rows - stored - generated),
        stored=stored,
        throughput_samples_per_s=(generated / wall_s) if generated and wall_s else None,
        tokens_per_s=(new_tokens / wall_s) if new_tokens and wall_s else None,
        latency_p50_s=_percentile(latencies, 0.50),
        latency_p95_s=_percentile(latencies, 0.95),
        latency_p99_s=_percentile(latencies, 0.99),
        latency_scope="request" if scopes == {"request"} else ("batch" if scopes else None),
        model_size_bytes=model_size,
        cost=total.cost,
        retries=total.retries,
        cached=total.cached,
    )
    return RunResult(
        run_id=ident.run_fp[:16],
        name=spec.name,
        fingerprint=ident.run_fp,
        generation_fingerprint=ident.gen_fp,
        dataset_fingerprint=ident.dataset_fp,
        package_version=__version__,
        seed=spec.seed,
        config=ident.config,
        metrics=summaries,
        perf=perf,
        tokens=tokens,
        errors=errors,
        error_count=total.error_count,
        samples_path=store.uri(plan.layout.shards_dir),
        backend=ident.backend,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        metadata=_metadata(plan),
    )


def _metadata(plan: Plan) -> dict[str, Any]:
    meta: dict[str, Any] = {"experiment": plan.spec.experiment.model_dump(mode="json"), "n_shards": plan.n_shards,
                            "shard_size": plan.layout.shard_size}
    prov = plan.identity.provenance
    if prov is not None:
        meta["provenance"] = prov  # from the checkpoint's provenance.json (also in the fingerprint)
    return meta
