"""The driver: plan, run the Ray Data pipeline over pending shards, merge."""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import sys
import time
from typing import Any

from ..config.models import RunSpec
from ..errors import AuditKitError, RunError, require
from ..store.db import ExperimentDB
from ..store.layout import RunLayout
from .local_start import quick_local_start
from .merge import merge
from .plan import Plan, build_plans
from .rows import unpack

log = logging.getLogger("auditkit_ray")


def init_ray(address: str | None, execution: Any) -> Any:
    ray = require("ray", "ray")
    if ray.is_initialized():
        return ray
    address = address or os.environ.get("RAY_ADDRESS")
    cwd = os.getcwd()
    pythonpath = os.pathsep.join(p for p in [cwd, os.environ.get("PYTHONPATH", "")] if p)
    # workers import user code relative to the driver's working directory, and only from there
    worker_env = {"PYTHONPATH": pythonpath, "AUDITKIT_RAY_WORKDIR": cwd}
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": _log_to_driver()}
    if address:
        ray.init(address=address, runtime_env={"env_vars": worker_env}, **kwargs)
    else:
        # address="local": always a fresh in-process cluster, never a stray one that `ray start` left on
        # this machine. Its processes inherit this one's environment, so its workers get worker_env from
        # there rather than from a job runtime_env: Ray starts every worker of a job that has one through
        # an extra setup process (measured here: 1.0-1.6 s from creating three actors to their
        # constructors, against 0.3-0.6 s without).
        # quick_local_start: Ray's head node without the processes no one would use and without its
        # one-second waits for the raylet (local_start.py)
        with (_environ(worker_env), _dropped(_TOKEN_AUTH_LOGGER, _TOKEN_AUTH_ENABLED),
              quick_local_start(kwargs["log_to_driver"])):
            ray.init(
                address="local",
                num_cpus=getattr(execution, "num_cpus", None),
                num_gpus=getattr(execution, "num_gpus", None),
                include_dashboard=False,
                **kwargs,
            )
        atexit.register(_release_local_cluster)  # runs before Ray's own exit hook (atexit is last in, first out)
    return ray


# Notices Ray prints on every run about its own defaults, which say nothing to our user: that a local
# cluster (ours, started for this process and stopped with it) uses token authentication, Ray's
# default since 2.60, and that Ray Data's progress bars are off (we print our own progress).
# Only these two messages are dropped; their loggers' other records (e.g. Ray's warning that a
# cluster runs *without* authentication) still print.
_TOKEN_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
_TOKEN_AUTH_ENABLED = "Token authentication is enabled for this Ray cluster"
_PROGRESS_LOGGER = "ray.data._internal.progress"
_PROGRESS_OFF = "Progress bars disabled"


class _DropMessage(logging.Filter):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


_PROGRESS_FILTER = _DropMessage(_PROGRESS_OFF)


@contextlib.contextmanager
def _dropped(logger: str, prefix: str):
    """Drop one message of ``logger`` for the duration of the block."""
    f = _DropMessage(prefix)
    target = logging.getLogger(logger)
    target.addFilter(f)
    try:
        yield
    finally:
        target.removeFilter(f)


def _log_to_driver() -> bool:
    return os.environ.get("AUDITKIT_RAY_LOG_TO_DRIVER", "0") == "1"


@contextlib.contextmanager
def _environ(values: dict[str, str]):
    """Set environment variables for the block, then put back what was there."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _release_local_cluster() -> None:
    """At the exit of a process that started its own local cluster, stop it
    before Ray's own exit hook does: that hook first sleeps half a second so
    that forwarded worker logs can print, and none are forwarded unless
    ``AUDITKIT_RAY_LOG_TO_DRIVER=1``. The autoscaler monitor goes first (see
    ``_stop_local_monitor``). Ray's hook then finds nothing left to do."""
    _stop_local_monitor()
    if not _log_to_driver():
        with contextlib.suppress(Exception):
            import ray

            ray.shutdown()


def _stop_local_monitor() -> None:
    """At exit, kill the autoscaler monitor of the local cluster this
    process started, before ``ray.shutdown`` does: Ray asks it to stop and
    waits a full second for it (serially, before the rest), and a local
    cluster has nothing for it to scale. Ray's own shutdown does the rest
    (also when this fails: another Ray layout only costs that second)."""
    with contextlib.suppress(Exception):
        import ray._private.worker as rw

        node = getattr(rw, "_global_node", None)
        for info in (getattr(node, "all_processes", None) or {}).get("monitor", []):
            if info.process.poll() is None:
                info.process.kill()
                info.process.wait(timeout=5)


def _quiet_ray_data() -> None:
    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.verbose_stats_logs = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    logging.getLogger(_PROGRESS_LOGGER).addFilter(_PROGRESS_FILTER)  # logging adds a filter once


def _resources(ray: Any, spec: RunSpec, scoring_actors: int) -> dict[str, Any]:
    """GPUs per generation actor, and CPUs per scoring actor such that every
    scoring pool fits beside one spare CPU (on 2 CPUs, pools that each took a
    whole CPU would starve the rest of the pipeline)."""
    cluster = ray.cluster_resources()
    gpus = cluster.get("GPU", 0)
    cpus = cluster.get("CPU", 1)
    want_gpu = spec.model.needs_gpu() and gpus > 0
    per_actor_gpu = float(getattr(spec.model, "num_gpus", 1.0)) if want_gpu else 0.0
    score_cpus = 1.0 if cpus >= scoring_actors + 1 else max(0.05, cpus / (scoring_actors + 1))
    return {"gen_gpus": per_actor_gpu, "score_cpus": round(score_cpus, 3)}


class _Progress:
    def __init__(self, name: str, total_shards: int, done_shards: int, enabled: bool) -> None:
        self.name, self.total, self.done = name, total_shards, done_shards
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.last = 0.0
        self.samples = 0

    def update(self, n: int) -> None:
        self.done += 1
        self.samples += n
        now = time.perf_counter()
        if not self.enabled:
            return
        if self.tty or now - self.last > 10 or self.done == self.total:
            rate = self.samples / max(1e-9, now - self.t0)
            left = self.total - self.done
            eta = f", ETA {left * (now - self.t0) / max(1, self.done):.0f}s" if left else ""
            print(f"[{self.name}] shards {self.done}/{self.total}, {rate:.1f} samples/s{eta}", file=sys.stderr, flush=True)
            self.last = now


def _unwrap(exc: BaseException) -> BaseException:
    """Find our own typed error inside Ray's wrappers (RayTaskError,
    UserCodeException); across processes the chain may survive only as text."""
    import re

    from .. import errors

    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, AuditKitError):
            return e
        for nxt in (getattr(e, "cause", None), e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    m = re.search(r"auditkit_ray\.errors\.(\w+): (.+)", str(exc))
    if m and isinstance(getattr(errors, m.group(1), None), type) and issubclass(getattr(errors, m.group(1)), AuditKitError):
        return getattr(errors, m.group(1))(m.group(2).strip())
    return exc


def model_key(spec: RunSpec) -> str:
    """Runs with the same key can share generation actors (one model load)."""
    return spec.model.model_dump_json()


def run_pipeline(plans: list[Plan], address: str | None, progress: bool) -> dict[str, dict[str, Any]]:
    """One streaming pipeline over the pending shards of runs that share a
    model. Returns per-run generation statistics keyed by run fingerprint."""
    stats = {p.layout.run_fp: {"generated": 0, "generation_s": 0.0, "new_tokens": 0, "model_size": None, "tallies": {}}
             for p in plans}
    pending = [(p, i) for p in plans for i in p.pending]
    if not pending:
        return stats
    if len({model_key(p.spec) for p in plans}) != 1:
        raise ValueError("run_pipeline: plans must share one model")
    lead = plans[0].spec
    name = lead.name if len(plans) == 1 else f"{len(plans)} runs"
    ray = init_ray(address, lead.execution)
    _quiet_ray_data()
    from ray.data import ActorPoolStrategy

    from .stages import GenerateStage, RetrieveStage, ScoreStage, pools_needed

    runs = {p.layout.run_fp: (p.spec.model_dump_json(by_alias=True), p.store, p.layout) for p in plans}
    items = [p.row(i) for p, i in pending]
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    del items
    for p in plans:
        p.shard_payloads.clear()  # now in the object store; keep the driver's memory flat
    if any(p.spec.retrieval is not None for p in plans):
        ds = ds.map_batches(
            RetrieveStage,
            fn_constructor_kwargs={"runs": runs},
            batch_size=1,
            batch_format="numpy",
            compute=ActorPoolStrategy(size=max(p.spec.execution.retrieval_actors for p in plans), max_tasks_in_flight_per_actor=2),
            num_cpus=0.05,
        )
    n_need_gen = sum(len(p.needs_generation) for p in plans)
    actors = max(p.spec.execution.generation_actors for p in plans)
    n_gen = max(1, min(actors, n_need_gen or 1))
    n_shards = sum(p.n_shards for p in plans)
    if n_need_gen and actors > n_shards and not lead.model.generates_inline():
        # the shard is the unit of work: an actor with no shard would load its model for nothing
        print(f"warning: {name}: {n_shards} shard{'s' if n_shards > 1 else ''} of {lead.shard_size} samples for {actors} "
              f"generation actors; {n_gen} will run (a smaller execution.shard_size gives every actor a share)", file=sys.stderr)
    pools = pools_needed([p.spec for p in plans])
    sizes = {"checks": "scoring_actors", "judges": "judge_actors", "oracles": "oracle_actors"}
    # no more actors in a pool than shards to score: each one is a process to start
    pool_actors = {pool: max(1, min(len(pending), max(getattr(p.spec.execution, sizes[pool]) for p in plans))) for pool in pools}
    res = _resources(ray, lead, sum(pool_actors.values()))
    if res["gen_gpus"]:
        fit = int(ray.cluster_resources().get("GPU", 0) // res["gen_gpus"])
        if fit < 1:
            raise RunError(f"{name}: a generation actor needs {res['gen_gpus']:g} GPUs; the cluster has fewer")
        if n_gen > fit:  # more actors than GPUs would wait forever
            print(f"warning: {name}: {n_gen} generation actors do not fit the cluster's GPUs; using {fit}", file=sys.stderr)
            n_gen = fit
    # a backend with no model (echo) runs in the first scoring pool's actors: no
    # generation actor to start and no hand-off between processes for each shard
    inline = bool(n_need_gen) and lead.model.generates_inline()
    if n_need_gen and not inline:
        # shards one generation actor works on at once: > 1 runs them in threads of the actor
        # (an API backend waits on the network; its request limits hold over all of them)
        k = max((p.spec.execution.generation_shards_in_flight or p.spec.model.shards_in_flight()) for p in plans)
        in_actor = {"max_concurrent_calls_per_actor": k, "enable_true_multi_threading": True} if k > 1 else {}
        ds = ds.map_batches(
            GenerateStage,
            fn_constructor_kwargs={"runs": runs},
            batch_size=1,
            batch_format="numpy",
            compute=ActorPoolStrategy(size=n_gen, max_tasks_in_flight_per_actor=2 * k, **in_actor),
            num_gpus=res["gen_gpus"] or None,
            num_cpus=0,
            zero_copy_batch=True,
        )
    generation = "inline" if inline else "given" if n_need_gen else "cached"
    for k, pool in enumerate(pools):
        ds = ds.map_batches(
            ScoreStage,
            fn_constructor_kwargs={"runs": runs, "pool": pool, "final": k == len(pools) - 1,
                                   "generation": generation if k == 0 else "given"},
            batch_size=1,
            batch_format="numpy",
            compute=ActorPoolStrategy(size=pool_actors[pool], max_tasks_in_flight_per_actor=2),
            num_cpus=res["score_cpus"],
        )
    _kill_actors_on_failure(ds)
    bar = _Progress(name, sum(p.n_shards for p in plans), sum(len(p.done) for p in plans), progress)
    try:
        for row in ds.iter_rows():
            info = unpack(row["payload"])
            bar.update(info["n"])
            stats[info["run"]]["tallies"][info["shard"]] = info["tally"]  # the shard's rows, tallied by its scorer
            if info["generated"]:
                st = stats[info["run"]]
                st["generated"] += info["n"]
                st["generation_s"] += info["generation_s"]
                st["new_tokens"] += info["completion_tokens"]
            if info.get("model_size_bytes"):
                stats[info["run"]]["model_size"] = info["model_size_bytes"]
    except Exception as exc:  # noqa: BLE001 - re-raised as a clear error
        inner = _unwrap(exc)
        if isinstance(inner, AuditKitError):
            raise inner from None
        raise RunError(f"{name}: pipeline failed: {type(inner).__name__}: {str(inner).splitlines()[0] if str(inner) else ''}") from exc
    return stats


def _kill_actors_on_failure(ds: Any) -> None:
    """A failed pipeline kills its actors at once. Ray Data's own shutdown
    only drops its handles and leaves the actors to reference counting, and
    an actor that still owns objects lingers, idle, holding its GPU, while a
    long-lived caller (a notebook, a sweep's other cells) waits for it."""
    try:
        from ray.data._internal.execution.execution_callback import ExecutionCallback
    except ImportError:  # another Ray layout: fall back to reference counting
        return

    class KillActorsOnFailure(ExecutionCallback):
        def before_execution_starts(self, executor: Any) -> None:
            shutdown = executor.shutdown

            def forced_on_failure(force: bool = False, exception: BaseException | None = None, **kw: Any) -> Any:
                return shutdown(force or exception is not None, exception, **kw)

            executor.shutdown = forced_on_failure

    classes = ds.context.custom_execution_callback_classes
    ds.context.custom_execution_callback_classes = [c for c in classes if c.__name__ != "KillActorsOnFailure"] + [KillActorsOnFailure]


def _warn_on_failure(what: str, fn: Any) -> Any:
    """Tracking mirrors must not lose a finished run: their failures warn."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        from ..core.secrets import scrub_text

        print(f"warning: {what}: {scrub_text(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}", file=sys.stderr)
        return None


def track(plan: Plan, result: Any, parent_run_id: str | None = None) -> None:
    t = plan.spec.tracking
    if t.mlflow_uri:
        from ..api import samples_table
        from ..integrations.mlflow import mirror_run

        rid = _warn_on_failure("MLflow", lambda: mirror_run(result, t.mlflow_uri, t.mlflow_experiment,
                                                             samples_table=samples_table(result), parent_run_id=parent_run_id,
                                                             artifact_location=t.mlflow_artifact_location))
        if rid:
            result.metadata["mlflow_run_id"] = rid


def finish(plan: Plan, stats: dict[str, Any], wall_s: float, parent_run_id: str | None = None) -> Any:
    """Merge a run's shards into its RunResult and store it."""
    store = plan.store
    present = set(store.list(plan.layout.shards_dir))  # one listing, not a request per shard
    missing = [i for i in range(plan.n_shards) if RunLayout.shard_name(i) not in present]
    if missing:
        raise RunError(f"run {plan.spec.name!r}: shards {missing[:10]} were not written; run again to resume")
    result = merge(plan, store, wall_s=wall_s, generated=stats["generated"], generation_s=stats["generation_s"],
                   new_tokens=stats["new_tokens"], model_size=stats.get("model_size"), tallies=stats.get("tallies"))
    track(plan, result, parent_run_id=parent_run_id)
    store.replace(plan.layout.result, result.to_json().encode("utf-8"))
    if plan.spec.tracking.index:
        _warn_on_failure("ExperimentDB", lambda: ExperimentDB(plan.spec.tracking.db).record(
            result, result_uri=store.uri(plan.layout.result), store_uri=store.uri()))
    store.replace(
        plan.layout.manifest,
        json.dumps({"name": plan.spec.name, "fingerprint": plan.layout.run_fp, "generation_fingerprint": plan.layout.gen_fp,
                    "n_shards": plan.n_shards, "shard_size": plan.layout.shard_size, "n_samples": plan.n_samples,
                    "state": "complete"}, indent=2).encode(),
    )
    return result


def evaluate_specs(specs: list[RunSpec], *, address: str | None = None, progress: bool = True) -> list[Any]:
    """Evaluate several runs; runs that share a model share one pipeline and
    so one model load per generation actor (evaluate_many, sweep cells)."""
    t0 = time.perf_counter()
    plans = build_plans(specs, in_tasks=True, address=address)
    by_model: dict[str, list[Plan]] = {}
    seen: set[str] = set()
    for p in plans:
        if p.layout.run_fp in seen:
            continue
        seen.add(p.layout.run_fp)
        by_model.setdefault(model_key(p.spec), []).append(p)
    stats: dict[str, dict[str, Any]] = {}
    for group in by_model.values():
        stats.update(run_pipeline(group, address, progress))
    wall = time.perf_counter() - t0
    return [stored_or_finish(p, stats[p.layout.run_fp], wall) for p in plans]


def stored_or_finish(plan: Plan, stats: dict[str, Any], wall_s: float, parent_run_id: str | None = None) -> Any:
    """A run with nothing left to do returns its stored RunResult as it was
    (its perf figures describe the run that did the work); otherwise merge."""
    from ..core.result import RunResult

    if not stats["generated"] and not plan.shard_payloads_built and plan.store.exists(plan.layout.result):
        try:
            stored = RunResult.from_dict(json.loads(plan.store.read_bytes(plan.layout.result)), plan.store.uri(plan.layout.result))
        except AuditKitError:
            stored = None  # unreadable: merge again
        if stored is not None:
            if stored.name != plan.spec.name:  # the same configuration under a new name (e.g. a sweep cell): relabel
                stored = stored.model_copy(update={"name": plan.spec.name})
                plan.store.replace(plan.layout.result, stored.to_json().encode("utf-8"))
            return stored
    return finish(plan, stats, wall_s, parent_run_id=parent_run_id)


def evaluate_spec(spec: RunSpec, *, address: str | None = None, progress: bool = True) -> Any:
    return evaluate_specs([spec], address=address, progress=progress)[0]
