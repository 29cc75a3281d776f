"""MLflow mirror: each run becomes an MLflow run (a sweep a parent run with
child runs): params from the redacted config, metrics with their intervals,
fingerprint and package version as tags, results JSON and per-sample Parquet
as artifacts. The result store stays the source of truth."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ..core.result import RunResult
from ..errors import require

_BAD = re.compile(r"[^\w\-. /]")


def _key(name: str) -> str:
    # MLflow keys allow letters, digits, _ - . space /; '@' (metric on an annotation) becomes '.on.'
    return _BAD.sub("_", name.replace("@", ".on."))


def _flatten(obj: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    elif isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
        for i, v in enumerate(obj):
            out.update(_flatten(v, f"{prefix}{i}."))
    else:
        text = json.dumps(obj) if not isinstance(obj, str) else obj
        out[_key(prefix.rstrip("."))] = text[:500]
    return out


def _client(uri: str):
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    mlflow = require("mlflow", "mlflow")
    from mlflow.tracking import MlflowClient

    return mlflow, MlflowClient(tracking_uri=uri)


def _experiment_id(client: Any, name: str, artifact_location: str | None = None) -> str:
    exp = client.get_experiment_by_name(name)
    return exp.experiment_id if exp else client.create_experiment(name, artifact_location=artifact_location)


def start_parent(uri: str, experiment: str, name: str, tags: dict[str, str] | None = None,
                 artifact_location: str | None = None) -> str:
    _, client = _client(uri)
    run = client.create_run(_experiment_id(client, experiment, artifact_location), run_name=name,
                            tags={"auditkit.kind": "sweep", **(tags or {})})
    return run.info.run_id


def end_run(uri: str, run_id: str, status: str = "FINISHED") -> None:
    _, client = _client(uri)
    client.set_terminated(run_id, status=status)


def mirror_failed(uri: str, experiment: str, name: str, reason: str, fingerprint: str | None = None,
                  parent_run_id: str | None = None, artifact_location: str | None = None) -> str:
    """A run that failed (a sweep cell): a run marked FAILED, the reason in the tag ``auditkit.failure``, a
    child of the sweep's run. Returns its run id."""
    _, client = _client(uri)
    tags = {"auditkit.failure": reason[:5000], "auditkit.kind": "run"}
    if fingerprint:
        tags["auditkit.fingerprint"] = fingerprint
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    run = client.create_run(_experiment_id(client, experiment, artifact_location), run_name=name, tags=tags)
    client.set_terminated(run.info.run_id, status="FAILED")
    return run.info.run_id


def mirror_run(result: RunResult, uri: str, experiment: str, samples_table: Any = None,
               parent_run_id: str | None = None,
               artifact_location: str | None = None) -> str:
    """Mirror one run; its per-sample table (read from the result store
    unless ``samples_table`` is given) becomes an artifact. Returns the MLflow run id."""
    from mlflow.entities import Metric as MLMetric
    from mlflow.entities import Param, RunTag

    if samples_table is None and result.samples_path:
        from ..store.samples import read_samples_table

        samples_table = read_samples_table(result)

    _, client = _client(uri)
    tags = {
        "auditkit.fingerprint": result.fingerprint,
        "auditkit.generation_fingerprint": result.generation_fingerprint or "",
        "auditkit.dataset_fingerprint": result.dataset_fingerprint or "",
        "auditkit.package_version": result.package_version,
        "auditkit.run_id": result.run_id,
    }
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    run = client.create_run(_experiment_id(client, experiment, artifact_location), run_name=result.name, tags=tags)
    rid = run.info.run_id
    params = [Param(k, v) for k, v in sorted(_flatten(result.config).items())]
    metrics = []
    for name, m in result.metrics.items():
        base = _key(name)
        for suffix, value in (("", m.mean), (".ci_low", m.ci_low), (".ci_high", m.ci_high), (".n", m.n),
                              (".unscored", m.unscored)):
            if value is not None:
                metrics.append(MLMetric(base + suffix, float(value), 0, 0))
    for name, value in (("perf.wall_s", result.perf.wall_s),
                        ("perf.throughput_samples_per_s", result.perf.throughput_samples_per_s),
                        ("perf.latency_p50_s", result.perf.latency_p50_s),
                        ("tokens.completion", result.tokens.completion)):
        if value is not None:
            metrics.append(MLMetric(name, float(value), 0, 0))
    for i in range(0, len(params), 100):
        client.log_batch(rid, params=params[i : i + 100])
    for i in range(0, len(metrics), 500):
        client.log_batch(rid, metrics=metrics[i : i + 500])
    client.log_batch(rid, tags=[RunTag(k, v) for k, v in tags.items() if k != "mlflow.parentRunId"])
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "result.json"
        p.write_text(result.to_json(), encoding="utf-8")
        client.log_artifact(rid, str(p))
        if samples_table is not None:
            import pyarrow.parquet as pq

            sp = Path(d) / "samples.parquet"
            pq.write_table(samples_table, sp)
            client.log_artifact(rid, str(sp))
    client.set_terminated(rid)
    return rid
