"""``simulated``: latency = fixed cost per batch + cost per generated token.

Sleeps instead of computing, so scaling on logical GPUs can be measured on a
CPU machine. ``fail_ids`` makes chosen samples fail (fault tests).
"""

from __future__ import annotations

import os
import time

from ..core.types import Generation
from .base import Backend, Request


class SimulatedBackend(Backend):
    uses_gpu = True

    load_in_thread = True

    def load(self) -> None:
        time.sleep(self.spec.load_s)

    def generate(self, requests: list[Request]) -> list[Generation]:
        s = self.spec
        ids = {r.sample_id for r in requests}
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
                out.append(Generation(error=f"simulated failure for sample {r.sample_id}", latency_s=per, latency_scope="batch"))
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
