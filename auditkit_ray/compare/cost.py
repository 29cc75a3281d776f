"""Quality against cost: each metric beside latency, throughput, tokens, model
size and cost, and the Pareto front.

The front is direction-aware on the quality metric (a lower-is-better metric
prefers low values) and lower-is-better on the cost axis. A run is on the
front when no other run is at least as good on quality and at least as cheap,
and strictly better on one of the two. Runs lacking either number are left
out with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..core.metric import Direction
from ..core.result import RunResult
from ..errors import ConfigError


def _tokens(r: RunResult) -> float | None:
    t = r.tokens.prompt + r.tokens.completion
    return float(t) if t else None


#: cost axes (all lower-is-better) and how to read them from a RunResult
AXES: dict[str, Callable[[RunResult], float | None]] = {
    "cost": lambda r: r.perf.cost,
    "latency_p50_s": lambda r: r.perf.latency_p50_s,
    "latency_p95_s": lambda r: r.perf.latency_p95_s,
    "latency_p99_s": lambda r: r.perf.latency_p99_s,
    "model_size_bytes": lambda r: None if r.perf.model_size_bytes is None else float(r.perf.model_size_bytes),
    "tokens": _tokens,
    "completion_tokens": lambda r: float(r.tokens.completion) if r.tokens.completion else None,
    "wall_s": lambda r: r.perf.wall_s,
}
#: tried in this order when the axis is "auto"
AUTO_AXES = ("cost", "latency_p50_s", "model_size_bytes", "tokens", "wall_s")


@dataclass
class CostRow:
    run: str
    metrics: dict[str, float | None]
    latency_p50_s: float | None
    latency_p95_s: float | None
    latency_p99_s: float | None
    latency_scope: str | None
    throughput_samples_per_s: float | None
    tokens_per_s: float | None
    prompt_tokens: int
    completion_tokens: int
    model_size_bytes: int | None
    cost: float | None
    wall_s: float | None


def cost_row(label: str, r: RunResult, metrics: Sequence[str]) -> CostRow:
    p = r.perf
    return CostRow(run=label, metrics={m: (r.metrics[m].mean if m in r.metrics else None) for m in metrics},
                   latency_p50_s=p.latency_p50_s, latency_p95_s=p.latency_p95_s, latency_p99_s=p.latency_p99_s,
                   latency_scope=p.latency_scope, throughput_samples_per_s=p.throughput_samples_per_s,
                   tokens_per_s=p.tokens_per_s, prompt_tokens=r.tokens.prompt,
                   completion_tokens=r.tokens.completion, model_size_bytes=p.model_size_bytes,
                   cost=p.cost, wall_s=p.wall_s)


def choose_axis(axis: str, runs: Sequence[RunResult]) -> tuple[str | None, str | None]:
    """(axis, note). ``auto`` picks the first of AUTO_AXES every run has, else
    the first at least two runs have."""
    if axis != "auto":
        if axis not in AXES:
            raise ConfigError(f"unknown cost axis {axis!r}: use auto or one of {', '.join(AXES)}")
        return axis, None
    for need_all in (True, False):
        for name in AUTO_AXES:
            have = sum(AXES[name](r) is not None for r in runs)
            if (need_all and have == len(runs) and have) or (not need_all and have >= 2):
                return name, None if need_all else f"cost axis {name} is missing for {len(runs) - have} run(s)"
    return None, "no cost axis (cost, latency, model size, tokens, wall time) is recorded for two or more runs"


@dataclass
class ParetoFront:
    metric: str
    direction: Direction
    axis: str
    #: labels on the front, cheapest first
    front: list[str] = field(default_factory=list)
    #: label -> a label that dominates it
    dominated: dict[str, str] = field(default_factory=dict)
    #: label -> why it is not placed
    excluded: dict[str, str] = field(default_factory=dict)


def pareto_front(points: Sequence[tuple[str, float, float]], direction: Direction) -> tuple[list[str], dict[str, str]]:
    """``points`` = (label, quality, cost). Returns (front labels sorted by
    cost then quality, {dominated label: a label dominating it})."""

    def at_least(q1: float, q2: float) -> bool:  # q1 at least as good as q2
        return q1 >= q2 if direction is Direction.MAXIMIZE else q1 <= q2

    dominated: dict[str, str] = {}
    for label, q, c in points:
        for other, q2, c2 in points:
            if other == label:
                continue
            if at_least(q2, q) and c2 <= c and (direction.better(q2, q) or c2 < c):
                dominated[label] = other
                break
    sign = -1 if direction is Direction.MAXIMIZE else 1
    front = [lab for lab, q, c in sorted(points, key=lambda t: (t[2], sign * t[1], t[0])) if lab not in dominated]
    return front, dominated
