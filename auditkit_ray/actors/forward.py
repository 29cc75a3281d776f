"""The generation stage of a pipeline whose generation actors the driver started itself, before the runs
were planned (``pipeline.genpool``): one light actor in Ray Data's pool hands each shard to the least busy of
them and returns its outputs. Ray Data keeps the streaming, the backpressure and the order of the stages;
the driver's actors keep the model loaded from the moment the cluster was up."""

from __future__ import annotations

import threading
from typing import Any

from ..errors import RAY_LOST_ERRORS, InfrastructureError
from .context import Runs


class ToGenerationActors:
    """Runs in a threaded Ray Data actor (one call per shard in flight); imports nothing heavy."""

    def __init__(self, actors: list[Any], runs: Any) -> None:
        self.actors = list(actors)
        self.runs: Runs = runs  # an object reference: each call resolves it in the generation actor
        self.busy = [0] * len(self.actors)
        self.lock = threading.Lock()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import ray

        with self.lock:
            i = min(range(len(self.actors)), key=self.busy.__getitem__)
            self.busy[i] += 1
        try:
            return ray.get(self.actors[i].run_batch.remote(batch, self.runs))
        except Exception as exc:
            if type(exc).__name__ in RAY_LOST_ERRORS:  # the actor is gone for good: say so in the run's terms
                first = (str(exc).splitlines() or [""])[0]
                raise InfrastructureError(f"pipeline failed: the generation actor was lost: {type(exc).__name__}: "
                                          f"{first}") from None
            raise
        finally:
            with self.lock:
                self.busy[i] -= 1
