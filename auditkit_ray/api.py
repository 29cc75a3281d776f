"""Public Python functions behind the facade and the CLI."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .config.loader import load_run_spec, run_spec_from_dict
from .config.models import RunSpec
from .core.result import RunResult
from .errors import ConfigError


def as_run_spec(spec: Any) -> RunSpec:
    if isinstance(spec, RunSpec):
        return spec
    if isinstance(spec, dict):
        return run_spec_from_dict(spec, "<dict>")
    if isinstance(spec, (str, os.PathLike)):
        return load_run_spec(spec)
    raise ConfigError(f"evaluate() takes a RunSpec, a dict or a path, not {type(spec).__name__}")


def evaluate(spec: Any, *, address: str | None = None, progress: bool = False, store: str | None = None) -> RunResult:
    """Evaluate one run on Ray and return its RunResult.

    Ray starts locally in-process unless ``address`` (or ``RAY_ADDRESS``) names
    a cluster, or Ray is already initialised. Finished shards already in the
    result store are reused (resume); stored generations are reused when only
    the scoring changed.
    """
    from .pipeline.driver import evaluate_spec

    run = as_run_spec(spec)
    if store:
        run = run.model_copy(update={"store": run.store.model_copy(update={"path": store})})
    return evaluate_spec(run, address=address, progress=progress)


def evaluate_many(base: Any, datasets: list[Any], *, address: str | None = None, progress: bool = False) -> list[RunResult]:
    """One model over several datasets, loading the model once per generation
    actor: each dataset (a path or a ``dataset`` mapping, optionally with its
    own ``prompt``/``metrics``/``name`` under the keys of a run file) becomes a
    run of its own, and all of them share one pipeline."""
    from .config.sweep import deep_merge
    from .pipeline.driver import evaluate_specs

    run = as_run_spec(base)
    data = run.model_dump(mode="json", by_alias=True)
    specs = []
    for i, d in enumerate(datasets):
        if isinstance(d, (str, os.PathLike)):
            d = {"dataset": {**data["dataset"], "path": str(d)}}
        elif isinstance(d, dict) and "dataset" not in d:
            d = {"dataset": {**data["dataset"], **d}}
        over = dict(d)
        over.setdefault("name", f"{run.name}/{Path(over['dataset'].get('path', str(i))).stem}")
        specs.append(run_spec_from_dict(deep_merge(data, over), f"<evaluate_many dataset {i}>"))
    return evaluate_specs(specs, address=address, progress=progress)


def samples_table(result: RunResult | str | os.PathLike):
    """The per-sample table of a run (a pyarrow Table in sample order):
    sample_id, repeat, prompt, target, text, raw_text, annotations, scores
    (JSON list of Score dicts), token counts, latency, error, worker."""
    import pyarrow.dataset as pads

    from .core.result import load_run

    if not isinstance(result, RunResult):
        result = load_run(result)
    if not result.samples_path:
        raise ConfigError(f"run {result.name!r} has no per-sample table")
    from .store.base import open_store

    path = result.samples_path
    if path.startswith("s3://"):
        import pyarrow as pa

        store_cfg = (result.config or {}).get("store") or {}
        root, _, rel = path.partition("/runs/")
        store = open_store(root, store_cfg.get("endpoint_url"), store_cfg.get("region"))
        rel = "runs/" + rel
        import io

        import pyarrow.parquet as pq

        names = [name for name in store.list(rel) if name.endswith(".parquet")]
        tables = [pq.read_table(io.BytesIO(b)) for b in store.read_many(f"{rel}/{name}" for name in names)]
        table = pa.concat_tables(tables)
    else:
        table = pads.dataset(path, format="parquet").to_table()
    return table.sort_by([("shard", "ascending"), ("index", "ascending"), ("repeat", "ascending")])
