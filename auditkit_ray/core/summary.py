"""Per-metric summaries from scores: one accumulator that shards merge.

``Accumulator`` holds, per score name, the mean statistics (``MeanStats``)
and, for corpus metrics, the merged sufficient statistics. Accumulators from
different shards merge exactly in any order; ``summaries()`` finalizes.
"""

from __future__ import annotations

from typing import Any, Iterable

from .aggregate import MeanStats, summarize
from .metric import Metric
from .result import MetricSummary
from .types import Score, Status


class Accumulator:
    def __init__(self, metrics: Iterable[Metric]) -> None:
        self.metrics = {m.output_name: m for m in metrics}
        self.stats: dict[str, MeanStats] = {}
        self.corpus: dict[str, list[float]] = {}

    def _metric_for(self, name: str) -> Metric | None:
        return self.metrics.get(name) or self.metrics.get(name.split(".")[0])

    def add(self, score: Score) -> None:
        st = self.stats.get(score.name)
        if st is None:
            st = self.stats[score.name] = MeanStats()
        st.add(score)
        m = self.metrics.get(score.name)
        if m is not None and m.aggregation == "corpus" and score.status is Status.SCORED:
            st = [float(x) for x in score.metadata.get("stats") or []]
            self.corpus[score.name] = m.combine(self.corpus[score.name], st) if score.name in self.corpus else st

    def add_all(self, scores: Iterable[Score]) -> "Accumulator":
        for s in scores:
            self.add(s)
        return self

    def merge(self, other: "Accumulator") -> "Accumulator":
        out = Accumulator(self.metrics.values())
        for name in set(self.stats) | set(other.stats):
            a, b = self.stats.get(name), other.stats.get(name)
            out.stats[name] = a.merge(b) if a and b else (a or b)  # type: ignore[assignment]
        for name in set(self.corpus) | set(other.corpus):
            a, b = self.corpus.get(name), other.corpus.get(name)
            m = self.metrics[name]
            out.corpus[name] = m.combine(a, b) if a is not None and b is not None else list(a if a is not None else b)  # type: ignore[arg-type]
        return out

    def summaries(self) -> dict[str, MetricSummary]:
        out: dict[str, MetricSummary] = {}
        for name in sorted(self.stats):
            m = self._metric_for(name)
            summary: dict[str, Any] = summarize(self.stats[name])
            extra: dict[str, Any] = {}
            if m is not None and m.aggregation == "corpus" and name == m.output_name:
                # the corpus score replaces the mean of per-sample values; its
                # interval comes from a bootstrap that reuses finalize()
                summary.update(mean=m.finalize(self.corpus[name]) if name in self.corpus else None,
                               stderr=None, ci_low=None, ci_high=None, ci_method=None)
                extra = {"aggregation": "corpus", "signature": m.signature()}
            out[name] = MetricSummary(
                name=name,
                direction=type(m).direction if m else "maximize",
                family=type(m).family if m else "custom",
                identity=m.identity() if m else {},
                **extra,
                **summary,
            )
        return out
