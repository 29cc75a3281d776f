"""Generation: a shard's outputs, from the generation cache when stored, else from the run's backend (then
cached).

``Generator`` is the one place a backend is loaded and called (the load and its retry, the shard watchdog,
retries, the generation cache, shards in flight sharing one backend) and imports nothing of Ray. It has two
hosts: the generation actor (``actors.host``, GPU-pinned through ``num_gpus``, the driver's own or a
resident one), and the first scoring stage for a backend with no model (``generates_inline``). It writes a
shard's outputs to the result store atomically before returning, so a retried shard finds the finished file
and does not redo the work.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from typing import Any

from ..backends.base import Request, create_backend
from ..config.models import RunSpec
from ..core.gcpause import gc_paused
from ..core.types import Generation
from ..data.images import inline_s3_images
from ..errors import AuditKitError, ModelLoadError, RunError
from ..sources import materialize  # a Hub id or s3:// checkpoint: fetched to this node, a local path
from ..store.base import ResultStore
from ..store.layout import RunLayout
from . import tables
from .context import DriverContext, RunContext, Runs, worker_info
from .services import SERVICES
from .shard import ShardPayload, StageFields, payload_batch, read_batch

log = logging.getLogger(__name__)

FIELDS = StageFields("Generator", reads=("run", "items"),
                     adds=("generations", "generated", "generation_s", "generated_at", "worker", "model_size_bytes"))
#: a shard's outputs read from the generation cache (no backend)
CACHED_FIELDS = StageFields("stored generations", reads=("run",), adds=("generations", "generated"))


class _SharedClock:
    """Generation time of shards that overlap in one actor, split between
    them: each instant the actor's backend is busy counts once, shared
    equally by the shards in flight then, so the shards' times add up to the
    actor's busy time (not k times it with k shards at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._k = 0
        self._v = 0.0  # virtual time: d(v)/dt = 1 / shards in flight, while any is
        self._t = time.perf_counter()

    def _advance(self) -> float:
        now = time.perf_counter()
        if self._k:
            self._v += (now - self._t) / self._k
        self._t = now
        return self._v

    def start(self) -> float:
        with self._lock:
            v = self._advance()
            self._k += 1
            return v

    def stop(self, started: float) -> float:
        with self._lock:
            v = self._advance()
            self._k -= 1
            return v - started


class _SettingsGate:
    """Shards in flight at once in one actor share its backend, whose
    generation settings and seed are per run: shards of runs with other
    settings wait until the backend's calls in flight are done."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._key: str | None = None
        self._n = 0

    def enter(self, key: str) -> bool:
        """Returns true when the caller must apply its settings."""
        with self._cond:
            while self._n and self._key != key:
                self._cond.wait()
            switch = self._key != key
            self._key = key
            self._n += 1
            return switch

    def leave(self) -> None:
        with self._cond:
            self._n -= 1
            if not self._n:
                self._cond.notify_all()


def _thread_safe(backend: Any) -> bool:
    """Whether the backend's calls may overlap: its settings say (``thread_safe()``), unless the backend
    object says otherwise for itself (a ``thread_safe`` attribute of its own)."""
    flag = getattr(backend, "thread_safe", None)
    return flag if isinstance(flag, bool) else bool(backend.spec.thread_safe())


def stored_generations(payload: ShardPayload, store: ResultStore, layout: RunLayout) -> ShardPayload:
    """The shard's generations from the generation cache (no backend)."""
    CACHED_FIELDS.require(payload)
    payload.generations = tables.generations_from_table(store.read_table(layout.gen_shard(payload.shard)))
    payload.generated = False
    return payload


class Generator:
    """May run several shards at once (``execution.generation_shards_in_flight``,
    in a threaded actor): the backend loads once; its calls overlap only if
    it is ``thread_safe`` (the api backend), else they take turns while the
    shards' other work (payloads, Parquet writes) overlaps; shards with other
    generation settings wait their turn; and each shard's generation time is
    its share of the actor's busy time.

    The backend is closed (``Backend.close``) by ``close``, which its host calls (and ``__del__``, for a host
    that is dropped)."""

    fields = FIELDS

    def __init__(self, runs: Runs, threads: int = 1, lead: str | None = None,
                 driver: DriverContext | None = None) -> None:
        self.ctx = RunContext(runs, driver)
        self.threads = threads
        self.backend = None
        self.worker = worker_info()
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._gate = _SettingsGate()
        self._clock = _SharedClock()
        self._preload: tuple[threading.Thread, dict[str, Any]] | None = None
        self._unloaded = None  # built here, loaded by the first shard (backends that load in the generating thread)
        self._closed = False
        self._load_started = 0.0
        self._load_started_at: float | None = None
        self._load_ended_at: float | None = None
        # the runs of one pipeline share a model; an actor started before its runs were planned gets the first
        # run's spec (``lead``) and learns the runs with their shards (``run_batch``)
        first = RunSpec.model_validate_json(lead) if lead else next(iter(self.ctx.specs.values()), None)
        self._lead = first
        if first is not None:
            backend = create_backend(materialize(first.model), first.generation, first.seed,
                                     services=SERVICES)
            if not first.model.load_in_thread():
                self._unloaded = backend
            else:  # load now, while Ray Data starts the other actors and sends the first shard
                box: dict[str, Any] = {}

                def preload() -> None:
                    try:
                        backend.load()
                        box["backend"] = backend
                    except BaseException as exc:  # noqa: BLE001 - raised by the first shard's _get_backend
                        box["error"] = exc.with_traceback(None)
                    finally:
                        box["ended_at"] = time.time()

                thread = threading.Thread(target=preload, name="auditkit-model-load", daemon=True)
                self._load_started_at = time.time()
                thread.start()
                self._preload = (thread, box)
                self._load_started = time.monotonic()

    def close(self) -> None:
        """Close the backend this stage loaded (once; a backend that failed to close is logged, not raised:
        the shards it generated are stored already)."""
        if self._closed:
            return
        self._closed = True
        backend, self.backend = self.backend, None
        if backend is None and self._preload is not None:  # loaded in the background, never used
            thread, box = self._preload
            thread.join(5.0)  # a load that hung is not waited for
            backend = box.get("backend")
        self._preload = self._unloaded = None
        if backend is not None:
            try:
                backend.close()
            except Exception as exc:  # noqa: BLE001 - see the docstring
                log.warning("closing the %s backend failed: %s: %s", type(backend).__name__, type(exc).__name__, exc)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit, modules may be gone already
            self.close()

    def _get_backend(self, spec: RunSpec):
        if self.backend is None:
            with self._load_lock:
                if self.backend is None:
                    try:
                        backend = self._load(spec)
                    except AuditKitError:
                        raise
                    except BaseException as exc:  # noqa: BLE001 - a model that cannot load fails the run
                        first = (str(exc).splitlines() or [""])[0]
                        raise ModelLoadError(f"model load failed: {type(exc).__name__}: {first}") from None
                    if "torch" in sys.modules and self.threads:  # in this thread (OpenMP's count is per thread)
                        sys.modules["torch"].set_num_threads(self.threads)
                    try:
                        backend.warm_up()  # the first shard then carries no device warm-up
                    except Exception as exc:  # noqa: BLE001 - the first shard pays it instead
                        log.warning("warming up the %s backend failed: %s: %s", type(backend).__name__,
                                    type(exc).__name__, exc)
                    self.backend = backend
        return self.backend

    def _load(self, spec: RunSpec) -> Any:
        """The loaded backend, within ``execution.load_timeout_s`` for a backend that loads in a thread of its own
        (a load that hangs cannot be interrupted: the error fails the pipeline, whose actors are then killed).
        A load that raised is tried once more, from a fresh backend (a passing hiccup of a disk or a mount);
        what the second raises fails the run."""
        timeout = spec.execution.load_timeout_s
        if self._preload is not None:  # started in __init__: wait for it
            thread, box = self._preload
            thread.join(None if timeout is None else max(0.0, timeout - (time.monotonic() - self._load_started)))
            if thread.is_alive():
                raise ModelLoadError(f"model load did not finish within execution.load_timeout_s={timeout:g}s")
            self._preload = None
            self._load_ended_at = box.get("ended_at")
            if "error" not in box:
                return box["backend"]
            if isinstance(box["error"], AuditKitError):
                raise box["error"]
            log.warning("loading the model failed (%s: %s); trying once more", type(box["error"]).__name__,
                        box["error"])
        else:
            backend = self._unloaded or create_backend(materialize(spec.model), spec.generation, spec.seed,
                                                       services=SERVICES)
            self._unloaded = None
            try:
                self._load_started_at = time.time()
                backend.load()  # once per actor, reused for every shard of every run it serves
                self._load_ended_at = time.time()
                return backend
            except AuditKitError:
                raise
            except Exception as exc:  # noqa: BLE001 - tried once more below
                log.warning("loading the model failed (%s: %s); trying once more", type(exc).__name__, exc)
        backend = create_backend(materialize(spec.model), spec.generation, spec.seed, services=SERVICES)
        backend.load()
        return backend

    def _call_backend(self, spec: RunSpec, requests: list[Request]) -> list[Generation]:
        backend = self._get_backend(spec)
        # runs sharing a model may differ in generation settings and seed
        if self._gate.enter(json.dumps([spec.generation.model_dump(mode="json"), spec.seed], sort_keys=True)):
            backend.generation, backend.seed = spec.generation, spec.seed
        try:
            if _thread_safe(backend):
                gens = backend.run(requests)
            else:  # a model in the actor: one call at a time; the shards' other work still overlaps
                with self._call_lock:
                    gens = backend.run(requests)
        finally:
            self._gate.leave()
        if len(gens) != len(requests):
            raise RuntimeError(f"backend returned {len(gens)} generations for {len(requests)} requests")
        return gens

    def _watched(self, spec: RunSpec, shard: int, store: ResultStore, layout: RunLayout,
                 requests: list[Request]) -> list[Generation]:
        """Run the backend under the shard watchdog (``execution.shard_timeout_s``).

        A call that hangs cannot be interrupted from Python, so the actor
        records the attempt in the store and exits; Ray restarts the actor
        and retries the shard. After ``max_shard_retries`` timed-out attempts
        the shard's samples are recorded as errors instead."""
        timeout = spec.execution.shard_timeout_s
        if not timeout:
            return self._call_backend(spec, requests)
        marker = f"{layout.gen_dir}/.timeouts-{RunLayout.shard_name(shard)}"
        earlier = len(store.read_bytes(marker)) if store.exists(marker) else 0
        if earlier > spec.execution.max_shard_retries:
            msg = f"shard {shard} timed out after {timeout:g}s in {earlier} attempts"
            return [Generation(error=msg) for _ in requests]
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["out"] = self._call_backend(spec, requests)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["exc"] = exc

        worker = threading.Thread(target=target, daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            store.replace(marker, b"x" * (earlier + 1))
            log.warning("auditkit-ray watchdog: shard %d generation exceeded %gs; restarting this actor "
                        "(attempt %d of %d)", shard, timeout, earlier + 1, spec.execution.max_shard_retries + 1)
            os._exit(75)  # Ray restarts the actor and retries the shard
        if "exc" in box:
            raise box["exc"]
        return box["out"]

    def _generate(self, spec: RunSpec, shard: int, store: ResultStore, layout: RunLayout,
                  requests: list[Request]) -> tuple[list[dict], float, bool]:
        retries = spec.execution.max_shard_retries
        last: Exception | None = None
        for attempt in range(retries + 1):
            try:
                # the model loads once per actor, before the clock and the watchdog start: a
                # slow load is neither a hung shard nor generation time
                self._get_backend(spec)
                t0 = self._clock.start()
                try:
                    gens = self._watched(spec, shard, store, layout, requests)
                finally:
                    seconds = self._clock.stop(t0)
                return [g.model_dump(mode="json") for g in gens], seconds, not any(
                    (g.error or "").startswith(f"shard {shard} timed out") for g in gens)
            except AuditKitError:
                raise  # fatal: engine dead, bad model
            except MemoryError as exc:
                raise RunError(f"out of memory generating shard {shard} ({exc}); lower the backend's batch_size or "
                               "execution.shard_size, or give each actor more memory") from None
            except Exception as exc:  # noqa: BLE001 - retried, then recorded per sample
                if "OutOfMemory" in type(exc).__name__:
                    raise RunError(f"out of memory generating shard {shard} ({type(exc).__name__}: {exc}); "
                                   "lower the backend's batch_size or execution.shard_size") from None
                last = exc
                time.sleep(min(2.0, 0.1 * 2**attempt))
        msg = f"shard {shard} failed after {retries + 1} attempts: {type(last).__name__}: {last}"
        return [Generation(error=msg).model_dump(mode="json") for _ in requests], 0.0, False

    def generate_shard(self, payload: ShardPayload) -> ShardPayload:
        """The shard's generations: from the generation cache when stored,
        else from the backend (then cached)."""
        FIELDS.require(payload)
        i = payload.shard
        spec, store, layout = self.ctx.of(FIELDS.stage, payload.run)
        rel = layout.gen_shard(i)
        if store.exists(rel):
            stored_generations(payload, store, layout)
        else:
            # s3:// images reach the backend as data: URLs; the items (and so the table) keep the URIs
            requests = [Request(**inline_s3_images(spec.dataset, it["request"])) for it in payload.items]
            gens, seconds, ok = self._generate(spec, i, store, layout, requests)
            if ok:  # a shard that failed wholesale is not cached: a re-run retries it
                store.write_table(rel, tables.generation_table(i, payload.items, gens))
            payload.generations = gens
            payload.generated = True
            payload.generation_s = seconds
        payload.generated_at = time.time()
        payload.worker = self.worker
        if self.backend is not None:
            payload.model_size_bytes = self.backend.model_size_bytes()
        return payload

    @gc_paused()
    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        rows = read_batch(batch)
        return payload_batch([self.generate_shard(p) for p, _ in rows], [cell for _, cell in rows])

    # ------------------------------------------------------------------ for its hosts
    def ready(self) -> dict[str, Any]:
        """This process, and when its model load started and ended (wall clock; the end is None while it
        loads). Waits for nothing."""
        box = self._preload[1] if self._preload is not None else {}
        return {"worker": self.worker, "load_started_at": self._load_started_at,
                "load_ended_at": box.get("ended_at", self._load_ended_at)}

    def warm(self) -> None:
        """Load the model now, in the thread that generates (a backend that loads in a thread of its own has
        started already), and warm it up (``Backend.warm_up``): the host calls this first, before any shard is
        planned. A load that fails here is tried again, and reported, by the first shard."""
        if self._lead is not None and self.backend is None:
            with contextlib.suppress(Exception):
                self._get_backend(self._lead)

    def rest(self) -> None:
        """Between two commands' leases of a resident engine: let the backend give back what it holds only
        while it generates (``Backend.rest``)."""
        backend = self.backend
        if backend is not None:
            with contextlib.suppress(Exception):
                backend.rest()

    def serve(self, runs: Runs) -> None:
        """Serve these runs too (learnt once per run, from the shards' pipeline)."""
        if self.ctx.changed(runs):
            with self._load_lock:
                self.ctx.add(runs)
