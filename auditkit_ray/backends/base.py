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


class Backend(ABC):
    #: true when the backend wants a GPU (the pipeline requests ``num_gpus`` for it)
    uses_gpu: bool = False

    def __init__(self, spec: Any, generation: Any, seed: int = 0) -> None:
        self.spec = spec
        self.generation = generation
        self.seed = seed

    def load(self) -> None:
        """Load the model (once per actor). Default: nothing to load."""

    @abstractmethod
    def generate(self, requests: list[Request]) -> list[Generation]:
        """Generate for a batch; one Generation per request, same order."""

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
