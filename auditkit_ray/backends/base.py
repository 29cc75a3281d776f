"""The backend extension point: one required method, ``generate``.

A backend receives a whole batch (the batch composition is decided by the
pipeline from the shard alone, so it never depends on Ray's block layout or
the number of actors) and returns one ``Generation`` per request, in order.
A failure of one request is data (``Generation.error``); an exception from
``generate`` fails the whole shard, which the pipeline retries.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ..core.types import Generation


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
    #: true when the backend wants a GPU (the pipeline requests ``num_gpus`` for it)
    uses_gpu: bool = False
    #: true when generate() may be called from several threads at once (a generation actor with
    #: several shards in flight); otherwise the actor makes one call at a time and overlaps the rest
    thread_safe: bool = False
    #: true when load() may run in another thread than generate(): the generation actor then
    #: starts loading as soon as it is created, while Ray Data starts the rest of the pipeline
    load_in_thread: bool = False

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

    def close(self) -> None:
        """Release the model (end of run)."""


_BACKENDS: dict[str, str] = {
    "echo": "auditkit_ray.backends.echo:EchoBackend",
    "simulated": "auditkit_ray.backends.simulated:SimulatedBackend",
    "hf": "auditkit_ray.backends.hf:HFBackend",
    "precomputed": "auditkit_ray.backends.precomputed:PrecomputedBackend",
    "agent": "auditkit_ray.backends.agent:AgentBackend",
    "vllm": "auditkit_ray.backends.vllm:VLLMBackend",
    "api": "auditkit_ray.backends.api:APIBackend",
    "command": "auditkit_ray.backends.command:CommandBackend",
}


def create_backend(spec: Any, generation: Any, seed: int = 0) -> Backend:
    module_name, _, cls_name = _BACKENDS[spec.type].partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(spec, generation, seed)
