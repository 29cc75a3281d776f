"""The generation stage of a pipeline whose generation actors the driver started itself, before the runs
were planned (``pipeline.genpool``): one light actor in Ray Data's pool hands each shard to the least busy of
them and returns its outputs. Ray Data keeps the streaming, the backpressure and the order of the stages;
the driver's actors keep the model loaded from the moment the cluster was up.

An actor gets shards once it has answered a probe (``ready()``): a call to an actor that is restarting waits
until Ray places it again, which may be never (its node is gone and no other has room for it), and this stage
may itself be a restart of one lost with a node, knowing nothing of which actors are up. An actor that dies
with a shard (its process, or its node) fails that call at once: the shard goes to another actor that is up;
a shard sent to an actor that another shard then found lost is taken back and sent again. The dead one
restarts when Ray can place it again (on a node that replaces a lost one) and is used again once it answers;
when no actor is up and none can come back, the shard fails the pipeline as an ``InfrastructureError``
naming Ray's error."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from ..errors import RAY_LOST_ERRORS, InfrastructureError
from .context import DriverContext, Runs

#: how long a shard waits for a lost generation actor to come back when none is up
WAIT_FOR_ACTOR_S = 600.0
#: a probe that found the actor restarting (Ray's ActorUnavailableError) is sent again after this long
REPROBE_S = 0.5
#: how often a shard waiting for its actor looks whether another shard found that actor lost
WATCH_S = 1.0
#: attempts at one shard on actors that die with it (plus two per actor), before it fails the pipeline
MAX_ATTEMPTS = 10


class ToGenerationActors:
    """Runs in a threaded Ray Data actor (one call per shard in flight); imports nothing heavy."""

    def __init__(self, actors: list[Any], runs: Runs, driver: DriverContext | None = None,
                 per_actor: int | None = None, stop: threading.Event | None = None) -> None:
        import ray

        self.actors = list(actors)
        #: shards in flight an actor that is up takes while another is still starting: the rest wait for the
        #: latecomer rather than queue on the first one up (None: no limit)
        self.per_actor = per_actor
        self.runs = ray.put(runs)  # once: each call passes the reference, resolved in the generation actor
        self.driver = ray.put(driver)
        self.busy = [0] * len(self.actors)
        #: shards sent to each actor so far: between actors equally busy, the one sent fewest goes first, so
        #: shards that arrive one at a time (each finished before the next comes) spread over every actor up
        #: rather than all going to the first
        self.sent = [0] * len(self.actors)
        # actor -> its pending ready() probe, or when to probe it again (float), or None: gone for good;
        # every actor is probed before its first shard
        self.down: dict[int, Any] = {i: a.ready.remote() for i, a in enumerate(self.actors)}
        self.lock = threading.Lock()
        #: set by a driver that stops waiting (the direct pipeline, interrupted or failed): a call still waiting
        #: for its shard gives up within WATCH_S (the shard finishes in its actor), so the driver's threads end
        #: before the process shuts Ray down under them
        self.stop = stop

    def _up(self) -> list[int]:
        """Actors to send to; a lost actor whose probe answered is up again."""
        import ray

        now = time.monotonic()
        for i, probe in list(self.down.items()):
            if probe is None:
                continue
            if isinstance(probe, float):  # restarting when last probed: asked again from this time on
                if now >= probe:
                    self.down[i] = self.actors[i].ready.remote()
                continue
            ready, _ = ray.wait([probe], timeout=0)
            if ready:
                try:
                    ray.get(ready[0])
                    del self.down[i]
                except Exception as exc:  # noqa: BLE001 - unavailable: restarting, probed again; else gone
                    self.down[i] = now + REPROBE_S if type(exc).__name__ == "ActorUnavailableError" else None
        return [i for i in range(len(self.actors)) if i not in self.down]

    def _pick(self, last: BaseException | None) -> int:
        import ray

        deadline = time.monotonic() + WAIT_FOR_ACTOR_S
        while True:
            with self.lock:
                up = self._up()
                pending = [p for p in self.down.values() if p is not None and not isinstance(p, float)]
                restarting = any(isinstance(p, float) for p in self.down.values())
                room = [i for i in up if self.per_actor is None or self.busy[i] < self.per_actor]
                if room or (up and not pending):
                    i = min(room or up, key=lambda j: (self.busy[j], self.sent[j]))
                    self.busy[i] += 1
                    self.sent[i] += 1
                    return i
            if self.stop is not None and self.stop.is_set():
                raise Stopped("the driver stopped waiting for shards")
            if not up and (not (pending or restarting) or time.monotonic() > deadline):
                what = f"{type(last).__name__}: {(str(last).splitlines() or [''])[0]}" if last else "none is up"
                raise InfrastructureError(f"pipeline failed: the generation actors were lost: {what}")
            if pending:  # an actor starting; with others up and full, a shard of theirs may finish first
                ray.wait(pending, num_returns=1, timeout=0.2 if up else 1.0)
            else:
                time.sleep(REPROBE_S / 5)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        last: BaseException | None = None
        for _ in range(MAX_ATTEMPTS + 2 * len(self.actors)):
            i = self._pick(last)
            try:
                return self._result(i, self.actors[i].run_batch.remote(batch, self.runs, self.driver))
            except _TakenBack as exc:
                last = exc
            except Exception as exc:
                if type(exc).__name__ not in RAY_LOST_ERRORS:
                    raise
                last = exc
                with self.lock:  # lost with the shard: another actor takes it; this one is probed
                    if i not in self.down:
                        self.down[i] = self.actors[i].ready.remote()
            finally:
                with self.lock:
                    self.busy[i] -= 1
        raise InfrastructureError(f"pipeline failed: a shard's generation actor was lost in every attempt: "
                                  f"{type(last).__name__}: {(str(last).splitlines() or [''])[0]}")

    def _result(self, i: int, ref: Any) -> dict[str, Any]:
        """The call's outputs; taken back (:class:`_TakenBack`, the call cancelled) when its actor is found
        lost while it waits: it may wait for a restart that never comes."""
        import ray

        while True:
            done, _ = ray.wait([ref], timeout=WATCH_S)
            if done:
                return ray.get(done[0])
            if self.stop is not None and self.stop.is_set():
                raise Stopped("the driver stopped waiting for this shard")
            with self.lock:
                lost = i in self.down
            if lost:
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
                raise _TakenBack(f"generation actor {i} was lost while the shard waited for it")


class Stopped(Exception):
    """The driver stopped waiting (``ToGenerationActors.stop``): the shard is left to its actor."""


class _TakenBack(Exception):
    """A shard's call taken back from an actor found lost while the shard waited for it."""
