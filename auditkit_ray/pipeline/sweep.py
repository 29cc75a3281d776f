"""Sweeps: expand a grid into runs, group runs by model cell (one model load
per (checkpoint, quantization) cell), and schedule cells on the cluster's
GPUs: cells that fit run at the same time on disjoint GPUs, the rest wait;
Ray Data releases each cell's actors when its pipeline ends.

A sweep manifest in the result store records each run's state; a sweep
started again redoes only unfinished shards.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from ..config.models import RunSpec, SweepSpec
from ..core.fingerprint import fingerprint
from ..core.result import RunResult
from ..errors import AuditKitError, RunError
from .driver import model_key, run_pipeline, stored_or_finish
from .plan import Plan, build_plans
from .runtime import init_ray


@dataclass
class Cell:
    key: str
    plans: list[Plan]
    gpus: float = 0.0
    started: float | None = None
    ended: float | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        m = self.plans[0].spec.model
        quantization = getattr(m, "quantization", None)
        return f"{m.type}:{getattr(m, 'path', '') or ''}" + (f" q={quantization}" if quantization else "")


@dataclass
class SweepResult:
    name: str
    fingerprint: str
    runs: list[RunResult] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)
    manifest_uri: str | None = None


def gpus_for(spec: RunSpec, cluster_gpus: float) -> float:
    if cluster_gpus <= 0 or not spec.model.needs_gpu():
        return 0.0
    return float(getattr(spec.model, "num_gpus", 1.0)) * spec.execution.generation_actors


def plan_sweep(sweep: SweepSpec, source: str = "<sweep>", lines: Any = None, *, in_tasks: bool = False,
               address: str | None = None) -> tuple[str, list[Cell]]:
    """The sweep's cells; ``in_tasks``: plan large datasets in Ray tasks (``build_plan``), starting Ray.
    Runs over one dataset (a grid over checkpoints) read it once (``build_plans``)."""
    from ..config.sweep import expand

    runs = expand(sweep, source=source, lines=lines)
    plans = build_plans(runs, in_tasks=in_tasks, address=address)
    sweep_fp = fingerprint({"sweep": sweep.name, "runs": [p.layout.run_fp for p in plans]})
    cells: dict[str, Cell] = {}
    for p in plans:
        cells.setdefault(model_key(p.spec), Cell(key=model_key(p.spec), plans=[])).plans.append(p)
    return sweep_fp, list(cells.values())


def describe(name: str, sweep_fp: str, cells: list[Cell], cluster_gpus: float | None) -> str:
    n_runs = sum(len(c.plans) for c in cells)
    lines = [f"sweep {name}  fingerprint {sweep_fp[:12]}  {n_runs} runs in {len(cells)} model cells"
             + (f"  cluster GPUs {cluster_gpus:g}" if cluster_gpus is not None else "")]
    for c in cells:
        g = gpus_for(c.plans[0].spec, cluster_gpus if cluster_gpus is not None else 1.0)
        lines.append(f"  cell {c.label}  GPUs {g:g}")
        for p in c.plans:
            state = "done" if not p.pending else ("resume" if p.done else "todo")
            lines.append(f"    {p.spec.name:<50} {p.layout.run_fp[:12]}  shards {len(p.done)}/{p.n_shards} {state}")
    return "\n".join(lines)


def _write_manifest(store: Any, sweep_fp: str, name: str, cells: list[Cell], states: dict[str, str],
                    results: dict[str, RunResult]) -> str:
    doc = {
        "name": name,
        "fingerprint": sweep_fp,
        "updated_at": time.time(),
        "runs": [
            {"name": p.spec.name, "fingerprint": p.layout.run_fp, "cell": c.label,
             "state": states.get(p.layout.run_fp, "pending"),
             "result": p.store.uri(p.layout.result) if p.layout.run_fp in results else None}
            for c in cells for p in c.plans
        ],
    }
    rel = f"sweeps/{sweep_fp}/manifest.json"
    store.replace(rel, json.dumps(doc, indent=2).encode())
    return store.uri(rel)


def run_sweep(sweep: SweepSpec, *, address: str | None = None, progress: bool = True,
              source: str = "<sweep>") -> SweepResult:
    sweep_fp, cells = plan_sweep(sweep, source, in_tasks=True, address=address)
    lead = cells[0].plans[0].spec
    store = cells[0].plans[0].store
    ray = init_ray(address, lead.execution)
    total_gpus = float(ray.cluster_resources().get("GPU", 0))
    for c in cells:
        c.gpus = gpus_for(c.plans[0].spec, total_gpus)
        if c.gpus > total_gpus:
            raise RunError(f"sweep {sweep.name!r}: cell {c.label} needs {c.gpus:g} GPUs, the cluster has "
                           f"{total_gpus:g}; "
                           "lower execution.generation_actors or model.num_gpus")
    states: dict[str, str] = {}
    results: dict[str, RunResult] = {}
    lock = threading.Lock()
    manifest = _write_manifest(store, sweep_fp, sweep.name, cells, states, results)

    parent = None
    t = lead.tracking
    if t.mlflow_uri:
        from ..integrations.mlflow import start_parent

        parent = start_parent(t.mlflow_uri, t.mlflow_experiment, sweep.name, {"auditkit.sweep_fingerprint": sweep_fp},
                              artifact_location=t.mlflow_artifact_location)

    def run_cell(cell: Cell) -> None:
        cell.started = time.time()
        t0 = time.perf_counter()
        with lock:
            states.update({p.layout.run_fp: "running" for p in cell.plans})
            _write_manifest(store, sweep_fp, sweep.name, cells, states, results)
        try:
            stats = run_pipeline(cell.plans, address, progress)
            wall = time.perf_counter() - t0
            for p in cell.plans:
                r = stored_or_finish(p, stats[p.layout.run_fp], wall, parent_run_id=parent)
                with lock:
                    results[p.layout.run_fp] = r
                    states[p.layout.run_fp] = "complete"
        except Exception as exc:
            cell.error = str(exc)
            with lock:
                states.update({p.layout.run_fp: "failed" for p in cell.plans if p.layout.run_fp not in results})
            raise
        finally:
            cell.ended = time.time()
            with lock:
                _write_manifest(store, sweep_fp, sweep.name, cells, states, results)

    queue = list(cells)
    running: dict[Future, Cell] = {}
    failures: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=max(1, len(cells))) as pool:
        while queue or running:
            used = sum(c.gpus for c in running.values())
            cpu_cell_running = any(c.gpus == 0 for c in running.values())
            for cell in list(queue):
                if failures:
                    break
                fits = cell.gpus > 0 and used + cell.gpus <= total_gpus
                if fits or (cell.gpus == 0 and not cpu_cell_running and not running):
                    queue.remove(cell)
                    running[pool.submit(run_cell, cell)] = cell
                    used += cell.gpus
                    cpu_cell_running = cpu_cell_running or cell.gpus == 0
                elif cell.gpus > 0:
                    break  # keep the order: wait for GPUs rather than jump the queue
            if failures and not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for f in done:
                running.pop(f)
                if f.exception() is not None:
                    failures.append(f.exception())  # type: ignore[arg-type]
    if parent and t.mlflow_uri:
        from ..integrations.mlflow import end_run

        end_run(t.mlflow_uri, parent, "FAILED" if failures else "FINISHED")
    if failures:
        err = failures[0]
        if isinstance(err, AuditKitError):
            raise err
        raise RunError(f"sweep {sweep.name!r}: {err}")
    ordered = [results[p.layout.run_fp] for c in cells for p in c.plans]
    out = SweepResult(name=sweep.name, fingerprint=sweep_fp, runs=ordered, manifest_uri=manifest,
                      cells=[{"cell": c.label, "gpus": c.gpus, "runs": [p.spec.name for p in c.plans],
                              "started": c.started, "ended": c.ended} for c in cells])
    store.replace(f"sweeps/{sweep_fp}/sweep.json", json.dumps({
        "name": sweep.name, "fingerprint": sweep_fp, "cells": out.cells,
        "runs": [{"name": r.name, "fingerprint": r.fingerprint} for r in ordered],
    }, indent=2).encode())
    return out
