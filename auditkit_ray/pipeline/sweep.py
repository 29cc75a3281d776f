"""Sweeps: expand a grid into runs, group runs by model cell (one model load
per (checkpoint, quantization) cell), and schedule cells on the cluster's
GPUs: cells that fit run at the same time on disjoint GPUs, the rest wait;
Ray Data releases each cell's actors when its pipeline ends.

Failure policy: a cell that fails does not stop the others (``fail_fast``:
no cell starts after the first failure; those left are ``skipped``, each
named with why). A cell whose checkpoint cannot be found or pinned (a missing
directory, an unresolvable Hub id or ``s3://`` prefix: ``ModelSourceError``)
fails before it starts, as a corrupt one fails when it loads. A failed attempt whose cause a retry can help
(an actor or node lost, an engine that died: ``errors.InfrastructureError``)
starts again, up to ``execution.cell_retries`` times; a configuration error, a
model that cannot load (``ModelLoadError``, ``execution.load_timeout_s``) and a
cell past its wall budget (``execution.max_cell_s``) are not retried. Shards a
cell finished stay in the store, so a sweep started again redoes only failed
and unfinished cells.

Scheduling (``execution.cell_order``): ``pack`` starts the waiting cell that
needs most GPUs first and backfills smaller cells into free GPUs, passing a
waiting cell over at most ``2 x cluster GPUs`` times before the GPUs are held
for it; ``fifo`` keeps the file's order and waits.

The sweep manifest (``sweeps/<fingerprint>/manifest.json`` in the result
store, rewritten at every change of state) is the contract the reports render
from::

    name, fingerprint, updated_at, state ("running" | "complete" | "failed"),
    cluster_gpus, gpu_occupancy (busy GPU-seconds / (cluster GPUs x wall), null until the end),
    decision (the sweep's decision rule, ``config.models.DecisionSpec``, or null; sweep.json holds it too),
    runs: [{name, fingerprint, cell, state ("pending" | "running" | "complete" | "failed" | "skipped"),
            result (URI|null), reason (null unless failed or skipped)}],
    cells: [{name, state ("queued" | "loading" | "running" | "done" | "failed" | "skipped"), reason (one line,
             null unless failed or skipped), attempts, gpus, runs (run names), fingerprints (run fingerprints),
             shards_done, shards_total, started, ended (epoch seconds|null)}]

The same cell entries are ``SweepResult.cells`` (plus ``cell``, the label,
for older readers). Events (``on_event``, ``events`` as JSON lines), each with
``event``, ``t`` (epoch seconds) and ``sweep``: ``sweep_started`` (cells: their
names, cluster_gpus), ``cell_started`` (cell,
attempt, gpus, shards_total, shards_done), ``shard_done`` (cell, run, shard,
n, shards_done, shards_total; samples and elapsed_s: the samples the cell finished in this invocation and
the seconds since its generation began, samples_per_s and cell_eta_s: its rate and time left, all
``progress.ShardRate``'s; eta_s: the sweep's, ``_Sweep.eta_s``), ``cell_done`` / ``cell_failed`` (cell,
attempts, reason, retry: whether it starts again), ``cell_skipped`` (cell, reason:
``fail_fast`` started it not), ``sweep_done`` (cells, done, failed, skipped,
gpu_occupancy, wall_s). A cell retried emits ``cell_failed`` with
``retry: true`` and then a new ``cell_started``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config.models import RunSpec, SweepSpec
from ..core.fingerprint import fingerprint
from ..core.result import RunResult
from ..errors import AuditKitError, InfrastructureError, Interrupted, RunError
from .driver import model_key, run_pipeline, stored_or_finish
from .plan import Plan, build_plans, mark_interrupted, model_problem, unplanned
from .progress import ShardRate
from .runtime import init_ray, warn_on_failure

log = logging.getLogger(__name__)
#: one line per change of a cell's state (``progress=True``)
progress_log = logging.getLogger(__name__ + ".progress")


@dataclass
class Cell:
    key: str
    plans: list[Plan]
    gpus: float = 0.0
    started: float | None = None
    ended: float | None = None
    error: str | None = None
    name: str = ""
    state: str = "queued"
    attempts: int = 0
    shards_done: int = 0
    shards_total: int = 0
    bypassed: int = 0
    #: the running attempt's pipeline (``ray_compat.PipelineHandle``), to stop it
    handle: Any = None
    #: the running attempt's rate and time left (its shards so far)
    rate: ShardRate | None = None

    @property
    def samples_per_shard(self) -> float:
        return sum(p.n_requests for p in self.plans) / max(1, sum(p.n_shards for p in self.plans))

    @property
    def label(self) -> str:
        m = self.plans[0].spec.model
        quantization = getattr(m, "quantization", None)
        return f"{m.type}:{getattr(m, 'path', '') or ''}" + (f" q={quantization}" if quantization else "")

    def entry(self) -> dict[str, Any]:
        """The cell in the manifest, ``SweepResult.cells`` and ``--json``."""
        return {"name": self.name, "cell": self.label, "state": self.state, "reason": self.error,
                "attempts": self.attempts, "gpus": self.gpus, "runs": [p.spec.name for p in self.plans],
                "fingerprints": [p.layout.run_fp for p in self.plans], "shards_done": self.shards_done,
                "shards_total": self.shards_total, "started": self.started, "ended": self.ended}


@dataclass
class SweepResult:
    name: str
    fingerprint: str
    runs: list[RunResult] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)
    manifest_uri: str | None = None
    gpu_occupancy: float | None = None
    wall_s: float = 0.0
    #: the decision rule the sweep ran with (``DecisionSpec`` as a mapping), or None
    decision: dict[str, Any] | None = None

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The cells that failed (name, reason, attempts, runs...)."""
        return [c for c in self.cells if c["state"] == "failed"]

    @property
    def skipped(self) -> list[dict[str, Any]]:
        """The cells ``fail_fast`` did not start after a failure (name, reason...)."""
        return [c for c in self.cells if c["state"] == "skipped"]

    @property
    def ok(self) -> bool:
        return not self.failed and not self.skipped


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
    pins: dict[tuple, str] = {}
    checked = [model_problem(r, pins) for r in runs]  # a checkpoint not found fails its cell, not the sweep
    good = iter(build_plans([s for s, why in checked if why is None], in_tasks=in_tasks, address=address, pins=pins))
    plans = [(next(good), None) if why is None else (unplanned(s), why) for s, why in checked]
    sweep_fp = fingerprint({"sweep": sweep.name, "runs": [p.layout.run_fp for p, _ in plans]})
    cells: dict[str, Cell] = {}
    for p, why in plans:
        key = model_key(p.spec) + ("\0unplanned" if why else "")
        cell = cells.setdefault(key, Cell(key=key, plans=[]))
        cell.plans.append(p)
        if why is not None:
            cell.state, cell.error = "failed", why
    out = list(cells.values())
    labels = [c.label for c in out]
    for i, c in enumerate(out):
        if len(c.plans) == 1:  # the run's own name, as the leaderboard and the reports name it
            c.name = c.plans[0].spec.name
        elif labels.count(c.label) == 1:  # a model's several runs (datasets, metrics): the model
            c.name = c.label
        else:
            c.name = f"{c.label} #{labels[:i].count(c.label) + 1}"
        c.shards_total = sum(p.n_shards for p in c.plans)
        c.shards_done = sum(len(p.done) for p in c.plans)
    return sweep_fp, out


def describe(name: str, sweep_fp: str, cells: list[Cell], cluster_gpus: float | None) -> str:
    n_runs = sum(len(c.plans) for c in cells)
    lines = [f"sweep {name}  fingerprint {sweep_fp[:12]}  {n_runs} runs in {len(cells)} model cells"
             + (f"  cluster GPUs {cluster_gpus:g}" if cluster_gpus is not None else "")]
    for c in cells:
        g = gpus_for(c.plans[0].spec, cluster_gpus if cluster_gpus is not None else 1.0)
        lines.append(f"  cell {c.name}" + (f" ({c.label})" if c.name != c.label else "") + f"  GPUs {g:g}")
        if c.state == "failed":  # its checkpoint was not found: it will fail without starting
            lines += [f"    {p.spec.name:<50} FAILS: {c.error}" for p in c.plans]
            continue
        for p in c.plans:
            state = "done" if not p.pending else ("resume" if p.done else "todo")
            lines.append(f"    {p.spec.name:<50} {p.layout.run_fp[:12]}  shards {len(p.done)}/{p.n_shards} {state}")
    return "\n".join(lines)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def occupancy(cells: list[Cell], cluster_gpus: float) -> float | None:
    """Busy GPU-seconds over the GPUs the cluster had for the sweep's wall time (cells that ran)."""
    ran = [c for c in cells if c.started is not None and c.ended is not None]
    if not ran or cluster_gpus <= 0:
        return None
    wall = max(c.ended for c in ran) - min(c.started for c in ran)  # type: ignore[type-var, operator]
    busy = sum(c.gpus * (c.ended - c.started) for c in ran)  # type: ignore[operator]
    return round(busy / (cluster_gpus * wall), 4) if wall > 0 else None


class _Sweep:
    """The state of one running sweep: its cells, results, manifest and events."""

    def __init__(self, sweep: SweepSpec, sweep_fp: str, cells: list[Cell], cluster_gpus: float,
                 on_event: Callable[[dict[str, Any]], None] | None, events: str | None, progress: bool) -> None:
        self.sweep, self.fp, self.cells, self.cluster_gpus = sweep, sweep_fp, cells, cluster_gpus
        self.store = cells[0].plans[0].store
        self.lock = threading.RLock()
        self.results: dict[str, RunResult] = {}
        self.run_states: dict[str, str] = {}
        self.run_reasons: dict[str, str] = {}
        self.on_event, self.progress = on_event, progress
        self.events = open(events, "a", encoding="utf-8") if events else None  # noqa: SIM115 - closed in close()
        self.t0 = time.time()
        self.state = "running"
        self.occupancy: float | None = None
        self.manifest = self.write_manifest()

    def close(self) -> None:
        if self.events is not None:
            self.events.close()
            self.events = None

    def eta_s(self) -> float | None:
        """The sweep's time left, from what its cells measured in this invocation (None before the first shard
        is done): a generating cell's own ETA (``ShardRate``); a cell still loading or queued takes the
        measured cells' mean start-up (cell start to generation) and their mean samples per second. Cells
        running side by side overlap; the queued ones share the slots the running ones hold."""
        measured = [c.rate for c in self.cells if c.rate is not None and c.rate.samples_per_s]
        if not measured:
            return None
        rate = sum(r.samples_per_s or 0.0 for r in measured) / len(measured)
        startup = sum((r.began or r.created) - r.created for r in measured) / len(measured)

        def estimate(c: Cell) -> float:
            if c.rate is not None and c.rate.samples_per_s:
                return c.rate.eta_s() or 0.0
            loading = c.rate.clock() - c.rate.created if c.rate is not None else 0.0
            return max(0.0, startup - loading) + (c.shards_total - c.shards_done) * c.samples_per_shard / rate

        running = [c for c in self.cells if c.state in ("loading", "running")]
        queued = [c for c in self.cells if c.state == "queued"]
        now = max((estimate(c) for c in running), default=0.0)
        return round(now + sum(estimate(c) for c in queued) / max(1, len(running)), 1)

    def emit(self, event: str, **fields: Any) -> None:
        doc = {"event": event, "t": round(time.time(), 3), "sweep": self.sweep.name, **fields}
        with self.lock:
            if self.events is not None:
                self.events.write(json.dumps(doc, default=str) + "\n")
                self.events.flush()
            if self.on_event is not None:
                try:
                    self.on_event(doc)
                except Exception as exc:  # noqa: BLE001 - a listener's bug must not fail the night
                    log.warning("sweep event listener failed: %s: %s", type(exc).__name__, exc)
        if self.progress and self.on_event is None and event != "shard_done":
            progress_log.info("%s", status_line(doc))

    def write_manifest(self) -> str:
        with self.lock:
            doc = {
                "name": self.sweep.name, "fingerprint": self.fp, "updated_at": time.time(), "state": self.state,
                "cluster_gpus": self.cluster_gpus, "gpu_occupancy": self.occupancy, "decision": _rule(self.sweep),
                "runs": [
                    {"name": p.spec.name, "fingerprint": p.layout.run_fp, "cell": c.name,
                     "state": self.run_states.get(p.layout.run_fp, "pending"),
                     "result": p.store.uri(p.layout.result) if p.layout.run_fp in self.results else None,
                     "reason": self.run_reasons.get(p.layout.run_fp)}
                    for c in self.cells for p in c.plans
                ],
                "cells": [c.entry() for c in self.cells],
            }
            rel = f"sweeps/{self.fp}/manifest.json"
            self.store.replace(rel, json.dumps(doc, indent=2).encode())
            return self.store.uri(rel)


def status_line(event: dict[str, Any]) -> str:
    """A plain line for one sweep event (what ``progress=True`` logs)."""
    e, cell = event["event"], event.get("cell", "")
    if e == "cell_started":
        return f"[{cell}] {cell_start_status(event)} (attempt {event['attempt']}, {event['gpus']:g} GPUs)"
    if e == "shard_done":
        eta = f", sweep ETA {event['eta_s']:.0f}s" if event.get("eta_s") else ""
        return f"[{cell}] {shard_status(event)}{eta}"
    if e == "cell_done":
        return f"[{cell}] done"
    if e == "cell_failed":
        return f"[{cell}] failed: {event['reason']}" + (" (retrying)" if event.get("retry") else "")
    if e == "cell_skipped":
        return f"[{cell}] skipped: {event['reason']}"
    if e == "sweep_started":
        return f"sweep {event['sweep']}: {len(event['cells'])} cells queued on {event['cluster_gpus']:g} GPUs"
    if e == "sweep_done":
        occ = f", GPU occupancy {event['gpu_occupancy']:.0%}" if event.get("gpu_occupancy") is not None else ""
        return f"sweep {event['sweep']}: {event['done']} cells done, {event['failed']} failed{occ}"
    return json.dumps(event)


def cell_start_status(event: dict[str, Any]) -> str:
    """A ``cell_started`` event as its cell's status: ``loading``, or what the store already holds of it
    (``resuming: 3 of 12 shards stored, loading``; ``stored: 12 of 12 shards, nothing to run``)."""
    done, total = event.get("shards_done") or 0, event.get("shards_total") or 0
    if total and done >= total:
        return f"stored: {done} of {total} shards, nothing to run"
    if done:
        return f"resuming: {done} of {total} shards stored, loading"
    return "loading"


def shard_status(event: dict[str, Any]) -> str:
    """A ``shard_done`` event as its cell's status: ``running 3 of 12 shards, 8.0 samples/s, ETA 9s`` (the
    figures once the cell has finished a shard in this invocation, ``progress.ShardRate``; shards whose stored
    outputs were scored again say so, and give no rate)."""
    text = f"running {event['shards_done']} of {event['shards_total']} shards"
    if event.get("rescored"):
        text += f", {event['rescored']} stored outputs re-scored" + ("" if event.get("samples") else
                                                                     ", nothing generated")
    if event.get("samples_per_s"):
        text += f", {event['samples_per_s']:.1f} samples/s"
    if event.get("cell_eta_s"):
        text += f", ETA {event['cell_eta_s']:.0f}s"
    return text


def _record_failure(plan: Plan, reason: str, parent: str | None) -> None:
    """A run that failed, in the ExperimentDB (state ``failed``) and MLflow (a child run marked FAILED)."""
    t = plan.spec.tracking
    if t.index:
        from ..store.db import ExperimentDB

        warn_on_failure("ExperimentDB", lambda: ExperimentDB(t.db).record_failed(
            plan.layout.run_fp, plan.spec.name, reason, config=plan.spec.model_dump(mode="json", by_alias=True),
            store_uri=plan.store.uri()))
    if t.mlflow_uri:
        from ..integrations.mlflow import mirror_failed

        warn_on_failure("MLflow", lambda: mirror_failed(t.mlflow_uri, t.mlflow_experiment, plan.spec.name, reason,
                                                        fingerprint=plan.layout.run_fp, parent_run_id=parent,
                                                        artifact_location=t.mlflow_artifact_location))


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, InfrastructureError)


def _pick(queue: list[Cell], used: float, total: float, running: dict[Future, Cell], pack: bool) -> list[Cell]:
    """The cells to start now, in order (``execution.cell_order``)."""
    start: list[Cell] = []
    cpu_cell_running = any(c.gpus == 0 for c in running.values())
    n_running = len(running)
    limit = max(1, int(2 * total))
    head: Cell | None = None  # the first waiting GPU cell that did not fit
    for cell in queue:
        if cell.gpus == 0:
            if not cpu_cell_running and not n_running and not start:
                start.append(cell)
                cpu_cell_running = True
            continue
        if used + cell.gpus <= total:
            if head is not None:
                if head.bypassed >= limit:
                    break  # hold the free GPUs for the cell that waited longest
                head.bypassed += 1
            start.append(cell)
            used += cell.gpus
            n_running += 1
        elif not pack:
            break  # keep the order: wait for GPUs rather than jump the queue
        elif head is None:
            head = cell
    return start


def run_sweep(sweep: SweepSpec, *, address: str | None = None, progress: bool = True,
              source: str = "<sweep>", fail_fast: bool = False, events: str | None = None,
              on_event: Callable[[dict[str, Any]], None] | None = None) -> SweepResult:
    """Run every cell of the sweep (see the module's docstring for the failure policy, the manifest and events).
    ``fail_fast``: start no new cell after the first failure and raise it. ``progress``: log a line per change
    of a cell's state (when no ``on_event`` listener takes them)."""
    sweep_fp, cells = plan_sweep(sweep, source, in_tasks=True, address=address)
    lead = cells[0].plans[0].spec
    ray = init_ray(address, lead.execution)
    total_gpus = float(ray.cluster_resources().get("GPU", 0))
    for c in cells:
        c.gpus = gpus_for(c.plans[0].spec, total_gpus)
        if c.gpus > total_gpus:
            raise RunError(f"sweep {sweep.name!r}: cell {c.name} needs {c.gpus:g} GPUs, the cluster has "
                           f"{total_gpus:g}; "
                           "lower execution.generation_actors or model.num_gpus")
    sw = _Sweep(sweep, sweep_fp, cells, total_gpus, on_event, events, progress)
    parent = None
    t = lead.tracking
    if t.mlflow_uri:
        from ..integrations.mlflow import start_parent

        parent = start_parent(t.mlflow_uri, t.mlflow_experiment, sweep.name, {"auditkit.sweep_fingerprint": sweep_fp},
                              artifact_location=t.mlflow_artifact_location)
    sw.emit("sweep_started", cells=[c.name for c in cells], cluster_gpus=total_gpus)
    try:
        _schedule(sw, address, parent, fail_fast)
    finally:
        sw.occupancy = occupancy(cells, total_gpus)
        failed = [c for c in cells if c.state == "failed"]
        sw.state = ("interrupted" if any(c.state == "interrupted" for c in cells) else
                    "failed" if failed or any(c.state != "done" for c in cells) else "complete")
        sw.write_manifest()
        sw.emit("sweep_done", cells=len(cells), done=sum(c.state == "done" for c in cells), failed=len(failed),
                skipped=sum(c.state == "skipped" for c in cells), gpu_occupancy=sw.occupancy,
                wall_s=round(time.time() - sw.t0, 3))
        sw.close()
        if parent and t.mlflow_uri:
            from ..integrations.mlflow import end_run

            end_run(t.mlflow_uri, parent, "FAILED" if sw.state == "failed" else "FINISHED")
    ordered = [sw.results[p.layout.run_fp] for c in cells for p in c.plans if p.layout.run_fp in sw.results]
    out = SweepResult(name=sweep.name, fingerprint=sweep_fp, runs=ordered, manifest_uri=sw.manifest,
                      cells=[c.entry() for c in cells], gpu_occupancy=sw.occupancy, wall_s=time.time() - sw.t0,
                      decision=_rule(sweep))
    sw.store.replace(f"sweeps/{sweep_fp}/sweep.json", json.dumps({
        "name": sweep.name, "fingerprint": sweep_fp, "cells": out.cells, "gpu_occupancy": out.gpu_occupancy,
        "decision": out.decision, "runs": [{"name": r.name, "fingerprint": r.fingerprint} for r in ordered],
    }, indent=2).encode())
    return out


def _rule(sweep: SweepSpec) -> dict[str, Any] | None:
    """The sweep's decision rule as stored with it (it reads results; it is in no fingerprint)."""
    return sweep.decision.model_dump(mode="json") if sweep.decision is not None else None


def _run_cell(sw: _Sweep, cell: Cell, address: str | None, parent: str | None) -> None:
    """One attempt of a cell; raises what failed it."""
    spec = cell.plans[0].spec
    cell.attempts += 1
    if cell.attempts > 1:  # the shards the last attempt finished are in the store now: plan what is left
        cell.plans = build_plans([p.spec for p in cell.plans])
        cell.shards_done = sum(len(p.done) for p in cell.plans)
    t0 = time.perf_counter()
    rate = ShardRate(cell.shards_total, cell.shards_done)
    with sw.lock:
        cell.rate = rate
        cell.started, cell.ended, cell.state, cell.error = time.time(), None, "loading", None
        sw.run_states.update({p.layout.run_fp: "running" for p in cell.plans})
        sw.write_manifest()
    sw.emit("cell_started", cell=cell.name, attempt=cell.attempts, gpus=cell.gpus, shards_total=cell.shards_total,
            shards_done=cell.shards_done)
    timer: threading.Timer | None = None

    def started(handle: Any) -> None:
        nonlocal timer
        cell.handle = handle
        budget = spec.execution.max_cell_s
        if budget:
            left = max(0.0, budget - (time.perf_counter() - t0))
            timer = threading.Timer(left, handle.abort, args=(RunError(
                f"cell exceeded execution.max_cell_s={budget:g}s; its finished shards are kept"),))
            timer.daemon = True
            timer.start()

    def shard_done(out: Any) -> None:
        with sw.lock:
            cell.shards_done += 1
            rate.add(out.n, out.generation_s, out.generated and not spec.model.replays_generations())
            if cell.state == "loading":
                cell.state = "running"
                sw.write_manifest()
        run = next((p.spec.name for p in cell.plans if p.layout.run_fp == out.run), out.run)
        per_s, left, elapsed = rate.samples_per_s, rate.eta_s(), rate.elapsed_s
        sw.emit("shard_done", cell=cell.name, run=run, shard=out.shard, n=out.n, shards_done=cell.shards_done,
                shards_total=cell.shards_total, samples=rate.samples, rescored=rate.rescored,
                elapsed_s=round(elapsed, 3) if elapsed is not None else None,
                samples_per_s=round(per_s, 2) if per_s else None,
                cell_eta_s=round(left, 1) if left is not None else None, eta_s=sw.eta_s())

    restarts = spec.execution.max_shard_retries + 1 if not spec.execution.shard_timeout_s else None
    try:
        stats = run_pipeline(cell.plans, address, False, actor_restarts=restarts, on_shard=shard_done,
                             on_start=started)
    finally:
        if timer is not None:
            timer.cancel()
    wall = time.perf_counter() - t0
    for p in cell.plans:
        r = stored_or_finish(p, stats[p.layout.run_fp], wall, parent_run_id=parent)
        with sw.lock:
            sw.results[p.layout.run_fp] = r
            sw.run_states[p.layout.run_fp] = "complete"


def _failed_unplanned(sw: _Sweep, cell: Cell, parent: str | None) -> None:
    """A cell whose checkpoint was not found when the sweep was planned: failed before it starts."""
    cell.started = cell.ended = time.time()
    with sw.lock:
        for p in cell.plans:
            sw.run_states[p.layout.run_fp] = "failed"
            sw.run_reasons[p.layout.run_fp] = str(cell.error)
        sw.write_manifest()
    sw.emit("cell_failed", cell=cell.name, attempts=cell.attempts, reason=cell.error, retry=False)
    for p in cell.plans:
        _record_failure(p, str(cell.error), parent)


def _skip(sw: _Sweep, cells: list[Cell], first: Cell) -> None:
    """``fail_fast``: the cells not started after ``first`` failed."""
    reason = f"not started: --fail-fast stopped the sweep after cell {first.name} failed"
    with sw.lock:
        for cell in cells:
            cell.state, cell.error = "skipped", reason
            for p in cell.plans:
                sw.run_states[p.layout.run_fp] = "skipped"
                sw.run_reasons[p.layout.run_fp] = reason
        sw.write_manifest()
    for cell in cells:
        sw.emit("cell_skipped", cell=cell.name, reason=reason)


#: seconds an interrupted sweep waits for its running cells' pipelines to stop (they stop at once once aborted)
STOP_WAIT_S = 10.0


def _stored(plan: Plan) -> int:
    try:
        return sum(1 for n in plan.store.list(plan.layout.shards_dir) if n.endswith(".parquet"))
    except Exception:  # noqa: BLE001 - an unreachable store: what the plan saw
        return len(plan.done)


def _interrupted(sw: _Sweep, running: dict[Future, Cell]) -> Interrupted:
    """Ctrl-C (or SIGTERM) during a sweep: stop the running cells' pipelines now (their finished shards are
    stored), rather than wait for them to end, and say what is stored and how to resume."""
    stop = Interrupted(f"sweep {sw.sweep.name!r} interrupted")
    for cell in running.values():
        if cell.handle is not None:
            cell.handle.abort(stop)
    wait(list(running), timeout=STOP_WAIT_S)
    mark_interrupted([p for c in running.values() for p in c.plans if p.layout.run_fp not in sw.results])
    with sw.lock:
        for cell in running.values():
            cell.state, cell.ended = "interrupted", time.time()
            for p in cell.plans:
                if p.layout.run_fp not in sw.results:
                    sw.run_states[p.layout.run_fp] = "interrupted"
    plans = [p for c in sw.cells for p in c.plans]
    stored, total = sum(_stored(p) for p in plans), sum(p.n_shards for p in plans)
    done = sum(c.state == "done" for c in sw.cells)
    return Interrupted(f"sweep {sw.sweep.name}: {stored} of {total} shards are stored ({done} of {len(sw.cells)} "
                       "cells done); run the same command again to resume from them")


def _schedule(sw: _Sweep, address: str | None, parent: str | None, fail_fast: bool) -> None:
    cells, total = sw.cells, sw.cluster_gpus
    pack = cells[0].plans[0].spec.execution.cell_order == "pack"
    failed_first = [c for c in cells if c.state == "failed"]  # its checkpoint was not found (plan_sweep)
    for cell in failed_first:
        _failed_unplanned(sw, cell, parent)
    todo = [c for c in cells if c.state != "failed"]
    queue = sorted(todo, key=lambda c: -c.gpus) if pack else todo
    running: dict[Future, Cell] = {}
    failures: list[Cell] = list(failed_first)
    pool = ThreadPoolExecutor(max_workers=max(1, len(cells)))
    try:
        while queue or running:
            if not (fail_fast and failures):
                used = sum(c.gpus for c in running.values())
                for cell in _pick(queue, used, total, running, pack):
                    queue.remove(cell)
                    running[pool.submit(_run_cell, sw, cell, address, parent)] = cell
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for f in done:
                cell = running.pop(f)
                exc = f.exception()
                cell.ended = time.time()
                if exc is None:
                    with sw.lock:
                        cell.state = "done"
                        sw.write_manifest()
                    sw.emit("cell_done", cell=cell.name, attempts=cell.attempts)
                    continue
                reason = _one_line(exc)
                retry = _retryable(exc) and cell.attempts <= cell.plans[0].spec.execution.cell_retries
                if not retry and not isinstance(exc, AuditKitError):
                    log.error("sweep %s: cell %s failed", sw.sweep.name, cell.name, exc_info=exc)
                with sw.lock:
                    cell.error = reason
                    cell.state = "queued" if retry else "failed"
                    for p in cell.plans:
                        if p.layout.run_fp not in sw.results:
                            sw.run_states[p.layout.run_fp] = "pending" if retry else "failed"
                            if not retry:
                                sw.run_reasons[p.layout.run_fp] = reason
                    sw.write_manifest()
                sw.emit("cell_failed", cell=cell.name, attempts=cell.attempts, reason=reason, retry=retry)
                if retry:
                    queue.insert(0, cell)
                    continue
                for p in cell.plans:
                    if p.layout.run_fp not in sw.results:
                        _record_failure(p, reason, parent)
                failures.append(cell)
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM through the CLI's handler
        raise _interrupted(sw, running) from exc
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if fail_fast and failures and queue:
        _skip(sw, [c for c in cells if c in queue], failures[0])
