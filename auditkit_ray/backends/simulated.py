"""``simulated``: latency = fixed cost per batch + cost per generated token.

Sleeps instead of computing, so scaling on logical GPUs can be measured on a
CPU machine. ``fail_ids`` makes chosen samples fail (fault tests).
"""

from __future__ import annotations

import os
import time
from typing import ClassVar, Literal

from pydantic import Field

from ..core.backends import BackendSettings
from ..core.types import Generation
from .base import Backend, Request


class SimulatedSettings(BackendSettings):
    """Sleeps like a GPU would: ``fixed_cost_s`` per batch plus
    ``per_token_s`` per generated token, for scaling tests and benchmarks."""

    type: Literal["simulated"]
    fixed_cost_s: float = Field(0.01, ge=0)
    per_token_s: float = Field(0.0005, ge=0)
    output: Literal["target", "prompt", "constant"] = "target"
    constant: str = ""
    tokens_per_output: int = Field(8, ge=0)
    batch_size: int = Field(16, ge=1)
    fail_ids: list[str] = Field(default_factory=list, description="sample ids whose generation raises (fault tests)")
    oom_ids: list[str] = Field(default_factory=list, description="a batch holding one of these ids runs out of "
                               "memory (fault tests)")
    hang_ids: list[str] = Field(default_factory=list, description="a batch holding one of these ids hangs "
                                "(fault tests)")
    hang_marker: str | None = Field(None, description="with hang_ids: hang only while this file does not exist yet "
                                    "(it is created, holding the pid of the process that hung), so a retry succeeds")
    exit_ids: list[str] = Field(default_factory=list, description="a batch holding one of these ids kills its own "
                                "process, as a crashing engine would (fault tests)")
    load_s: float = Field(0.0, ge=0, description="seconds the model load takes (once per generation actor)")
    gpu: bool = Field(True, description="request GPUs like a real model would")
    num_gpus: float = Field(1.0, gt=0, description="GPUs per generation actor when the cluster has GPUs")

    not_in_identity: ClassVar[frozenset[str]] = frozenset(
        {"batch_size", "gpu", "num_gpus", "hang_ids", "hang_marker", "oom_ids", "load_s", "exit_ids"})

    def needs_gpu(self) -> bool:
        return self.gpu

    def stays_loaded(self) -> bool:
        return True  # it stands for a model on a GPU: its load (``load_s``) is what a resident engine saves

    def load_in_thread(self) -> bool:
        return True

    def reads_targets(self) -> bool:
        return self.output == "target"


class SimulatedBackend(Backend):
    def load(self) -> None:
        time.sleep(self.spec.load_s)

    def generate(self, requests: list[Request]) -> list[Generation]:
        s = self.spec
        ids = {r.sample_id for r in requests}
        if ids & set(s.exit_ids):
            os._exit(70)
        if ids & set(s.oom_ids):
            raise MemoryError(f"simulated out of memory on a batch of {len(requests)}")
        if ids & set(s.hang_ids):
            if s.hang_marker is None or not os.path.exists(s.hang_marker):
                if s.hang_marker:
                    with open(s.hang_marker, "w") as f:
                        f.write(str(os.getpid()))  # which process hung
                time.sleep(3600)  # a hung engine: the watchdog must notice
        t0 = time.perf_counter()
        time.sleep(s.fixed_cost_s + s.per_token_s * s.tokens_per_output * len(requests))
        per = (time.perf_counter() - t0) / max(1, len(requests))
        out = []
        for r in requests:
            if r.sample_id in s.fail_ids:
                out.append(Generation(error=f"simulated failure for sample {r.sample_id}", latency_s=per,
                                      latency_scope="batch"))
                continue
            if s.output == "target":
                text = r.target or ""
            elif s.output == "prompt":
                text = r.prompt if isinstance(r.prompt, str) else str(r.prompt[-1].get("content"))
            else:
                text = s.constant
            out.append(Generation(
                text=text, completion_tokens=s.tokens_per_output, token_source="engine",
                latency_s=per, latency_scope="batch", finish_reason="length",
            ))
        return out
