"""The generation actors of one model, started by the driver as soon as the cluster is up (or found loaded).

Ray Data would start a stage's actors only when its dataset executes, after the runs are planned; these are
created (or leased, resident) right after ``ray.init``, load their model while the driver plans, and the
pipeline reaches them through one light forwarding actor (``actors.forward``), so Ray Data's streaming and
backpressure stay as they were. Each actor is a ``actors.host.GenerationActor``: the one host of generation.

What an actor pool gives a stage, they keep: GPUs per actor (``num_gpus``, so Ray sets
``CUDA_VISIBLE_DEVICES``), restarts (unbounded unless a sweep bounds them), a shard lost with its actor retried
on another one that is up (or on the same once it is back: the watchdog's exit relies on it), shards in flight
per actor (a threaded actor), and a kill when the pipeline fails or a sweep aborts it.

Resident engines (``cluster.residents``): where they are on (``resident_wanted``), the pool first leases idle
actors of the same engine key from the cluster's registry (loaded already: no start, no import, no load), starts
only the ones missing (named, detached, registered), keeps its lease alive while the run lasts, and gives them
back at the end; a run that failed gives them back to be killed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import uuid
from pathlib import Path
from typing import Any

from ..actors.context import DriverContext
from ..config.models import RunSpec

log = logging.getLogger(__name__)


#: ``prefer_resident``: the command line's ``--resident`` / ``--no-resident`` (None: as the run says)
_RESIDENT: list[bool | None] = [None]


def prefer_resident(on: bool | None) -> None:
    """This process's runs keep their generation actors (True), do not (False), or do as their
    ``execution.resident`` says (None)."""
    _RESIDENT[0] = on


def resident_wanted(lead: RunSpec) -> bool:
    """Whether this run's generation actors are resident engines: ``prefer_resident``'s choice, else
    ``execution.resident`` when set; by default yes on a cluster on this machine (the warm one, or a command's
    or a Python process's own), no at an address (a shared cluster keeps models only when a run asks). Only for
    backends whose load is worth keeping (``stays_loaded``)."""
    from ..cluster.connect import connection

    if not lead.model.stays_loaded() or lead.model.generates_inline():
        return False
    chosen = _RESIDENT[0] if _RESIDENT[0] is not None else lead.execution.resident
    return connection().local if chosen is None else bool(chosen)


def driver_context() -> DriverContext | None:
    """What the run's actors need of this command (its folder, variables, import path) on a cluster on this
    machine; None at an address, where the job's runtime environment sets workers up."""
    from ..cluster.connect import connection

    return DriverContext.capture() if connection().local else None


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


def engine_key(lead: RunSpec, gpus: float, k: int, restarts: int | None) -> tuple[str, str, str | None]:
    """(key, the key in words, the checkpoint's place) of a loaded engine: everything that makes one loaded
    engine different from another. The model's settings, with a local checkpoint named by its content (the
    same files from any folder are one engine; files changed on disk are another) and secrets and the
    variables its settings name (``${VAR}``) by their hash only; the GPUs per actor, the shards in flight and
    the restarts its actor was created with. The generation settings and the seed are not in it: they are set
    per run."""
    from .identity import model_identity

    ident = model_identity(lead)
    settings = json.loads(lead.model.model_dump_json())
    source = None
    path = lead.model.checkpoint_path()
    if path and "checkpoint_hash" in ident:
        source = str(Path(path).resolve())
        settings.pop("path", None)
    variables = sorted(set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", lead.model.model_dump_json())))
    body = json.dumps({"identity": ident, "settings": settings, "gpus": gpus, "in_flight": k, "restarts": restarts,
                       "variables": {v: hashlib.sha256(os.environ.get(v, "").encode()).hexdigest()
                                     for v in variables}}, sort_keys=True, default=str)
    key = hashlib.sha256(body.encode()).hexdigest()
    content = ident.get("checkpoint_hash") or ident.get("sha") or ident.get("commit") or ""
    return key, _words(lead, content, gpus), source


def _words(lead: RunSpec, content: str, gpus: float) -> str:
    """A resident's key as a reader sees it: ``hf word-problems float32 int8-dynamic #3f2a9c1e (1 GPU)``."""
    m = lead.model
    path = m.checkpoint_path()
    if path:
        name = Path(path).name if os.path.isdir(path) else path  # a local folder by its name; a Hub id, a URI
    else:
        name = getattr(m, "model", None) or getattr(m, "base_url", None) or ""
    extras = [str(v) for f in ("dtype", "quantization") if (v := getattr(m, f, None))]
    tail = [f"#{content[:8]}"] if content else []
    gpu = [f"({gpus:g} GPU{'s' if gpus != 1 else ''})"] if gpus else []
    return " ".join(w for w in [m.type, str(name), *extras, *tail, *gpu] if w)


class GenerationPool:
    """``n`` generation actors for the runs of one model, loading it from the moment they exist (or loaded
    already: resident)."""

    def __init__(self, ray: Any, lead: RunSpec, n: int, gpus: float, shards_in_flight: int,
                 restarts: int | None = None, *, resident: bool | None = None) -> None:
        self.ray = ray
        self.k = shards_in_flight
        self.name = lead.name
        self.driver = driver_context()
        self.resident = resident_wanted(lead) if resident is None else resident
        self.lease: str | None = None
        self.registry: Any = None
        self.reused = 0
        self._renewing: threading.Event | None = None
        self._renewer: threading.Thread | None = None
        opts: dict[str, Any] = {"num_cpus": 0, "num_gpus": gpus or None,
                                "max_restarts": -1 if restarts is None else restarts, "max_task_retries": 0}
        if self.k > 1:
            opts["max_concurrency"] = self.k
        self._lead_json = lead.model_dump_json(by_alias=True)
        self.actors: list[Any] = []
        new = n
        if self.resident:
            new = self._lease_residents(lead, n, gpus, restarts)
        started = self._start(opts, new, lead, gpus, restarts)
        self.actors += started
        self.warming = [a.warm.remote() for a in started]

    # ---------------------------------------------------------------- resident engines
    def _lease_residents(self, lead: RunSpec, n: int, gpus: float, restarts: int | None) -> int:
        """Lease idle residents with this model's key; returns how many actors are still to start."""
        from ..cluster import residents

        self.key, self.words, self.source = engine_key(lead, gpus, self.k, restarts)
        self.lease = uuid.uuid4().hex
        self.registry = residents.existing(self.ray)
        got: list = []
        existed = self.registry is not None
        if not existed:
            # no registry, so nothing is resident: start it, and the actors at once beside it (the calls made on
            # it wait for it to be up, while the actors load)
            self.registry = residents.start(self.ray)
        else:
            self.registry = residents.registry(self.ray)
            got = self.ray.get(self.registry.acquire.remote(self.key, n, self.lease, f"pid {os.getpid()} {self.name}"))
        self.actors = [h for _, h in got]
        self.reused = len(got)
        self._renewing = threading.Event()
        self._renewer = threading.Thread(target=self._renew, args=(self._renewing,), name="auditkit-lease",
                                         daemon=True)
        self._renewer.start()
        missing = n - len(got)
        if missing and gpus and existed:  # idle residents may hold the GPUs the new actors need
            self.ray.get(self.registry.make_room.remote(missing * gpus))
        if got:
            log.info("%s: %d resident generation actor%s of %s already loaded", self.name, len(got),
                     "s" if len(got) > 1 else "", self.words)
        return missing

    def _renew(self, stop: threading.Event) -> None:
        from ..cluster.residents import RENEW_S

        while not stop.wait(RENEW_S):
            with contextlib.suppress(Exception):
                self.ray.get(self.registry.renew.remote(self.lease), timeout=RENEW_S)

    def _start(self, opts: dict[str, Any], n: int, lead: RunSpec, gpus: float, restarts: int | None) -> list[Any]:
        from ..actors.host import GenerationActor

        if n <= 0:
            return []
        cls = self.ray.remote(GenerationActor)
        if not self.resident:
            return [cls.options(**opts).remote(self._lead_json, self.driver) for _ in range(n)]
        from ..cluster.residents import ENGINE_PREFIX, NAMESPACE

        names = [f"{ENGINE_PREFIX}{self.key[:12]}-{uuid.uuid4().hex[:8]}" for _ in range(n)]
        actors = [cls.options(name=name, namespace=NAMESPACE, lifetime="detached", **opts).remote(
            self._lead_json, self.driver) for name in names]
        # not waited for: the registry may still be starting; Ray keeps the calls' order
        self.registry.add.remote(self.lease, self.key, self.words, list(zip(names, actors)), gpus, self.source)
        return actors

    # ---------------------------------------------------------------- the pipeline's use
    def trim(self, n: int) -> None:
        """Keep ``n`` actors (the plan found fewer shards to generate than actors); stop the others (a resident
        one stays loaded for the next command)."""
        extra, self.actors = self.actors[n:], self.actors[:n]
        if not self.resident:
            from ..cluster.compat import kill_actors

            kill_actors(self.ray, extra)

    def stage(self, ds: Any, runs: dict[str, Any]) -> Any:
        """``ds`` with the generation stage: each shard to the least busy actor, ``k`` shards in flight each."""
        from ray.data import ActorPoolStrategy
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from ..actors.forward import ToGenerationActors

        calls = len(self.actors) * 2 * self.k
        # on the driver's node: a forwarder lost with another node would lose outputs its actors had stored, and
        # the retried shard would then read them from the cache, uncounted as generated
        here = NodeAffinitySchedulingStrategy(node_id=self.ray.get_runtime_context().get_node_id(), soft=True)
        # scheduling_strategy goes through ray_remote_args: quiet_ray_data filters its deprecation warning
        return ds.map_batches(
            ToGenerationActors,
            fn_constructor_kwargs={"actors": self.actors, "runs": runs, "driver": self.driver},
            scheduling_strategy=here,
            batch_size=1,
            batch_format="numpy",
            compute=ActorPoolStrategy(size=1, max_tasks_in_flight_per_actor=calls,
                                      max_concurrent_calls_per_actor=calls, enable_true_multi_threading=True),
            num_cpus=0,
            zero_copy_batch=True,
        )

    def close(self) -> None:
        """The run is done: resident actors go back to the registry, loaded; others close their backend (an
        engine that shuts down cleanly) and stop."""
        if self.resident:
            self._release(keep=True)
            return
        refs = []
        for a in self.actors:
            with contextlib.suppress(Exception):
                refs.append(a.close.remote())
        with contextlib.suppress(Exception):
            self.ray.wait(refs, num_returns=len(refs), timeout=10)
        self.kill()

    def interrupted(self) -> None:
        """The command was interrupted: resident actors stay loaded (the shards they were given finish and are
        stored); others are killed."""
        if self.resident:
            self._release(keep=True)
        else:
            self.kill()

    def kill(self) -> None:
        """A failed run or an aborted cell: kill the actors now (a hung or dead actor would not answer a polite
        close; a resident one's state is unknown)."""
        from ..cluster.compat import kill_actors

        actors, self.actors = self.actors, []
        kill_actors(self.ray, actors)  # one still being created is waited for: Ray would lose its GPUs
        if self.resident:
            self._release(keep=False)

    def _release(self, keep: bool) -> None:
        if self.lease is None:
            return
        lease, self.lease = self.lease, None
        if self._renewing is not None:
            self._renewing.set()
        with contextlib.suppress(Exception):
            self.ray.get(self.registry.release.remote(lease, keep), timeout=60)
        if self._renewer is not None:  # a thread left in a Ray call when the process exits crashes it
            from ..cluster.residents import RENEW_S

            self._renewer.join(RENEW_S + 1.0)  # its last renewal times out after RENEW_S

    def load_windows(self) -> list[dict[str, Any]]:
        """Each actor's ``ready()``: its process and model load times (waits for the actors to exist)."""
        return self.ray.get([a.ready.remote() for a in self.actors])
