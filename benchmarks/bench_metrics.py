"""Metrics used by the benchmarks (importable as ``bench_metrics:Class`` once
``benchmarks/`` is on ``PYTHONPATH``, as the benchmark scripts arrange for
themselves and for Ray's workers)."""

from __future__ import annotations

import time

from auditkit_ray.core.metric import Direction, Metric
from auditkit_ray.core.types import Score


class SleepyJudge(Metric):
    """Stands in for a judge of known cost: sleeps ``seconds`` per sample
    (like waiting on a judge model or an API), then scores 1."""

    name = "sleepy_judge"
    direction = Direction.MAXIMIZE
    family = "judge"

    def __init__(self, seconds: float = 0.01, **kw) -> None:
        super().__init__(seconds=float(seconds), **kw)

    def score(self, sample, generation, context) -> Score:
        time.sleep(self.params["seconds"])
        return Score.scored(self.name, 1.0)
