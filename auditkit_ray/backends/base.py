"""The backend extension point: one required method, ``generate``.

A backend is one module of this package (or of yours): its settings model (a
``BackendSettings`` subclass, which declares the capabilities) and its
implementation (a ``Backend`` subclass), registered once with
``auditkit_ray.core.backends.register_backend``.

A backend receives a whole batch (the batch composition is decided by the
pipeline from the shard alone, so it never depends on Ray's block layout or
the number of actors) and returns one ``Generation`` per request, in order.
A failure of one request is data (``Generation.error``); an exception from
``generate`` fails the whole shard, which the pipeline retries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from ..core.backends import BackendServices, BackendSettings, create_backend
from ..core.types import Generation

__all__ = ["Backend", "BackendServices", "BackendSettings", "Request", "create_backend", "map_concurrently"]

T = TypeVar("T")


@dataclass
class Request:
    sample_id: str
    prompt: str | list[dict[str, Any]]  # text, or chat messages when prompt.chat is set
    repeat: int = 0
    target: str | None = None  # only the echo/simulated backends read it
    metadata: dict[str, Any] = field(default_factory=dict)
    #: "generate", or "loglikelihood": score ``continuation`` given ``prompt``
    kind: str = "generate"
    continuation: str | None = None
    choice: int | None = None  # which of the sample's choices the continuation is


class Backend(ABC):
    """What runs a backend's settings (``auditkit_ray.core.backends.BackendSettings``):
    the settings declare the capabilities the pipeline reads; this class does
    the work. ``services`` is what the actor layer lends backends that read
    stored results (``BackendServices``), or None."""

    services: BackendServices | None = None

    def __init__(self, spec: Any, generation: Any, seed: int = 0) -> None:
        self.spec = spec
        self.generation = generation
        self.seed = seed

    def load(self) -> None:
        """Load the model (once per actor). Default: nothing to load."""

    @abstractmethod
    def generate(self, requests: list[Request]) -> list[Generation]:
        """Generate for a batch; one Generation per request, same order."""

    def loglikelihood(self, pairs: list[tuple[str, str]]) -> list[tuple[float, bool]]:
        """Sum of log-probabilities of each continuation given its context, and
        whether it is the greedy continuation. Backends that can, override."""
        from ..errors import RunError

        raise RunError(f"backend {type(self).__name__} cannot score log-likelihoods; use hf or vllm")

    def run(self, requests: list[Request]) -> list[Generation]:
        """Generation and log-likelihood requests of one batch, results in order."""
        out: list[Generation | None] = [None] * len(requests)
        gen = [i for i, r in enumerate(requests) if r.kind == "generate"]
        ll = [i for i, r in enumerate(requests) if r.kind == "loglikelihood"]
        if gen:
            for i, g in zip(gen, self.generate([requests[i] for i in gen])):
                out[i] = g
        if ll:
            pairs = []
            for i in ll:
                prompt = requests[i].prompt
                if not isinstance(prompt, str):
                    raise ValueError("log-likelihood requests take a text prompt, not chat messages")
                pairs.append((prompt, requests[i].continuation or ""))
            for i, (lp, greedy) in zip(ll, self.loglikelihood(pairs)):
                r = requests[i]
                out[i] = Generation(text=r.continuation or "", finish_reason="loglikelihood",
                                    metadata={"loglikelihood": lp, "is_greedy": greedy, "choice": r.choice})
        return [g if g is not None else Generation(error="no result") for g in out]

    def model_size_bytes(self) -> int | None:
        return None

    def warm_up(self) -> None:
        """Right after ``load``, in the generating thread: whatever the first real call would otherwise pay
        once (a GPU's kernel compilation and allocator warm-up), done while the driver still plans. It must
        leave no state that changes an output. Default: nothing."""

    def rest(self) -> None:
        """Between two commands of a model kept loaded (``execution.resident``): give back what only a running
        generation needs (vLLM's sleep mode frees its KV cache on a GPU); the next call takes it back. Default:
        nothing."""

    def close(self) -> None:
        """Release the model: the pipeline calls it when the actor is done with
        the model (end of run, before the next model is placed on its GPUs)."""


def map_concurrently(fn: Callable[[Request], T], requests: list[Request], concurrency: int) -> list[T]:
    """``fn`` over the requests, at most ``concurrency`` at once in threads, results in order."""
    workers = min(concurrency, len(requests))
    if workers <= 1:
        return [fn(r) for r in requests]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, requests))
