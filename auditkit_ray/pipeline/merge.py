"""Driver merge: per-sample shards -> RunResult.

Summaries come from the stored rows only, so a resumed run and an
uninterrupted one give the same numbers; rows are ordered by (shard, index),
whatever order the actors finished in.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

from .._version import __version__
from ..core.gcpause import gc_paused
from ..config.identity import dataset_fingerprint, model_identity, redacted_config
from ..core.registry import build_metric
from ..core.summary import Accumulator
from ..core.result import Perf, RunResult, SampleError, TokenUsage
from ..core.types import Score
from ..store.base import ResultStore
from .plan import Plan

MAX_LISTED_ERRORS = 100


COLUMNS = ["sample_id", "error", "scores", "latency_s", "latency_scope", "prompt_tokens", "completion_tokens", "token_source",
           "gen_metadata"]


def iter_rows(store: ResultStore, plan: Plan):
    """Per-sample rows of a run, shard by shard in shard order (memory bounded
    by one shard, whatever the run's size)."""
    import pyarrow.parquet as pq
    import io

    # a remote store reads the next shards while this one is parsed
    for data in store.read_many(plan.layout.shard(i) for i in range(plan.n_shards)):
        table = pq.read_table(io.BytesIO(data))
        cols = [c for c in COLUMNS if c in table.column_names]
        yield from table.sort_by("index").select(cols).to_pylist()


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


@gc_paused()
def merge(plan: Plan, store: ResultStore, *, wall_s: float, generated: int, generation_s: float, new_tokens: int, model_size: int | None = None) -> RunResult:
    spec = plan.spec
    n_rows = 0
    cost: float | None = None
    retries = cached = 0

    metric_objs = []
    for m in spec.metrics:
        params = dict(m.params)
        if m.on is not None:
            params["on"] = m.on
        metric_objs.append(build_metric(m.name, params, m.as_))

    acc = Accumulator(metric_objs)
    errors: list[SampleError] = []
    error_count = 0
    latencies: list[float] = []
    scopes: set[str] = set()
    tokens = TokenUsage()
    for row in iter_rows(store, plan):
        n_rows += 1
        if row["error"]:
            error_count += 1
            if len(errors) < MAX_LISTED_ERRORS:
                errors.append(SampleError(sample_id=row["sample_id"], stage="generation", message=row["error"]))
        for sd in json.loads(row["scores"]):
            s = Score.read_json_dict(sd)
            acc.add(s)
            if s.status.value == "error" and not row["error"] and len(errors) < MAX_LISTED_ERRORS:
                errors.append(SampleError(sample_id=row["sample_id"], stage=f"metric:{s.name}", message=s.reason or ""))
        if row["latency_s"] is not None:
            latencies.append(row["latency_s"])
            scopes.add(row["latency_scope"] or "batch")
        tokens.prompt += row["prompt_tokens"] or 0
        tokens.completion += row["completion_tokens"] or 0
        tokens.source = tokens.source or row["token_source"]
        meta = json.loads(row.get("gen_metadata") or "{}")
        if meta.get("cost") is not None:
            cost = (cost or 0.0) + float(meta["cost"])
        retries += int(meta.get("retries") or 0)
        cached += bool(meta.get("cached"))
    summaries = acc.summaries()

    perf = Perf(
        wall_s=wall_s,
        generation_s=generation_s or None,
        samples=n_rows,
        generated=generated,
        throughput_samples_per_s=(generated / wall_s) if generated and wall_s else None,
        tokens_per_s=(new_tokens / wall_s) if new_tokens and wall_s else None,
        latency_p50_s=_percentile(latencies, 0.50),
        latency_p95_s=_percentile(latencies, 0.95),
        latency_p99_s=_percentile(latencies, 0.99),
        latency_scope="request" if scopes == {"request"} else ("batch" if scopes else None),
        model_size_bytes=model_size,
        cost=cost,
        retries=retries,
        cached=cached,
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
        error_count=error_count,
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
