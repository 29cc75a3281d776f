"""Driver merge: per-sample shards -> RunResult.

Summaries come from the stored rows only, so a resumed run and an
uninterrupted one give the same numbers. Each shard's rows are tallied
(``ShardTally``) in (shard, index) order by the scoring actor that wrote
them, which stores the tally in the shard's footer; for a shard written by an
earlier run the driver reads that footer and the shard's latencies (or, for a
shard without one, tallies its rows); the tallies are then combined in shard
order, whatever order the actors finished in.

The driver holds no Python object per sample: a tally per shard, and the
run's latencies as one array of doubles (8 bytes a sample) for the
percentiles.
"""

from __future__ import annotations

import io
import math
from array import array
from datetime import datetime, timezone
from typing import Any, Iterable

from .._version import __version__
from ..actors.tally import COLUMNS, MAX_LISTED_ERRORS, TALLY_KEY, ShardTally, corpus_metrics, run_metrics
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


def _percentiles(values: Any, qs: tuple[float, ...]) -> list[float | None]:
    """Linear-interpolation percentiles of ``values`` (a float64 array, sorted here in place), as a sorted
    list would give them."""
    if not len(values):
        return [None for _ in qs]
    values.sort()
    out: list[float | None] = []
    for q in qs:
        k = (len(values) - 1) * q
        lo, hi = math.floor(k), math.ceil(k)
        a, b = float(values[lo]), float(values[hi])
        out.append(a + (b - a) * (k - lo))
    return out


def tally_stored(store: ResultStore, plan: Plan, shards: list[int], metrics: list[Any], *,
                 from_rows: bool = False) -> dict[int, ShardTally]:
    """Tally stored shards (those no actor tallied in this run): from the tally in each shard's footer and its
    ``latency_s`` column, or (a shard without one, or ``from_rows``) from its rows."""
    import pyarrow.parquet as pq

    corpus = corpus_metrics(metrics)
    out: dict[int, ShardTally] = {}
    todo = [] if from_rows else shards
    local = [store.local_path(plan.layout.shard(i)) for i in todo]
    # a local file: its footer and latency column alone are read; a remote one whole, the next ones read ahead
    sources = iter(local) if all(local) else (io.BytesIO(d) for d in store.read_many(plan.layout.shard(i)
                                                                                     for i in todo))
    for i, source in zip(todo, sources):
        f = pq.ParquetFile(source)
        text = (f.schema_arrow.metadata or {}).get(TALLY_KEY)
        if text is None:
            continue
        col = f.read(columns=["latency_s"]).column(0).drop_null()
        lat = array("d", col.to_numpy(zero_copy_only=False).tobytes()) if len(col) else array("d")
        tally = ShardTally.from_json(text, lat)
        if tally is not None:
            out[i] = tally
    rest = [i for i in shards if i not in out]
    for i, rows in zip(rest, iter_rows(store, plan, rest)):
        out[i] = ShardTally.of_rows(rows, corpus, stored=True)
    return out


@gc_paused()
def merge(plan: Plan, store: ResultStore, *, wall_s: float, generated: int, generation_s: float, new_tokens: int,
          model_size: int | None = None, tallies: dict[int, ShardTally] | None = None,
          reused: Iterable[int] = (), from_rows: bool = False) -> RunResult:
    """The run's RunResult from its shards' tallies: those the scoring actors
    sent (``tallies``, emptied as they are merged: each shard's latencies are held once), the rest read from
    the store (``tally_stored``; ``from_rows``: every one of those tallied from its per-sample rows, not its
    footer). What names the run (fingerprints, model and dataset identity, config) is the plan's
    (``Plan.identity``), worked out when it was planned. ``reused``: the shards
    whose rows were stored before this invocation (its perf counts them as
    ``stored``; the rest it generated or re-scored)."""
    spec, ident = plan.spec, plan.identity
    metric_objs = run_metrics(spec)
    tallies = {} if tallies is None else tallies
    tallies.update(tally_stored(store, plan, [i for i in range(plan.n_shards) if i not in tallies], metric_objs,
                                from_rows=from_rows))

    import numpy as np

    stored = sum(tallies[i].n_rows for i in set(reused) if i in tallies)  # before the tallies are merged away
    acc = Accumulator(metric_objs)
    total = ShardTally()
    # every latency in one array, each shard's copied in and dropped as it is merged: held once
    latencies = np.empty(sum(len(t.latencies) for t in tallies.values()), dtype=np.float64)
    filled = 0
    flaky: dict[str, list[str]] = {}  # per score name: the first flaky samples, in shard order
    flaky_count: dict[str, int] = {}
    for i in range(plan.n_shards):  # in shard order, whoever tallied what
        t = tallies.pop(i)
        for name, st in t.stats.items():
            acc.stats[name] = acc.stats[name].merge(st) if name in acc.stats else st
        for name, vals in t.corpus.items():
            acc.corpus[name] = acc.metrics[name].combine(acc.corpus[name], vals) if name in acc.corpus else list(vals)
        total.n_rows += t.n_rows
        total.errors.extend(t.errors[: MAX_LISTED_ERRORS - len(total.errors)])
        total.error_count += t.error_count
        latencies[filled:filled + len(t.latencies)] = np.frombuffer(t.latencies, dtype=np.float64)
        filled += len(t.latencies)
        total.scopes |= t.scopes
        total.prompt_tokens += t.prompt_tokens
        total.completion_tokens += t.completion_tokens
        total.token_source = total.token_source or t.token_source
        if t.cost is not None:
            total.cost = (total.cost or 0.0) + t.cost
        total.retries += t.retries
        total.cached += t.cached
        for name, ids in t.flaky.items():  # a shard holds all of a sample's repeats: no id twice
            listed = flaky.setdefault(name, [])
            listed.extend(ids[: MAX_LISTED_FLAKY - len(listed)])
            flaky_count[name] = flaky_count.get(name, 0) + t.flaky_count.get(name, len(ids))
    summaries = acc.summaries()
    for name, ids in flaky.items():
        if name in summaries:
            summaries[name].flaky = flaky_count[name]
            summaries[name].flaky_samples = ids
    errors = [SampleError(sample_id=sid, stage=stage, message=msg) for sid, stage, msg in total.errors]
    tokens = TokenUsage(prompt=total.prompt_tokens, completion=total.completion_tokens, source=total.token_source)
    scopes = total.scopes
    p50, p95, p99 = _percentiles(latencies, (0.50, 0.95, 0.99))
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
        latency_p50_s=p50,
        latency_p95_s=p95,
        latency_p99_s=p99,
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
