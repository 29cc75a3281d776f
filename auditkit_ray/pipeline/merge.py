"""Driver merge: per-sample shards -> RunResult.

Summaries come from the stored rows only, so a resumed run and an
uninterrupted one give the same numbers. Each shard's rows are tallied
(``ShardTally``) in (shard, index) order, by the scoring actor that wrote
them or, for a shard written by an earlier run, by the driver from the
stored file; the tallies are then combined in shard order, whatever order
the actors finished in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

from .._version import __version__
from ..core.gcpause import gc_paused
from ..config.identity import dataset_fingerprint, model_identity, redacted_config
from ..core.registry import build_metric
from ..core.aggregate import MeanStats
from ..core.summary import Accumulator
from ..core.result import Perf, RunResult, SampleError, TokenUsage
from ..core.rowjson import loads as row_loads
from ..core.types import Score, Status
from ..store.base import ResultStore
from .plan import Plan

MAX_LISTED_ERRORS = 100


COLUMNS = ["sample_id", "error", "scores", "latency_s", "latency_scope", "prompt_tokens", "completion_tokens", "token_source",
           "gen_metadata"]


def iter_rows(store: ResultStore, plan: Plan, shards: Iterable[int] | None = None):
    """Per-sample rows of a run (or of the given shards), shard by shard in
    shard order (memory bounded by one shard, whatever the run's size)."""
    import pyarrow.parquet as pq
    import io

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


@dataclass
class ShardTally:
    """What the run's summary needs from one shard's rows. The scoring actor
    that writes a shard tallies it from the rows it writes; the driver
    tallies a shard it did not see scored (a resumed run) from the stored
    file, with the same code. Tallies combine in shard order, so a run's
    numbers do not depend on which actor scored what, or when."""

    n_rows: int = 0
    stats: dict[str, MeanStats] = field(default_factory=dict)
    corpus: dict[str, list[float]] = field(default_factory=dict)
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (sample_id, stage, message), the first listed
    error_count: int = 0
    latencies: list[float] = field(default_factory=list)
    scopes: set[str] = field(default_factory=set)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_source: str | None = None
    cost: float | None = None
    retries: int = 0
    cached: int = 0

    @classmethod
    def of_rows(cls, rows: Iterable[dict[str, Any]], corpus_metrics: dict[str, Any], stored: bool = False) -> "ShardTally":
        """Tally rows with ``COLUMNS``: ``scores`` a list of Scores and
        ``gen_metadata`` a dict, or (``stored``) both as the JSON text a
        stored shard holds. ``corpus_metrics``: output name -> metric, for the
        metrics whose summary is a corpus statistic."""
        t = cls()
        corpus, errors = t.corpus, t.errors
        values: dict[str, list[float]] = {}  # per score name: the scored values, in row order
        others: dict[str, list[Status]] = {}  # per score name: the other statuses
        scored, error, read = Status.SCORED, Status.ERROR, Score.read_json_dict
        for row in rows:
            t.n_rows += 1
            if row["error"]:
                t.error_count += 1
                if len(errors) < MAX_LISTED_ERRORS:
                    errors.append((row["sample_id"], "generation", row["error"]))
            for sc in row_loads(row["scores"]) if stored else row["scores"]:
                if type(sc) is dict:
                    sc = read(sc)
                name, status = sc.name, sc.status
                vals = values.get(name)
                if vals is None:
                    vals = values[name] = []
                    others[name] = []
                if status is scored:
                    vals.append(sc.value)
                    if corpus_metrics and name in corpus_metrics:
                        stats = [float(x) for x in sc.metadata.get("stats") or []]
                        corpus[name] = corpus_metrics[name].combine(corpus[name], stats) if name in corpus else stats
                else:
                    others[name].append(status)
                    if status is error and not row["error"] and len(errors) < MAX_LISTED_ERRORS:
                        errors.append((row["sample_id"], f"metric:{name}", sc.reason or ""))
            if row["latency_s"] is not None:
                t.latencies.append(row["latency_s"])
                t.scopes.add(row["latency_scope"] or "batch")
            t.prompt_tokens += row["prompt_tokens"] or 0
            t.completion_tokens += row["completion_tokens"] or 0
            t.token_source = t.token_source or row["token_source"]
            meta = row_loads(row.get("gen_metadata") or "{}") if stored else row["gen_metadata"]
            if meta.get("cost") is not None:
                t.cost = (t.cost or 0.0) + float(meta["cost"])
            t.retries += int(meta.get("retries") or 0)
            t.cached += bool(meta.get("cached"))
        for name, vals in values.items():  # sums exactly rounded (fsum): the same whatever the order of the values
            counts = {st.value: 0 for st in Status}
            counts[scored.value] = len(vals)
            for st in others[name]:
                counts[st.value] += 1
            t.stats[name] = MeanStats(n=len(vals), total=math.fsum(vals), total_sq=math.fsum([v * v for v in vals]),
                                      binary=set(vals) <= {0.0, 1.0}, counts=counts)
        return t


def corpus_metrics(metrics: Iterable[Any]) -> dict[str, Any]:
    return {m.output_name: m for m in metrics if m.aggregation == "corpus"}


def run_metrics(spec: Any) -> list[Any]:
    out = []
    for m in spec.metrics:
        params = dict(m.params)
        if m.on is not None:
            params["on"] = m.on
        out.append(build_metric(m.name, params, m.as_))
    return out


def tally_stored(store: ResultStore, plan: Plan, shards: list[int], metrics: list[Any]) -> dict[int, ShardTally]:
    """Tally stored shards (those no actor tallied in this run)."""
    corpus = corpus_metrics(metrics)
    out = {}
    for i, rows in zip(shards, iter_rows(store, plan, shards)):
        out[i] = ShardTally.of_rows(rows, corpus, stored=True)
    return out


@gc_paused()
def merge(plan: Plan, store: ResultStore, *, wall_s: float, generated: int, generation_s: float, new_tokens: int,
          model_size: int | None = None, tallies: dict[int, ShardTally] | None = None) -> RunResult:
    """The run's RunResult from its shards' tallies: those the scoring actors
    sent (``tallies``), the rest read from the store."""
    spec = plan.spec
    metric_objs = run_metrics(spec)
    tallies = dict(tallies or {})
    tallies.update(tally_stored(store, plan, [i for i in range(plan.n_shards) if i not in tallies], metric_objs))

    acc = Accumulator(metric_objs)
    total = ShardTally()
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
    summaries = acc.summaries()
    errors = [SampleError(sample_id=sid, stage=stage, message=msg) for sid, stage, msg in total.errors]
    tokens = TokenUsage(prompt=total.prompt_tokens, completion=total.completion_tokens, source=total.token_source)
    latencies, scopes = total.latencies, total.scopes

    perf = Perf(
        wall_s=wall_s,
        generation_s=generation_s or None,
        samples=total.n_rows,
        generated=generated,
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
        run_id=plan.layout.run_fp[:16],
        name=spec.name,
        fingerprint=plan.layout.run_fp,
        generation_fingerprint=plan.layout.gen_fp,
        dataset_fingerprint=dataset_fingerprint(spec),
        package_version=__version__,
        seed=spec.seed,
        config=redacted_config(spec),
        metrics=summaries,
        perf=perf,
        tokens=tokens,
        errors=errors,
        error_count=total.error_count,
        samples_path=store.uri(plan.layout.shards_dir),
        backend=_backend_identity(spec),
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        metadata=_metadata(spec, plan),
    )


def _metadata(spec: Any, plan: Plan) -> dict[str, Any]:
    meta: dict[str, Any] = {"experiment": spec.experiment.model_dump(mode="json"), "n_shards": plan.n_shards,
                            "shard_size": plan.layout.shard_size}
    prov = model_identity(spec).get("provenance")
    if prov is not None:
        meta["provenance"] = prov  # from the checkpoint's provenance.json (also in the fingerprint)
    return meta


def _backend_identity(spec: Any) -> dict[str, Any]:
    from ..core.secrets import redact

    return redact(model_identity(spec))
