"""Generation actors of the driver's own, started as soon as the cluster is up.

Ray Data starts a stage's actors only when its dataset executes, after the
runs are planned and their rows are in the object store; the worker start,
the imports and the model load then come one after the other. These actors
are created right after ``ray.init``, load their model while the driver plans,
and Ray Data reaches them through one light forwarding actor
(``actors.forward``), so its streaming and backpressure stay as they were.

What Ray Data's pool gave the stage, they keep: GPUs per actor (``num_gpus``,
so Ray sets ``CUDA_VISIBLE_DEVICES``), restarts (unbounded unless a sweep bounds
them), a shard lost with its actor retried on another one that is up (or on the
same once it is back: the watchdog's exit relies on it), shards in flight per actor (a threaded actor), and a kill
when the pipeline fails or a sweep aborts it.
The default; ``AUDITKIT_RAY_GENERATION_POOL=raydata`` puts generation back in Ray Data's own actor pool (the
path before, kept to compare against: the outputs are the same sample for sample)."""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any

from ..config.models import RunSpec

log = logging.getLogger(__name__)


#: the values of ``AUDITKIT_RAY_GENERATION_POOL``: the driver's own actors (the default) or Ray Data's pool
POOLS = ("owned", "raydata")


def owned() -> bool:
    """Whether generation runs on the driver's own actors (the default) or in Ray Data's pool
    (``AUDITKIT_RAY_GENERATION_POOL=raydata``)."""
    from ..errors import ConfigError

    value = os.environ.get("AUDITKIT_RAY_GENERATION_POOL", "owned").strip().lower() or "owned"
    if value not in POOLS:
        raise ConfigError(f"AUDITKIT_RAY_GENERATION_POOL={value!r}: expected one of {', '.join(POOLS)}")
    return value == "owned"


def shape(ray: Any, lead: RunSpec, wanted: int) -> tuple[int, float]:
    """(actors that fit, GPUs per actor): ``wanted`` actors, fewer when the cluster's GPUs hold fewer."""
    from ..errors import RunError

    gpus = float(ray.cluster_resources().get("GPU", 0))
    per = float(getattr(lead.model, "num_gpus", 1.0)) if lead.model.needs_gpu() and gpus > 0 else 0.0
    if not per:
        return max(1, wanted), 0.0
    fit = int(gpus // per)
    if fit < 1:
        raise RunError(f"{lead.name}: a generation actor needs {per:g} GPUs; the cluster has fewer")
    if wanted > fit:  # more actors than GPUs would wait forever
        log.warning("%s: %d generation actors do not fit the cluster's GPUs; using %d", lead.name, wanted, fit)
    return max(1, min(wanted, fit)), per


def in_flight(specs: list[RunSpec]) -> int:
    """Shards one generation actor works on at once (> 1: in threads of the actor)."""
    return max((s.execution.generation_shards_in_flight or s.model.shards_in_flight()) for s in specs)


class GenerationPool:
    """``n`` generation actors for the runs of one model, loading it from the moment they exist."""

    def __init__(self, ray: Any, lead: RunSpec, n: int, gpus: float, shards_in_flight: int,
                 restarts: int | None = None) -> None:
        from ..actors.generate import GenerateStage

        self.ray = ray
        self.k = shards_in_flight
        opts: dict[str, Any] = {"num_cpus": 0, "num_gpus": gpus or None,
                                "max_restarts": -1 if restarts is None else restarts, "max_task_retries": 0}
        if self.k > 1:
            opts["max_concurrency"] = self.k
        cls = ray.remote(GenerateStage).options(**opts)
        lead_json = lead.model_dump_json(by_alias=True)
        self.actors = [cls.remote({}, lead=lead_json) for _ in range(n)]
        self.warming = [a.warm.remote() for a in self.actors] if not lead.model.load_in_thread() else []

    def trim(self, n: int) -> None:
        """Keep ``n`` actors (the plan found fewer shards to generate than actors); stop the others."""
        extra, self.actors = self.actors[n:], self.actors[:n]
        for a in extra:
            with contextlib.suppress(Exception):
                self.ray.kill(a, no_restart=True)

    def stage(self, ds: Any, runs: dict[str, Any]) -> Any:
        """``ds`` with the generation stage: each shard to the least busy actor, ``k`` shards in flight each."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        calls = len(self.actors) * 2 * self.k
        # on the driver's node: a forwarder lost with another node would lose outputs its actors had stored, and
        # the retried shard would then read them from the cache, uncounted as generated
        here = NodeAffinitySchedulingStrategy(node_id=self.ray.get_runtime_context().get_node_id(), soft=True)
        return self._forwarding(ds, runs, calls, here)  # through ray_remote_args: quiet_ray_data filters its warning

    def _forwarding(self, ds: Any, runs: dict[str, Any], calls: int, here: Any) -> Any:
        from ray.data import ActorPoolStrategy

        from ..actors.forward import ToGenerationActors

        return ds.map_batches(
            ToGenerationActors,
            fn_constructor_kwargs={"actors": self.actors, "runs": runs},
            scheduling_strategy=here,
            batch_size=1,
            batch_format="numpy",
            compute=ActorPoolStrategy(size=1, max_tasks_in_flight_per_actor=calls,
                                      max_concurrent_calls_per_actor=calls, enable_true_multi_threading=True),
            num_cpus=0,
            zero_copy_batch=True,
        )

    def close(self) -> None:
        """Close each actor's backend (an engine that shuts down cleanly), then stop the actors."""
        refs = []
        for a in self.actors:
            with contextlib.suppress(Exception):
                refs.append(a.close.remote())
        with contextlib.suppress(Exception):
            self.ray.wait(refs, num_returns=len(refs), timeout=10)
        self.kill()

    def kill(self) -> None:
        actors, self.actors = self.actors, []
        for a in actors:
            with contextlib.suppress(Exception):
                self.ray.kill(a, no_restart=True)

    def load_windows(self) -> list[dict[str, Any]]:
        """Each actor's ``ready()``: its process and model load times (waits for the actors to exist)."""
        return self.ray.get([a.ready.remote() for a in self.actors])
