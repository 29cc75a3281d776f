"""The generation actor: the one Ray host of a ``Generator`` (GPU-pinned through ``num_gpus``).

The driver starts these actors itself as soon as the cluster is up (``pipeline.genpool``), so the model loads
while the runs are planned; a pipeline reaches them through one light forwarding actor (``actors.forward``).
Where resident engines are on (``cluster.residents``) an actor outlives the command that started it and
serves later commands whose model is the same: each call carries the context of the command it works for
(``actors.context``), and ``rest`` / ``memory`` serve the registry between commands."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..core.gcpause import gc_paused
from .context import DriverContext, Runs, enter
from .generate import Generator


class GenerationActor:
    """One loaded backend in a Ray actor, serving the shards of one or more runs (and, resident, of one
    command after another)."""

    def __init__(self, lead: str, driver: DriverContext | None = None, threads: int = 1) -> None:
        self.generator = Generator({}, threads=threads, lead=lead, driver=driver)
        self._driver = driver

    def ready(self) -> dict[str, Any]:
        """This actor's process, and when its model load started and ended. Waits for nothing."""
        return self.generator.ready()

    def warm(self) -> None:
        """Load (and warm up) the model now: the driver calls this right after creating the actor."""
        self.generator.warm()

    @gc_paused()
    def run_batch(self, batch: dict[str, Any], runs: Runs, driver: DriverContext | None = None) -> dict[str, Any]:
        """One Ray Data batch of shards from the forwarding stage, with the runs they belong to (learnt once per
        run) and the context of the command they come from."""
        if driver is not None and driver != self._driver:
            enter(driver)
            self._driver = driver
        self.generator.serve(runs)
        return self.generator(batch)

    def rest(self) -> None:
        """The command that leased this resident actor is done; the next may be a while."""
        self.generator.rest()

    def memory(self) -> dict[str, Any]:
        """What this actor holds: its process's resident memory and its children's (an engine's own processes),
        the GPU memory its framework reserved, where it runs."""
        rss = _rss(os.getpid()) + sum(_rss(c) for c in _children(os.getpid()))
        gpu = None
        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    gpu = int(sum(torch.cuda.memory_reserved(i) for i in range(torch.cuda.device_count())))
            except Exception:  # noqa: BLE001 - no CUDA answer: unknown, not zero
                gpu = None
        return {"pid": os.getpid(), "rss_bytes": rss, "gpu_bytes": gpu, "host": self.generator.worker.get("host"),
                "loaded": self.generator.backend is not None}

    def close(self) -> None:
        self.generator.close()


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Linux: ``/proc/<pid>/task/*/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            todo.extend(kids)
    return out
