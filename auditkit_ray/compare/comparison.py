"""Compare a candidate run with a baseline: a pure function of the two result
files (and their per-sample tables) that returns reasons.

Per metric:

- ``delta`` = candidate mean - baseline mean (summary means, all samples);
- ``improvement`` = the delta read through the direction (positive = the
  candidate is better; for a lower-is-better metric it is ``-delta``);
  ``regression`` = ``max(0, -improvement)``;
- ``retention`` = candidate / baseline for a higher-is-better metric and
  baseline / candidate for a lower-is-better one, so 1.0 means "kept", above
  1 better, below 1 worse, whatever the direction. At a baseline of 0 (or a
  candidate of 0 for a lower-is-better metric) the ratio is 1.0 when both
  are 0 and otherwise undefined (``None``, with a note), except that a
  lower-is-better metric whose baseline is 0 and candidate above 0 retains
  0.0. Retention is only defined for non-negative means.
- a paired test on the samples both runs scored (see ``pairs``);
- a grade that reads the paired test as well as the size of the change:
  ``not comparable`` (with the reasons); when the paired test ran,
  ``fail``/``warn`` only when the regression is significant at ``alpha``
  (``fail`` over ``fail_at``, ``warn`` over ``warn_at`` or under it), and a
  regression over a threshold that is not significant is ``n.s.`` (it could
  be noise: reported, never a failure); without a paired test (no per-sample
  table) the thresholds alone decide, and the reason says so; else ``pass``.
  Thresholds are absolute (``0.02``) or relative to the baseline (``"2%"``);
  the defaults are ``warn_at="1%"``, ``fail_at="5%"``. ``GRADING`` says this
  in one line for reports.

Gates (``fail_under``, ``fail_over``, ``max_regression``) are checked on the
candidate; ``Comparison.failures`` lists every failed grade and gate, and
``raise_for_failures`` raises ``GateFailed`` (CLI exit 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..core.gcpause import gc_paused
from ..core.metric import Direction
from ..core.result import MetricSummary
from ..errors import ConfigError, GateFailed
from . import text as tx
from .gates import (
    GateResult,
    Limit,
    normalize_max_regression,
    regression_gates,
    threshold_gates,
    validate_threshold_gates,
)
from .pairs import PairedStats, dataset_check, metric_check, paired_stats
from .samples import LoadedRun, load, pair

GRADES = ("pass", "n.s.", "warn", "fail", "not comparable")
#: how a grade is decided, for reports (the thresholds are filled in)
GRADING = ("warn over {warn_at}, fail over {fail_at} regression, each only when the paired test is significant at "
           "alpha {alpha:g}; a regression over a threshold that is not significant is n.s.; without a paired test "
           "the thresholds alone decide")


@dataclass
class RunRef:
    label: str
    run_id: str
    fingerprint: str
    dataset_fingerprint: str | None
    source: str | None
    #: why the per-sample table could not be used (None when it was read or not needed)
    samples_reason: str | None = None

    @classmethod
    def of(cls, run: LoadedRun) -> "RunRef":
        return cls(run.label, run.result.run_id, run.result.fingerprint, run.result.dataset_fingerprint, run.source)


@dataclass
class Thresholds:
    warn_at: Limit = field(default_factory=lambda: Limit(0.01, True))
    fail_at: Limit = field(default_factory=lambda: Limit(0.05, True))
    alpha: float = 0.05


@dataclass
class MetricComparison:
    name: str
    direction: Direction
    aggregation: str
    comparable: bool
    grade: str
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    baseline_n: int = 0
    candidate_n: int = 0
    delta: float | None = None
    improvement: float | None = None
    regression: float | None = None
    #: regression over |baseline| (None when undefined: baseline 0)
    relative_regression: float | None = None
    retention: float | None = None
    significant: bool | None = None
    paired: PairedStats | None = None

    @property
    def candidate_better(self) -> bool:
        return self.comparable and self.improvement is not None and self.improvement > 0

    @property
    def candidate_worse(self) -> bool:
        return self.comparable and self.improvement is not None and self.improvement < 0


@dataclass
class Comparison:
    baseline: RunRef
    candidate: RunRef
    dataset_comparable: bool
    dataset_reasons: list[str]
    notes: list[str]
    metrics: dict[str, MetricComparison]
    thresholds: Thresholds
    n_resamples: int
    seed: int
    confidence: float
    gates: list[GateResult] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        out = [f"{m.name}: grade fail ({'; '.join(m.reasons)})" for m in self.metrics.values() if m.grade == "fail"]
        if not any(m.comparable for m in self.metrics.values()):
            # a comparison that compared nothing is no pass, with or without gates
            why = sorted({r for m in self.metrics.values() for r in m.reasons}) or ["the runs share no metric"]
            out.insert(0, f"no metric is comparable between {self.baseline.label} and {self.candidate.label} "
                          f"({'; '.join(why)})")
        return out + [g.reason for g in self.gates if not g.passed]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def clean(self) -> bool:
        """Every metric comparable and passing, no gate failed."""
        return self.ok and all(m.grade == "pass" for m in self.metrics.values())

    def raise_for_failures(self) -> None:
        fails = self.failures
        if fails:
            raise GateFailed(f"{len(fails)} check(s) failed: " + "; ".join(fails))

    def to_dict(self) -> dict[str, Any]:
        from .report import jsonable

        return jsonable(self) | {"ok": self.ok, "failures": self.failures}

    def format(self) -> str:
        from .report import format_comparison

        return format_comparison(self)


def retention(base: float | None, cand: float | None, direction: Direction) -> tuple[float | None, str | None]:
    """(retention, note) as documented in the module docstring."""
    if base is None or cand is None:
        return None, None
    if base < 0 or cand < 0:
        return None, "retention is defined for non-negative means only"
    num, den = (cand, base) if direction is Direction.MAXIMIZE else (base, cand)
    if den == 0:
        if num == 0:
            return 1.0, None
        who = "baseline" if direction is Direction.MAXIMIZE else "candidate"
        return None, f"retention undefined: the {who} mean is 0"
    return num / den, None


def _metric_names(a: LoadedRun, b: LoadedRun, metrics: Iterable[str] | None) -> list[str]:
    have = list(a.result.metrics) + [m for m in b.result.metrics if m not in a.result.metrics]
    if metrics is None:
        return have
    names = list(dict.fromkeys(metrics))
    missing = [m for m in names if m not in have]
    if missing:
        raise ConfigError(f"metric(s) {', '.join(missing)} in neither run (metrics: {', '.join(have) or 'none'})")
    return names


def _grade(mc: MetricComparison, th: Thresholds) -> None:
    reg, base = mc.regression, mc.baseline_mean
    if reg is None:  # pragma: no cover - the caller only grades comparable metrics
        raise ValueError(f"{mc.name}: cannot grade without a regression")
    rel_txt = ""
    if reg > 0:
        r = Limit(0, True).measure(reg, base)
        rel_txt = f" ({r * 100:.2f}% of baseline)" if math.isfinite(r) else " (baseline is 0)"
    p = mc.paired.p_value if mc.paired else None
    ptxt = f", p={tx.pval(p)}" if p is not None else ""
    over = "fail" if th.fail_at.exceeded(reg, base) else "warn" if th.warn_at.exceeded(reg, base) else None
    limit = th.fail_at if over == "fail" else th.warn_at
    if over is not None and p is None:
        mc.grade = over
        mc.reasons.append(f"regressed by {reg:.4f}{rel_txt}, over the {over} threshold {limit} (no paired test: "
                          "graded on the threshold alone)")
    elif over is not None and mc.significant:
        mc.grade = over
        mc.reasons.append(f"regressed by {reg:.4f}{rel_txt}{ptxt}, over the {over} threshold {limit} and significant "
                          f"(p < {th.alpha:g})")
    elif over is not None:
        mc.grade = "n.s."
        mc.reasons.append(f"regressed by {reg:.4f}{rel_txt}{ptxt}, over the {over} threshold {limit} but not "
                          f"significant (p >= {th.alpha:g}): not graded as a regression")
    elif reg > 0 and mc.significant:
        mc.grade = "warn"
        mc.reasons.append(f"regressed by {reg:.4f}{rel_txt}, under the warn threshold {th.warn_at} "
                          f"but significant (p={tx.pval(p)} < {th.alpha:g})")
    else:
        mc.grade = "pass"
        if reg > 0:
            mc.reasons.append(f"regressed by {reg:.4f}{rel_txt}{ptxt}, within the warn threshold {th.warn_at}")
        elif mc.improvement and mc.improvement > 0:
            mc.reasons.append(f"improved by {mc.improvement:.4f}{ptxt}")
        else:
            mc.reasons.append("no change")


def _compare_metric(name: str, a: LoadedRun, b: LoadedRun, ds_reasons: list[str], th: Thresholds, *,
                    n_resamples: int, seed: int, confidence: float) -> MetricComparison:
    sa: MetricSummary | None = a.result.metrics.get(name)
    sb: MetricSummary | None = b.result.metrics.get(name)
    ref = sa or sb
    if ref is None:  # pragma: no cover - names come from the runs
        raise ConfigError(f"metric {name!r} in neither run")
    reasons, notes = metric_check(sa, sb)
    reasons = list(ds_reasons) + reasons
    mc = MetricComparison(name=name, direction=ref.direction, aggregation=ref.aggregation, comparable=False,
                          grade="not comparable",
                          notes=notes, baseline_mean=sa.mean if sa else None, candidate_mean=sb.mean if sb else None,
                          baseline_n=sa.n if sa else 0, candidate_n=sb.n if sb else 0)
    if sa is not None and sb is not None and sa.mean is not None and sb.mean is not None:
        mc.delta = sb.mean - sa.mean
    if not reasons and (mc.baseline_mean is None or mc.candidate_mean is None):
        reasons.append(f"no scored samples in the {'baseline' if mc.baseline_mean is None else 'candidate'} run")
    if reasons:
        mc.reasons = reasons
        return mc
    mc.comparable = True
    mc.improvement = mc.delta if mc.direction is Direction.MAXIMIZE else -mc.delta  # type: ignore[operator]
    mc.regression = max(0.0, -mc.improvement)  # type: ignore[operator]
    rr = Limit(0, True).measure(mc.regression, mc.baseline_mean)
    mc.relative_regression = rr if math.isfinite(rr) else None
    mc.retention, note = retention(mc.baseline_mean, mc.candidate_mean, mc.direction)
    if note:
        mc.notes.append(note)
    (sca, ra), (scb, rb) = a.scores(), b.scores()
    if sca is None or scb is None:
        mc.notes.append(f"no paired test: {ra if sca is None else rb}")
    else:
        mc.paired = paired_stats(pair(sca, scb, name), mc.direction, mc.aggregation, summary=sa,
                                 n_resamples=n_resamples, seed=seed, confidence=confidence)
        if mc.paired.p_value is not None:
            mc.significant = mc.paired.p_value < th.alpha
        elif mc.paired.reason:
            mc.notes.append(f"no paired test: {mc.paired.reason}")
        if mc.paired.unpaired:
            mc.notes.append(f"{mc.paired.unpaired} sample(s) scored in one run only (not paired)")
    _grade(mc, th)
    return mc


@gc_paused()
def compare(baseline: Any, candidate: Any, *, metrics: Iterable[str] | None = None, warn_at: Any = "1%",
            fail_at: Any = "5%",
            alpha: float = 0.05, n_resamples: int = 10_000, seed: int = 0, confidence: float = 0.95,
            fail_under: Mapping[str, float] | None = None, fail_over: Mapping[str, float] | None = None,
            max_regression: Any = None) -> Comparison:
    """Compare ``candidate`` against ``baseline`` (RunResults, or paths to a
    result.json or a run directory). Pure: reads the two results and their
    per-sample tables, writes nothing."""
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    a, b = load(baseline), load(candidate)
    fail_under, fail_over = dict(fail_under or {}), dict(fail_over or {})
    validate_threshold_gates([a.result, b.result], fail_under, fail_over)
    limits = normalize_max_regression(max_regression)
    th = Thresholds(Limit.parse(warn_at, "warn_at"), Limit.parse(fail_at, "fail_at"), alpha)
    names = _metric_names(a, b, metrics)
    ds_reasons, ds_notes = dataset_check(a.result, b.result)
    cmp = Comparison(baseline=RunRef.of(a), candidate=RunRef.of(b), dataset_comparable=not ds_reasons,
                     dataset_reasons=ds_reasons, notes=ds_notes, metrics={}, thresholds=th, n_resamples=n_resamples,
                     seed=seed, confidence=confidence)
    for name in names:
        cmp.metrics[name] = _compare_metric(name, a, b, ds_reasons, th, n_resamples=n_resamples, seed=seed,
                                            confidence=confidence)
    for ref, run in ((cmp.baseline, a), (cmp.candidate, b)):
        if run._scores is not None:
            ref.samples_reason = run._scores[1]
    cmp.gates = threshold_gates(b.result, b.label, fail_under, fail_over) + regression_gates(cmp, limits)
    return cmp
