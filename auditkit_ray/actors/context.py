"""What every stage actor knows: the runs it serves, and the process it is."""

from __future__ import annotations

import os
import socket
from typing import Any

from ..config.models import RunSpec
from ..store.base import ResultStore
from ..store.layout import RunLayout

#: what the driver hands each stage: run fingerprint -> (the run's spec as JSON, its store, its layout)
Runs = dict[str, tuple[str, ResultStore, RunLayout]]


def worker_info() -> dict[str, Any]:
    """This process: host, pid and the GPUs Ray gave it (none outside Ray)."""
    info: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        import ray

        info["gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 - outside Ray (or Ray not started): no GPUs of Ray's
        info["gpu_ids"] = []
    info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return info


class RunContext:
    """What a stage knows about each run it serves: spec, store and layout,
    keyed by the run fingerprint (one pipeline can carry several runs that
    share a model: evaluate_many, sweep cells)."""

    def __init__(self, runs: Runs) -> None:
        self.specs: dict[str, RunSpec] = {}
        self.stores: dict[str, ResultStore] = {}
        self.layouts: dict[str, RunLayout] = {}
        self.add(runs)

    def add(self, runs: Runs) -> None:
        """Serve these runs too (a generation actor started before its runs were planned learns them so)."""
        for k, v in runs.items():
            if k not in self.specs:
                self.stores[k], self.layouts[k] = v[1], v[2]
                self.specs[k] = RunSpec.model_validate_json(v[0])

    def of(self, stage: str, run: str) -> tuple[RunSpec, ResultStore, RunLayout]:
        """The run's spec, store and layout; a shard of a run this stage was not given fails naming both."""
        try:
            return self.specs[run], self.stores[run], self.layouts[run]
        except KeyError:
            from ..errors import RunError

            raise RunError(f"{stage}: a shard of run {run[:12]!r}, which this stage was not given") from None
