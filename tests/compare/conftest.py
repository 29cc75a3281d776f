"""Fixtures: RunResult JSON + per-sample Parquet shards written directly (no Ray).

``make_run(root, name, metrics, ...)`` writes ``root/<name>/result.json`` and
``root/<name>/samples/shard-00000.parquet`` (the run_table column layout) and
returns the result.json path. ``metrics`` maps a metric name to a spec:

    {"direction": "maximize" | "minimize",     # default maximize
     "values": {sample_id or (sample_id, repeat): float | None | "error" | "not_tested" | "unknown"},
     "params": {...}, "version": "1", "cls": "module:Class",   # the identity
     "aggregation": "mean" | "corpus", "finalize": callable (corpus: mean from summed stats),
     "stats": {key: [floats]}, "cluster": {key: id}}

``typed=True`` also writes the typed score columns the scoring stage writes (``store.columns``);
``duplicate=k`` stores the first k rows a second time (with other values).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

DATASET = "d" * 64


def _key(k: Any) -> tuple[str, int]:
    return (k, 0) if isinstance(k, str) else (str(k[0]), int(k[1]))


def build_run(
    root: Path,
    name: str,
    metrics: dict[str, dict],
    *,
    dataset: str | None = DATASET,
    perf: dict | None = None,
    tokens: dict | None = None,
    run_id: str | None = None,
    samples: bool = True,
    shards: int = 1,
    typed: bool = False,
    duplicate: int = 0,
) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from auditkit_ray.core.aggregate import MeanStats, summarize
    from auditkit_ray.core.result import MetricSummary, Perf, RunResult, TokenUsage
    from auditkit_ray.core.types import Score, Status

    run_dir = Path(root) / name
    run_dir.mkdir(parents=True, exist_ok=True)
    keys: list[tuple[str, int]] = []
    for spec in metrics.values():
        for k in spec.get("values", {}):
            if _key(k) not in keys:
                keys.append(_key(k))
    rows: dict[tuple[str, int], list[dict]] = {k: [] for k in keys}
    summaries = {}
    for mname, spec in metrics.items():
        direction = spec.get("direction", "maximize")
        ms = MeanStats()
        corpus_total = None
        for k, v in spec.get("values", {}).items():
            key = _key(k)
            meta: dict[str, Any] = {}
            if "stats" in spec and k in spec["stats"]:
                meta["stats"] = list(spec["stats"][k])
            if "cluster" in spec and k in spec["cluster"]:
                meta["cluster"] = spec["cluster"][k]
            if isinstance(v, str):
                s = Score(name=mname, status=Status(v), reason="fixture", metadata=meta)
            elif v is None:
                s = Score(name=mname, status=Status.UNKNOWN, reason="fixture", metadata=meta)
            else:
                s = Score.scored(mname, float(v), metadata=meta)
                if "stats" in meta:
                    corpus_total = (
                        meta["stats"] if corpus_total is None else [a + b for a, b in zip(corpus_total, meta["stats"])]
                    )
            ms.add(s)
            rows[key].append(s.model_dump(mode="json"))
        summ = summarize(ms)
        agg = spec.get("aggregation", "mean")
        if agg == "corpus":
            summ.update(
                mean=spec["finalize"](corpus_total) if corpus_total else None,
                stderr=None,
                ci_low=None,
                ci_high=None,
                ci_method=None,
            )
        identity = {"name": mname, "class": spec.get("cls", f"fixtures:{mname}"), "version": spec.get("version", "1"),
                    "direction": direction, "params": spec.get("params", {})}
        if spec.get("no_identity"):
            identity = {}
        summaries[mname] = MetricSummary(name=mname, direction=direction, aggregation=agg, identity=identity, **summ)
    samples_dir = run_dir / "samples"
    if samples:
        samples_dir.mkdir(exist_ok=True)
        per = max(1, math.ceil(len(keys) / shards))
        for sh in range(shards):
            part = keys[sh * per:(sh + 1) * per]
            if not part and sh:
                continue
            n = len(part)
            table = pa.table({
                "shard": pa.array([sh] * n, pa.int32()),
                "index": pa.array(range(n), pa.int32()),
                "sample_id": pa.array([k[0] for k in part], pa.string()),
                "repeat": pa.array([k[1] for k in part], pa.int32()),
                "prompt": pa.array([f"q {k[0]}" for k in part], pa.string()),
                "target": pa.array([json.dumps("t")] * n, pa.string()),
                "text": pa.array(["x"] * n, pa.string()),
                "raw_text": pa.array(["x"] * n, pa.string()),
                "error": pa.array([None] * n, pa.string()),
                "scores": pa.array([json.dumps(rows[k]) for k in part], pa.string()),
            })
            if duplicate and sh == 0:  # the first rows stored again, with other scores: the first copy counts
                extra = table.slice(0, duplicate)
                flipped = [json.dumps([{**sc, "value": 1.0 - sc["value"]} if sc.get("value") is not None else sc
                                       for sc in json.loads(b)]) for b in extra.column("scores").to_pylist()]
                extra = extra.set_column(extra.schema.get_field_index("scores"), "scores", pa.array(flipped))
                table = pa.concat_tables([table, extra])
            if typed:  # the typed score columns the scoring stage writes beside the JSON
                from auditkit_ray.store.columns import mark_typed, score_columns

                cols = score_columns([json.loads(b) for b in table.column("scores").to_pylist()])
                for column, values in cols.items():
                    table = table.append_column(column, values)
                table = mark_typed(table)
            pq.write_table(table, samples_dir / f"shard-{sh:05d}.parquet")
    result = RunResult(
        run_id=run_id or (name.encode().hex() + "0" * 16)[:16],
        name=name,
        fingerprint=(name.encode().hex() + "f" * 64)[:64],
        dataset_fingerprint=dataset,
        metrics=summaries,
        perf=Perf(**(perf or {})),
        tokens=TokenUsage(**(tokens or {})),
        samples_path=str(samples_dir) if samples else None,
    )
    return result.save(run_dir / "result.json")


@pytest.fixture(scope="session")
def make_run():
    return build_run
