"""The driver: plan, run the Ray Data pipeline over pending shards, merge.

The stages the pipeline runs are the actor side's (``actors/``); what
travels between them is ``actors.shard``'s."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from typing import Any, Callable, Iterator

from ..actors.context import DriverContext
from ..actors.shard import read_outcome
from ..config.models import RunSpec
from ..core.stderr import StderrHandler
from ..errors import RAY_LOST_ERRORS, AuditKitError, InfrastructureError, Interrupted, RunError
from ..store.db import ExperimentDB
from ..store.layout import RunLayout
from . import direct, genpool
from .genpool import GenerationPool
from .merge import merge
from .plan import Plan, build_plans, mark_interrupted
from .progress import ShardProgress
from .runtime import init_ray, kill_actors_on_failure, quiet_ray_data, stopped_by_down, unwrap_error, warn_on_failure

log = logging.getLogger(__name__)
#: the progress lines of a run (``progress=True``)
progress_log = logging.getLogger(__name__ + ".progress")


def _resources(ray: Any, spec: RunSpec, scoring_actors: int) -> dict[str, Any]:
    """CPUs per scoring actor such that every scoring pool fits beside one spare CPU (on 2 CPUs, pools that
    each took a whole CPU would starve the rest of the pipeline)."""
    cpus = ray.cluster_resources().get("CPU", 1)
    score_cpus = 1.0 if cpus >= scoring_actors + 1 else max(0.05, cpus / (scoring_actors + 1))
    return {"score_cpus": round(score_cpus, 3)}


@contextlib.contextmanager
def _progress_shown(enabled: bool) -> Iterator[None]:
    """A caller that asked for progress sees it: when the application has configured no logging at all (a
    script, a notebook), the progress lines go to stderr for the run's duration, as logging's own last resort
    does for warnings. An application (or the CLI) that has set up logging decides for itself."""
    if not enabled or progress_log.hasHandlers():
        yield
        return
    handler, level = StderrHandler(), progress_log.level
    progress_log.addHandler(handler)
    progress_log.setLevel(logging.INFO)
    try:
        yield
    finally:
        progress_log.removeHandler(handler)
        progress_log.setLevel(level)


#: Ray's errors for a part of the cluster that was lost: a run started again can succeed
_LOST = RAY_LOST_ERRORS


def model_key(spec: RunSpec) -> str:
    """Runs with the same key can share generation actors (one model load)."""
    return spec.model.model_dump_json()


def run_pipeline(plans: list[Plan], address: str | None, progress: bool, *, actor_restarts: int | None = None,
                 on_shard: Callable[[Any], None] | None = None,
                 on_start: Callable[[Any], None] | None = None,
                 pool: GenerationPool | None = None) -> dict[str, dict[str, Any]]:
    """One streaming pipeline over the pending shards of runs that share a
    model. Returns per-run generation statistics keyed by run fingerprint.

    ``actor_restarts``: times Ray restarts a generation actor that died (default: without end; a sweep bounds
    it, so that a crashing engine fails its cell). ``on_shard``: called with each shard's outcome as it comes.
    ``on_start``: called with a handle whose ``abort(exc)`` stops the pipeline (and kills its actors) from
    another thread. ``pool``: generation actors started for these runs before they were planned
    (``start_generation``); the pipeline uses them (or gives back those it does not need) and is done with
    them at its end: kept loaded where they are resident, stopped otherwise."""
    stats = {p.layout.run_fp: {"generated": 0, "generation_s": 0.0, "new_tokens": 0, "model_size": None, "tallies": {},
                               "generated_shards": set(), "read_back": {}} for p in plans}
    pending = [(p, i) for p in plans for i in p.pending]
    if not pending:
        if pool is not None:
            pool.trim(0)  # started before the plan found every shard stored: given back unused
            pool.close()
        return stats
    if len({model_key(p.spec) for p in plans}) != 1:
        raise ValueError("run_pipeline: plans must share one model")
    lead = plans[0].spec
    ray = init_ray(address, lead.execution)
    try:
        pool, generation = _generation_pool(ray, plans, actor_restarts, pool)
        if direct.eligible(plans, pending, in_sweep=on_start is not None):
            _run_direct(plans, pending, stats, progress, on_shard, pool, generation)
        else:
            _run_pipeline(ray, plans, pending, stats, progress, on_shard, on_start, pool, generation)
    except KeyboardInterrupt:
        if pool is not None:
            pool.interrupted()
        raise
    except BaseException:
        if pool is not None:  # a hung or dead actor would not answer a polite close: kill them now
            pool.kill()
        raise
    if pool is not None:
        pool.close()
    return stats


def _run_pipeline(ray: Any, plans: list[Plan], pending: list[tuple[Plan, int]], stats: dict[str, dict[str, Any]],
                  progress: bool, on_shard: Callable[[Any], None] | None, on_start: Callable[[Any], None] | None,
                  pool: GenerationPool | None, generation: str) -> None:
    """The pipeline's steps: its source, the generation stage, the scoring stages, then the shards as they come."""
    name = plans[0].spec.name if len(plans) == 1 else f"{len(plans)} runs"
    quiet_ray_data()
    runs = {p.layout.run_fp: (p.spec.model_dump_json(by_alias=True), p.store, p.layout) for p in plans}
    driver = genpool.driver_context()
    ds = _source(ray, plans, runs, pending, driver)
    if pool is not None:
        ds = pool.stage(ds, runs)
    ds = _scoring_stages(ray, ds, plans, runs, len(pending), generation, driver)
    handle = kill_actors_on_failure(ds)
    if pool is not None:
        handle.on_abort.append(pool.kill)
    if on_start is not None:
        on_start(handle)
    _drain((read_outcome(row["payload"]) for row in ds.iter_rows()), plans, stats, name, progress, on_shard, handle)


def _run_direct(plans: list[Plan], pending: list[tuple[Plan, int]], stats: dict[str, dict[str, Any]],
                progress: bool, on_shard: Callable[[Any], None] | None, pool: GenerationPool | None,
                generation: str) -> None:
    """A small run without Ray Data (``pipeline.direct``): the same stages, the same shards, the same outcomes."""
    from ..cluster.compat import PipelineHandle

    name = plans[0].spec.name if len(plans) == 1 else f"{len(plans)} runs"
    runs = {p.layout.run_fp: (p.spec.model_dump_json(by_alias=True), p.store, p.layout) for p in plans}
    handle = PipelineHandle()
    if pool is not None:
        handle.on_abort.append(pool.kill)
    outs = direct.outcomes(plans, pending, runs, generation, pool, genpool.driver_context(), handle)
    _drain(outs, plans, stats, name, progress, on_shard, handle)


def _source(ray: Any, plans: list[Plan], runs: dict, pending: list[tuple[Plan, int]],
            driver: DriverContext | None) -> Any:
    """The pending shards as a dataset of one row each, with the retrieval stage where a run retrieves."""
    from ray.data import ActorPoolStrategy

    from ..actors.retrieve import RetrieveStage

    items = [p.row(i) for p, i in pending]
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    del items
    for p in plans:
        p.shard_payloads.clear()  # now in the object store; keep the driver's memory flat
    if any(p.spec.retrieval is not None for p in plans):
        ds = ds.map_batches(
            RetrieveStage,
            fn_constructor_kwargs={"runs": runs, "driver": driver},
            batch_size=1,
            batch_format="numpy",
            compute=ActorPoolStrategy(size=max(p.spec.execution.retrieval_actors for p in plans),
                                      max_tasks_in_flight_per_actor=2),
            num_cpus=0.05,
        )
    return ds


def _generation_pool(ray: Any, plans: list[Plan], actor_restarts: int | None,
                     pool: GenerationPool | None) -> tuple[GenerationPool | None, str]:
    """The generation actors the pending shards need (``pool`` when the driver started them before the plan;
    None for an inline backend or outputs all stored), and what the first scoring pool is told of generation."""
    lead = plans[0].spec
    n_need_gen = sum(len(p.needs_generation) for p in plans)
    actors = max(p.spec.execution.generation_actors for p in plans)
    n_gen = max(1, min(actors, n_need_gen or 1))
    n_shards = sum(p.n_shards for p in plans)
    if n_need_gen and actors > n_shards and not lead.model.generates_inline():
        # the shard is the unit of work: an actor with no shard would load its model for nothing
        log.warning("%s: %d shard%s of %d samples for %d generation actors; %d will run (a smaller "
                    "execution.shard_size gives every actor a share)", lead.name, n_shards,
                    "s" if n_shards > 1 else "", lead.shard_size, actors, n_gen)
    # a backend with no model (echo) runs in the first scoring pool's actors: no
    # generation actor to start and no hand-off between processes for each shard
    inline = bool(n_need_gen) and lead.model.generates_inline()
    if not n_need_gen or inline:
        if pool is not None:  # every output is stored, or the backend runs inline: no model to load
            pool.trim(0)
            pool.close()
        return None, "inline" if inline else "cached"
    n_gen, gpus = genpool.shape(ray, lead, n_gen)
    if pool is None:
        # shards one generation actor works on at once: > 1 runs them in threads of the actor
        # (an API backend waits on the network; its request limits hold over all of them)
        pool = GenerationPool(ray, lead, n_gen, gpus, genpool.in_flight([p.spec for p in plans]), actor_restarts)
    pool.trim(n_gen)
    return pool, "given"


def _scoring_stages(ray: Any, ds: Any, plans: list[Plan], runs: dict, n_pending: int, generation: str,
                    driver: DriverContext | None) -> Any:
    """``ds`` with one scoring stage per pool the runs need (checks, judges, oracles), in that order."""
    from ray.data import ActorPoolStrategy

    from ..actors.score import ScoreStage, pools_needed

    pools = pools_needed([p.spec for p in plans])
    sizes = {"checks": "scoring_actors", "judges": "judge_actors", "oracles": "oracle_actors"}
    # no more actors in a pool than shards to score: each one is a process to start
    pool_actors = {pool: max(1, min(n_pending, max(getattr(p.spec.execution, sizes[pool]) for p in plans)))
                   for pool in pools}
    res = _resources(ray, plans[0].spec, sum(pool_actors.values()))
    for k, kind in enumerate(pools):
        ds = ds.map_batches(
            ScoreStage,
            fn_constructor_kwargs={"runs": runs, "pool": kind, "first": k == 0, "final": k == len(pools) - 1,
                                   "generation": generation if k == 0 else "given", "driver": driver},
            batch_size=1,
            batch_format="numpy",
            compute=ActorPoolStrategy(size=pool_actors[kind], max_tasks_in_flight_per_actor=2),
            num_cpus=res["score_cpus"],
        )
    return ds


def _drain(outcomes: Iterator[Any], plans: list[Plan], stats: dict[str, dict[str, Any]], name: str, progress: bool,
           on_shard: Callable[[Any], None] | None, handle: Any) -> None:
    """Read each shard's outcome as the pipeline yields it into ``stats``; an interrupt or a failure becomes
    the error a user reads (an abort's own reason first)."""
    replays = plans[0].spec.model.replays_generations()  # its outputs are read, not generated: re-scored
    bar = ShardProgress(name, sum(p.n_shards for p in plans), sum(len(p.done) for p in plans), progress, progress_log,
                        rescoring=sum(len(p.pending) if replays else len(p.pending) - len(p.needs_generation)
                                      for p in plans))
    try:
        with _progress_shown(progress):
            for out in outcomes:
                bar.update(out.n, out.generation_s, out.generated and not replays)
                if on_shard is not None:
                    on_shard(out)
                st = stats[out.run]
                st["tallies"][out.shard] = out.tally  # the shard's rows, tallied by its scorer
                if out.generated:
                    st["generated"] += out.n
                    st["generation_s"] += out.generation_s
                    st["new_tokens"] += out.completion_tokens
                    st["generated_shards"].add(out.shard)
                else:
                    st["read_back"][out.shard] = out.n
                if out.model_size_bytes:
                    st["model_size"] = out.model_size_bytes
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM through the CLI's handler, or `auditkit-ray down`
        # the signal may land between two shards, the iterator suspended: closed now, it ends its threads
        # before the process exits (Ray shut down under a thread still in a Ray call crashes the process)
        getattr(outcomes, "close", lambda: None)()
        mark_interrupted(plans)
        why = "the warm local cluster was stopped (auditkit-ray down); " if stopped_by_down() else ""
        raise Interrupted(f"{name}: {why}{_stored_shards(plans, bar.done)} of {bar.total} shards are stored; run "
                          "the same command again to resume from them") from exc
    except Exception as exc:  # noqa: BLE001 - re-raised as a clear error
        if handle.aborted is not None:
            raise handle.aborted from None
        inner = unwrap_error(exc)
        if isinstance(inner, AuditKitError):
            raise inner from None
        first = _ANSI.sub("", str(inner)).splitlines()[0] if str(inner) else ""  # Ray colours its task names
        lost = type(inner).__name__ in _LOST or type(exc).__name__ in _LOST
        raise (InfrastructureError if lost else RunError)(
            f"{name}: pipeline failed: {type(inner).__name__}: {first}") from exc
    if handle.aborted is not None:
        raise handle.aborted
    credit_lost_generations(plans, stats)


def credit_lost_generations(plans: list[Plan], stats: dict[str, dict[str, Any]]) -> None:
    """Count the shards whose generations this invocation stored though no actor reported generating them.

    An actor stores a shard's generations before it returns the shard; lost in between (its node gone, a
    kill), its retry reads them back from the store. Those samples were generated once, here: they count for
    the first run that shares that generation cache, with no generation time (it went with the actor)."""
    groups: dict[str, list[Plan]] = {}
    for p in plans:
        groups.setdefault(p.store.uri(p.layout.gen_dir), []).append(p)
    for group in groups.values():
        made = set().union(*(stats[p.layout.run_fp]["generated_shards"] for p in group))
        lost = {shard: n for p in group for shard, n in stats[p.layout.run_fp]["read_back"].items()
                if shard not in p.cached_generations and shard not in made}
        stats[group[0].layout.run_fp]["generated"] += sum(lost.values())


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _stored_shards(plans: list[Plan], seen: int) -> int:
    """How many of the runs' shards the store holds (a shard is stored before the driver reads its row)."""
    try:
        return sum(len({n for n in p.store.list(p.layout.shards_dir) if n.endswith(".parquet")}) for p in plans)
    except Exception:  # noqa: BLE001 - an unreachable store: what the driver saw is a lower bound
        return seen


def track(plan: Plan, result: Any, parent_run_id: str | None = None) -> None:
    t = plan.spec.tracking
    if t.mlflow_uri:
        from ..integrations.mlflow import mirror_run
        from ..store.samples import read_samples_table

        rid = warn_on_failure("MLflow", lambda: mirror_run(result, t.mlflow_uri, t.mlflow_experiment,
                                                           samples_table=read_samples_table(result),
                                                           parent_run_id=parent_run_id,
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
                   new_tokens=stats["new_tokens"], model_size=stats.get("model_size"), tallies=stats.get("tallies"),
                   reused=plan.done)
    track(plan, result, parent_run_id=parent_run_id)
    store.replace(plan.layout.result, result.to_json().encode("utf-8"))
    if plan.spec.tracking.index:
        warn_on_failure("ExperimentDB", lambda: ExperimentDB(plan.spec.tracking.db).record(
            result, result_uri=store.uri(plan.layout.result), store_uri=store.uri()))
    store.replace(
        plan.layout.manifest,
        json.dumps({"name": plan.spec.name, "fingerprint": plan.identity.run_fp,
                    "generation_fingerprint": plan.identity.gen_fp, "n_shards": plan.n_shards,
                    "shard_size": plan.layout.shard_size, "n_samples": plan.n_samples, "state": "complete"},
                   indent=2).encode(),
    )
    return result


def evaluate_specs(specs: list[RunSpec], *, address: str | None = None, progress: bool = True) -> list[Any]:
    """Evaluate several runs; runs that share a model share one pipeline and
    so one model load per generation actor (evaluate_many, sweep cells)."""
    t0 = time.perf_counter()
    pins: dict[tuple, str] = {}
    early = start_generation(specs, address, pins)
    try:
        plans = build_plans(specs, in_tasks=True, address=address, pins=pins)
    except BaseException:
        if early is not None:
            early.kill()
        raise
    by_model: dict[str, list[Plan]] = {}
    seen: set[str] = set()
    for p in plans:
        if p.layout.run_fp in seen:
            continue
        seen.add(p.layout.run_fp)
        by_model.setdefault(model_key(p.spec), []).append(p)
    stats: dict[str, dict[str, Any]] = {}
    for group in by_model.values():
        pool, early = early, None  # the runs of one model share it (start_generation)
        stats.update(run_pipeline(group, address, progress, pool=pool))
    if early is not None:
        early.kill()
    wall = time.perf_counter() - t0
    return [stored_or_finish(p, stats[p.layout.run_fp], wall) for p in plans]


def start_generation(specs: list[RunSpec], address: str | None, pins: dict[tuple, str]) -> GenerationPool | None:
    """Generation actors for runs that share one model, started before the runs are planned: Ray first, then
    the actors, which load the model while the driver reads the dataset, builds the prompts and the pipeline.
    None where no actor would be used (inline backends). Should the plan find every output stored, the pipeline
    gives them back unused."""
    from .plan import pin_model, preflight

    if not specs:
        return None
    pinned = [pin_model(s, pins) for s in specs]
    if len({model_key(s) for s in pinned}) != 1 or pinned[0].model.generates_inline():
        return None
    for s in pinned:
        preflight(s)  # a mistake the plan would report fails before any actor starts
    lead = pinned[0]
    ray = init_ray(address, lead.execution)
    n, gpus = genpool.shape(ray, lead, max(s.execution.generation_actors for s in pinned))
    return GenerationPool(ray, lead, n, gpus, genpool.in_flight(pinned))


def stored_or_finish(plan: Plan, stats: dict[str, Any], wall_s: float, parent_run_id: str | None = None) -> Any:
    """A run with nothing left to do returns its stored RunResult (stored as it was), its perf this
    invocation's: its wall time, nothing generated, every sample stored. A stored result of the same
    configuration cut in other shards (another ``execution.shard_size``) is merged again from this one's."""
    from ..core.result import RunResult

    if not stats["generated"] and not plan.shard_payloads_built and plan.store.exists(plan.layout.result):
        try:
            stored = RunResult.from_dict(json.loads(plan.store.read_bytes(plan.layout.result)),
                                         plan.store.uri(plan.layout.result))
        except AuditKitError:
            stored = None  # unreadable: merge again
        if stored is not None and stored.samples_path == plan.store.uri(plan.layout.shards_dir):
            if stored.name != plan.spec.name:  # the same configuration under a new name (e.g. a sweep cell): relabel
                stored = stored.model_copy(update={"name": plan.spec.name})
                plan.store.replace(plan.layout.result, stored.to_json().encode("utf-8"))
            return stored.model_copy(update={"perf": stored.perf.reused(wall_s)})
    return finish(plan, stats, wall_s, parent_run_id=parent_run_id)


def evaluate_spec(spec: RunSpec, *, address: str | None = None, progress: bool = True) -> Any:
    """Evaluate one run (``evaluate_specs``)."""
    return evaluate_specs([spec], address=address, progress=progress)[0]
