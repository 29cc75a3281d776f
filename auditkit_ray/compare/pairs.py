"""Comparability of two runs, and paired statistics on the samples they share.

Two runs compare on a metric only when their dataset fingerprints match and
the metric's identity (class, version, parameters), direction and
aggregation match. A fingerprint or identity recorded in neither run cannot
be checked: the pair stays comparable with a note saying so; recorded in
only one run, it is not comparable.

Paired statistics (``paired_stats``) read the metric's direction:

- binary metrics (every paired value 0 or 1, mean aggregation): exact
  McNemar on the discordant pairs, and the per-sample diff (newly wrong,
  newly right, still right, still wrong; "right" is 1 for a higher-is-better
  metric and 0 for a lower-is-better one);
- other mean metrics: paired sign-flip permutation test of the mean
  difference;
- corpus metrics: paired approximate randomization over the per-sample
  sufficient statistics, finalized by the metric rebuilt from its identity.

Every test records its seed and number of resamples; the difference also
gets a paired percentile-bootstrap interval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core.metric import Direction, Metric
from ..core.result import MetricSummary, RunResult
from . import stats as st
from .samples import Key, Pairing


def _short(fp: str | None) -> str:
    return "-" if fp is None else fp[:12]


def dataset_check(a: RunResult, b: RunResult,
                  names: tuple[str, str] = ("baseline", "candidate")) -> tuple[list[str], list[str]]:
    """(reasons the runs are not comparable, notes)."""
    fa, fb = a.dataset_fingerprint, b.dataset_fingerprint
    if fa is None and fb is None:
        return [], ["no dataset fingerprint recorded in either run: same data not verified"]
    if fa is None or fb is None:
        missing = names[0] if fa is None else names[1]
        return [f"dataset fingerprint missing in the {missing} run: same data cannot be verified"], []
    if fa != fb:
        return [f"dataset fingerprints differ ({_short(fa)} vs {_short(fb)}): "
                "the runs were evaluated on different data"], []
    return [], []


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def metric_check(sa: MetricSummary | None, sb: MetricSummary | None,
                 names: tuple[str, str] = ("baseline", "candidate")) -> tuple[list[str], list[str]]:
    """(reasons a metric is not comparable between two runs, notes)."""
    if sa is None or sb is None:
        return [f"metric missing in the {names[0] if sa is None else names[1]} run"], []
    reasons: list[str] = []
    notes: list[str] = []
    if sa.direction != sb.direction:
        reasons.append(f"direction differs ({sa.direction.value} vs {sb.direction.value})")
    if sa.aggregation != sb.aggregation:
        reasons.append(f"aggregation differs ({sa.aggregation} vs {sb.aggregation})")
    ia, ib = sa.identity or {}, sb.identity or {}
    if not ia and not ib:
        notes.append("metric identity recorded in neither run: same metric settings not verified")
    elif not ia or not ib:
        reasons.append(f"metric identity recorded only in the {names[1] if not ia else names[0]} run")
    else:
        if ia.get("class") != ib.get("class"):
            reasons.append(f"metric class differs ({ia.get('class')} vs {ib.get('class')})")
        if str(ia.get("version")) != str(ib.get("version")):
            reasons.append(f"metric version differs ({ia.get('version')} vs {ib.get('version')})")
        pa, pb = ia.get("params") or {}, ib.get("params") or {}
        def shown(d: dict, k: str) -> str:
            return _canon(d[k]) if k in d else "(unset)"

        diffs = [f"{k}: {shown(pa, k)} vs {shown(pb, k)}" for k in sorted(set(pa) | set(pb))
                 if shown(pa, k) != shown(pb, k)]
        if diffs:
            reasons.append("metric params differ (" + "; ".join(diffs) + ")")
        for k in sorted((set(ia) | set(ib)) - {"name", "class", "version", "params", "direction"}):
            if _canon(ia.get(k)) != _canon(ib.get(k)):
                reasons.append(f"metric identity field {k!r} differs ({ia.get(k)!r} vs {ib.get(k)!r})")
    return reasons, notes


def resolve_corpus_metric(summary: MetricSummary) -> tuple[Metric | None, str | None]:
    """Rebuild a corpus metric from its recorded identity to reuse its
    ``finalize`` on resamples; ``(None, reason)`` when that is not possible."""
    from ..core.registry import build_metric

    ident = summary.identity or {}
    ref = ident.get("class")
    if not ref:
        return None, "the metric's identity does not name its class, so its finalize() cannot be rebuilt"
    try:
        metric = build_metric(ref, dict(ident.get("params") or {}))
    except Exception as exc:  # noqa: BLE001 - any failure becomes a reason
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"cannot rebuild metric {ref} to finalize resamples ({why})"
    if type(metric).combine is not Metric.combine:
        return None, f"{ref} overrides combine(); resampling assumes statistics that merge by summing"
    return metric, None


@dataclass
class SampleDiff:
    """Per-sample diff of a binary metric, read through its direction."""

    newly_wrong: list[Key] = field(default_factory=list)
    newly_right: list[Key] = field(default_factory=list)
    still_right: int = 0
    still_wrong: int = 0


@dataclass
class PairedStats:
    n_paired: int = 0
    #: scored in one run, unscored or absent in the other (not paired)
    unpaired: int = 0
    scored_only_baseline: int = 0
    scored_only_candidate: int = 0
    unscored_both: int = 0
    only_in_baseline: int = 0
    only_in_candidate: int = 0
    binary: bool = False
    #: means over the paired samples only (corpus metrics: finalized over them)
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    delta: float | None = None
    delta_ci: tuple[float, float] | None = None
    ci_method: str | None = None
    confidence: float = 0.95
    test: str | None = None
    p_value: float | None = None
    n_resamples: int | None = None
    seed: int | None = None
    exact: bool = False
    #: per-sample, direction-aware: candidate better / worse / equal
    better: int = 0
    worse: int = 0
    same: int = 0
    diff: SampleDiff | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def _counts(p: Pairing) -> dict[str, int]:
    return dict(n_paired=p.n, unpaired=p.unpaired, scored_only_baseline=p.scored_only_a,
                scored_only_candidate=p.scored_only_b,
                unscored_both=p.unscored_both, only_in_baseline=p.only_in_a, only_in_candidate=p.only_in_b)


def fsum_left(values: Any) -> float:
    """``sum(values)`` of a float64 array, added left to right by Python's own ``sum`` (the same bits as a
    list's), without a list of it."""
    import numpy as np

    return sum(memoryview(np.ascontiguousarray(values, dtype=np.float64)))


def paired_stats(p: Pairing, direction: Direction, aggregation: str = "mean", *, summary: MetricSummary | None = None,
                 n_resamples: int = 10_000, seed: int = 0, confidence: float = 0.95,
                 delta_ci: bool = True) -> PairedStats:
    """Paired test and diff of candidate (``p.b``) against baseline (``p.a``);
    ``delta_ci=False`` skips the bootstrap interval of the difference."""
    import numpy as np

    out = PairedStats(**_counts(p), confidence=confidence, seed=seed)
    if p.n == 0:
        out.reason = "no sample is scored in both runs"
        return out
    if aggregation == "corpus":
        return _corpus(out, p, summary, n_resamples=n_resamples, seed=seed, confidence=confidence, delta_ci=delta_ci)
    a, b = p.a, p.b
    n = p.n
    out.baseline_mean = fsum_left(a) / n
    out.candidate_mean = fsum_left(b) / n
    out.delta = out.candidate_mean - out.baseline_mean
    same = a == b
    better = (b > a) if direction is Direction.MAXIMIZE else (b < a)
    out.same = int(np.count_nonzero(same))
    out.better = int(np.count_nonzero(better & ~same))
    out.worse = n - out.same - out.better
    out.binary = bool(np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all())
    if out.binary:
        good = 1.0 if direction is Direction.MAXIMIZE else 0.0
        ga, gb = a == good, b == good
        d = SampleDiff(still_right=int(np.count_nonzero(ga & gb)), still_wrong=int(np.count_nonzero(~ga & ~gb)))
        d.newly_wrong = p.keys_at(np.nonzero(ga & ~gb)[0])
        d.newly_right = p.keys_at(np.nonzero(~ga & gb)[0])
        out.diff = d
        out.test = "mcnemar exact"
        out.p_value = st.mcnemar_exact(len(d.newly_wrong), len(d.newly_right))
        out.exact = True
        out.n_resamples = None
    else:
        res = st.paired_permutation(a, b, n_resamples=n_resamples, seed=seed)
        out.test, out.p_value, out.n_resamples, out.exact = res.test, res.p_value, res.n_resamples, res.exact
    if delta_ci:
        out.delta_ci = st.paired_bootstrap_ci(a, b, confidence=confidence, n_resamples=n_resamples, seed=seed)
        out.ci_method = f"paired bootstrap percentile ({n_resamples} resamples, seed {seed})"
    return out


def _corpus(out: PairedStats, p: Pairing, summary: MetricSummary | None, *, n_resamples: int, seed: int,
            confidence: float,
            delta_ci: bool = True) -> PairedStats:
    if summary is None:
        out.reason = "no summary to rebuild the corpus metric from"
        return out
    metric, why = resolve_corpus_metric(summary)
    if metric is None:
        out.reason = why
        return out
    if p.stats_problem is not None:
        out.reason = p.stats_problem
        return out
    sa, sb = p.a_stats, p.b_stats
    try:
        out.baseline_mean = st.corpus_value(metric.finalize, sa)
        out.candidate_mean = st.corpus_value(metric.finalize, sb)
        if out.baseline_mean is not None and out.candidate_mean is not None:
            out.delta = out.candidate_mean - out.baseline_mean
        res = st.corpus_permutation(sa, sb, metric.finalize, n_resamples=n_resamples, seed=seed)
        out.test, out.p_value, out.n_resamples, out.exact = res.test, res.p_value, res.n_resamples, res.exact
        if res.undefined:
            out.notes.append(f"{res.undefined} resamples had an undefined corpus score and were left out")
        if res.note and res.p_value is None:
            out.reason = res.note
        if delta_ci:
            out.delta_ci = st.corpus_paired_bootstrap_ci(sa, sb, metric.finalize, confidence=confidence,
                                                         n_resamples=n_resamples, seed=seed)
            out.ci_method = f"paired bootstrap percentile over corpus statistics ({n_resamples} resamples, seed {seed})"
    except Exception as exc:  # noqa: BLE001 - a finalize failing on a resample becomes a reason
        out.reason = f"finalize() failed on resampled statistics: {type(exc).__name__}: {exc}"
    return out
