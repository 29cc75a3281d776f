"""Leaderboards over N runs: direction-aware ranking, intervals on every mean,
pairwise paired tests with Holm correction, ties, and quality vs cost.

Per metric:

- Runs compare only when dataset fingerprint and metric identity match. One
  group is ranked, whatever the order of the runs: the baseline's group when
  a baseline is given, else the largest group; two equally large groups are
  refused (name the reference with ``baseline``). Runs outside it are listed
  as excluded with the reason, and every output (ranks, winners, Pareto
  fronts, cost table) reads the same group.
- Ranking sorts by mean, descending for higher-is-better and ascending for
  lower-is-better metrics (equal means share a rank; label breaks the order).
- Interval on every mean, at ``confidence``:
  * samples carrying a cluster id (a ``cluster``/``cluster_id`` column, or
    the key in a score's metadata), or repeated samples (several scored
    repeats of one sample_id, clustered by sample_id): mean +- t(G-1) x the
    cluster-robust standard error;
  * otherwise binary metrics: Wilson (default) or Clopper-Pearson
    (``binary_ci``); other mean metrics: mean +- z x the standard error
    (the run summary's interval, so a run shows one interval everywhere);
  * corpus metrics: percentile bootstrap over per-sample ``metadata.stats``,
    finalized by the metric rebuilt from its identity, else no interval and
    the reason;
  * without a readable per-sample table: the interval stored in the run's
    summary, with a note.
- Winners: the best mean, plus every run whose interval overlaps the best
  run's interval (a tie: the intervals do not separate them), unless the
  paired test finds it significantly worse than the best.
- Pairwise: paired tests between every two ranked runs on the samples both
  scored (exact McNemar for binary metrics, paired permutation otherwise),
  Holm-adjusted within the metric; ``significant`` reads the adjusted p.

Gates: ``fail_under`` / ``fail_over`` apply to every run; with ``baseline``
each run is compared with it (``compare``) and ``max_regression`` checked.
Those comparisons' grades are reported, but only failed gates count as
failures (``raise_for_failures``, CLI exit 1): without a gate the grades are
advisory.

Failed cells: a sweep's cells that failed (``failed_cells``, the manifest's
``cells`` entries whose state is ``failed``) are listed with their reason;
they hold no result, so they are not ranked.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..core.gcpause import gc_paused
from ..core.metric import Direction
from ..core.result import MetricSummary
from ..errors import ConfigError, GateFailed
from . import stats as st
from .comparison import Comparison, RunRef, compare
from .cost import AXES, CostRow, ParetoFront, choose_axis, cost_row, pareto_front
from .gates import GateResult, normalize_max_regression, threshold_gates, validate_threshold_gates
from .pairs import dataset_check, fsum_left, metric_check, paired_stats, resolve_corpus_metric
from .samples import LoadedRun, at_positions, load, pair, unique_labels

BINARY_CI = ("wilson", "clopper-pearson")


@dataclass
class FailedCell:
    """A sweep cell that failed: no result, a one-line reason."""

    name: str
    reason: str
    state: str = "failed"
    attempts: int | None = None
    #: the first run's fingerprint (a cell of several runs lists them all in the manifest)
    fingerprint: str | None = None
    #: the names of the runs the cell holds
    runs: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, cell: Any) -> "FailedCell | None":
        """From a manifest ``cells`` entry (a mapping, or a FailedCell); None unless its state is failed (or
        skipped: ``--fail-fast`` did not start it after a failure; it has no result either)."""
        if isinstance(cell, FailedCell):
            return cell
        state = str(cell.get("state", "")).lower() if isinstance(cell, Mapping) else ""
        if state not in ("failed", "skipped"):
            return None
        fp = cell.get("fingerprint") or cell.get("run_fingerprint")
        if fp is None and isinstance(cell.get("fingerprints"), list) and cell["fingerprints"]:
            fp = cell["fingerprints"][0]
        attempts = cell.get("attempts")
        return cls(name=str(cell.get("name") or cell.get("cell") or fp or "?"),
                   reason=" ".join(str(cell.get("reason") or "no reason recorded").split()),
                   state=state, attempts=attempts if isinstance(attempts, int) else None,
                   fingerprint=str(fp) if fp else None,
                   runs=[str(r) for r in cell.get("runs") or [] if isinstance(r, str)])


def failed_cells_of(cells: Iterable[Any] | None) -> list[FailedCell]:
    """The failed ones among a sweep manifest's ``cells`` (other states and shapes are skipped)."""
    return [f for c in cells or () if (f := FailedCell.of(c)) is not None]


@dataclass
class Entry:
    run: str
    run_id: str
    mean: float | None
    n: int
    rank: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str | None = None
    ci_note: str | None = None
    stderr: float | None = None
    clustered_stderr: float | None = None
    n_clusters: int | None = None
    tied_with_best: bool = False
    #: why this run is not ranked on the metric (None when ranked)
    excluded: str | None = None


@dataclass
class PairwiseCell:
    a: str
    b: str
    n_paired: int = 0
    unpaired: int = 0
    test: str | None = None
    p_value: float | None = None
    p_holm: float | None = None
    significant: bool | None = None
    #: the run better on the paired samples (None: equal or unknown)
    better: str | None = None
    delta: float | None = None
    n_resamples: int | None = None
    seed: int | None = None
    reason: str | None = None


@dataclass
class MetricBoard:
    name: str
    direction: Direction
    aggregation: str
    entries: list[Entry] = field(default_factory=list)
    winners: list[str] = field(default_factory=list)
    tie: bool = False
    pairwise: list[PairwiseCell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ranked(self) -> list[Entry]:
        return [e for e in self.entries if e.rank is not None]

    def order(self) -> list[str]:
        return [e.run for e in self.ranked]


@dataclass
class Leaderboard:
    runs: list[RunRef]
    metrics: dict[str, MetricBoard]
    cost_axis: str | None
    cost: list[CostRow]
    pareto: dict[str, ParetoFront]
    confidence: float
    binary_ci: str
    alpha: float
    n_resamples: int
    seed: int
    notes: list[str] = field(default_factory=list)
    baseline: RunRef | None = None
    comparisons: dict[str, Comparison] = field(default_factory=dict)
    gates: list[GateResult] = field(default_factory=list)
    #: sweep cells that failed (no result): listed, not ranked
    failed_cells: list[FailedCell] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [g.reason for g in self.gates if not g.passed]

    @property
    def ok(self) -> bool:
        """No gate failed and no sweep cell failed (a cell with no result is never an ok result)."""
        return not self.failures and not self.failed_cells

    def raise_for_failures(self) -> None:
        fails = self.failures
        if fails:
            raise GateFailed(f"{len(fails)} gate(s) failed: " + "; ".join(fails))

    def to_dict(self) -> dict[str, Any]:
        from .report import jsonable

        return jsonable(self) | {"ok": self.ok, "failures": self.failures}

    def format(self, *, pairwise: bool = False, width: int = 120) -> str:
        """Aligned text within ``width`` columns; the pairwise matrix only with ``pairwise``."""
        from .report import format_leaderboard

        return format_leaderboard(self, pairwise=pairwise, width=width)


# ----------------------------------------------------------------------------- intervals
def _group_key(run: LoadedRun, s: MetricSummary) -> str:
    ident = {k: v for k, v in (s.identity or {}).items() if k != "name"}
    return json.dumps([run.result.dataset_fingerprint, ident, s.direction.value, s.aggregation], sort_keys=True,
                      default=str)


def _clusters(scores: Any, mc: Any, idx: Any) -> tuple[list[str] | None, str | None]:
    """Cluster ids for the scored keys at ``idx`` (None: every key): explicit ids, else sample_id when samples
    repeat."""
    import pyarrow.compute as pc

    if mc.cluster is not None:
        cl = mc.cluster if idx is None else mc.cluster.take(idx)
        if cl.null_count < len(cl):
            sids = scores.sample_id if idx is None else scores.sample_id.take(idx)
            return pc.coalesce(cl, pc.binary_join_element_wise("sample:", sids, "")).to_pylist(), "cluster ids"
    if not scores.has_repeats:
        return None, None  # no sample has two keys: its ids are not read again
    sids = scores.sample_id if idx is None else scores.sample_id.take(idx)
    # sorted keys: a sample id repeated is a run of equal ids
    if len(sids) > 1 and pc.any(pc.equal(sids.slice(1), sids.slice(0, len(sids) - 1))).as_py():
        return sids.to_pylist(), "repeats clustered by sample_id"
    return None, None


def _interval(run: LoadedRun, s: MetricSummary, name: str, *, confidence: float, binary_ci: str, n_resamples: int,
              seed: int) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {"stderr": s.stderr}
    scores, why = run.scores()
    if scores is None:
        if s.ci_low is not None and s.ci_high is not None:
            out.update(ci_low=s.ci_low, ci_high=s.ci_high,
                       ci_method=f"{s.ci_method or 'stored'} (from the run summary)",
                       ci_note=f"per-sample table unavailable ({why}); interval taken from the run summary at its "
                               f"confidence {s.confidence:g}")
        else:
            out.update(ci_note=f"no interval: per-sample table unavailable ({why}) and the run summary has none")
        return out
    mc = scores.metric(name)
    scored = mc.scored if mc is not None else np.zeros(0, bool)
    n_scored = int(np.count_nonzero(scored))
    if not n_scored:
        out.update(ci_note="no interval: no scored sample in the per-sample table")
        return out
    idx = None if n_scored == len(scored) else np.nonzero(scored)[0]  # sorted key order; None: every key
    del scored
    notes: list[str] = []
    if n_scored != s.n:
        notes.append(f"per-sample table has {n_scored} scored rows, the summary counts {s.n}")
    if s.aggregation == "corpus":
        metric, reason = resolve_corpus_metric(s)
        widths = at_positions(mc.stats_width, idx) if mc.stats is not None else None
        if metric is None:
            out.update(ci_note=f"no interval: {reason}")
        elif widths is None or (widths < 0).any() or len(np.unique(widths)) != 1:
            out.update(
                ci_note="no interval: scored samples lack consistent metadata.stats to resample the corpus score")
        else:
            stats = at_positions(mc.stats, idx)[:, :int(widths[0])]
            try:
                ci, undefined = st.corpus_bootstrap_ci(stats, metric.finalize, confidence=confidence,
                                                       n_resamples=n_resamples, seed=seed)
            except Exception as exc:  # noqa: BLE001
                out.update(ci_note=f"no interval: finalize() failed on a resample ({type(exc).__name__}: {exc})")
            else:
                if ci is not None:
                    out.update(ci_low=ci[0], ci_high=ci[1],
                               ci_method=f"bootstrap percentile over corpus statistics ({n_resamples} resamples, seed "
                                         f"{seed})")
                if undefined:
                    notes.append(f"{undefined} resamples had an undefined corpus score")
        if notes:
            out["ci_note"] = "; ".join(filter(None, [out.get("ci_note"), *notes]))
        return out
    values = at_positions(mc.value, idx)
    n = len(values)
    mean = fsum_left(values) / n
    if n > 1:
        # summed in Python, value by value, as a list of them would be: the same bits at any size
        var = sum((v - mean) ** 2 for v in memoryview(values)) / (n - 1)
        out["stderr"] = math.sqrt(var / n)
    clusters, kind = _clusters(scores, mc, idx)
    binary = bool(np.isin(values, (0.0, 1.0)).all())
    if clusters is not None:
        res = st.clustered_se(values.tolist(), clusters)
        if res is not None:
            se, g = res
            t = st.t_value(confidence, g - 1)
            lo, hi = mean - t * se, mean + t * se
            if binary:
                lo, hi = max(0.0, lo), min(1.0, hi)
            out.update(ci_low=lo, ci_high=hi, ci_method=f"clustered t ({g} clusters, {kind})", clustered_stderr=se,
                       n_clusters=g)
            if notes:
                out["ci_note"] = "; ".join(notes)
            return out
        notes.append("fewer than two clusters: clustered errors not used")
    if binary:
        k = fsum_left(values)
        lo, hi = st.wilson(k, n, confidence) if binary_ci == "wilson" else st.clopper_pearson(int(k), n, confidence)
        out.update(ci_low=lo, ci_high=hi, ci_method=binary_ci)
    elif n > 1:
        # the run summary's interval (mean +- z x the standard error): one interval per metric and run, the
        # same in `run`, the reports and the leaderboard
        z = st.z_value(confidence)
        out.update(ci_low=mean - z * out["stderr"], ci_high=mean + z * out["stderr"], ci_method="normal")
    if notes:
        out["ci_note"] = "; ".join(notes)
    return out


def _overlap(a: Entry, b: Entry) -> bool | None:
    if None in (a.ci_low, a.ci_high, b.ci_low, b.ci_high):
        return None
    return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high  # type: ignore[operator]


# ----------------------------------------------------------------------------- one metric
def _reference_group(name: str, have: list[tuple[LoadedRun, MetricSummary]], groups: dict[str, list[int]],
                     baseline: LoadedRun | None) -> str:
    """The group of mutually comparable runs that ``name`` ranks: a rule on the set of runs, not their order."""
    if baseline is not None and name in baseline.result.metrics:
        key = _group_key(baseline, baseline.result.metrics[name])
        if key in groups:
            return key
    size = max(len(v) for v in groups.values())
    largest = [k for k, v in groups.items() if len(v) == size]
    if len(largest) > 1:
        parts = sorted(", ".join(sorted(have[i][0].label for i in groups[k])) for k in largest)
        raise ConfigError(
            f"{name}: the runs fall into {len(largest)} equally large groups that cannot be compared with each other "
            f"(different dataset or metric identity): {' | '.join(parts)}; rank one group, or name the reference "
            "with --baseline FILE")
    return largest[0]


def _board(name: str, runs: list[LoadedRun], *, confidence: float, binary_ci: str, alpha: float, n_resamples: int,
           seed: int, pairwise: bool, baseline: LoadedRun | None = None) -> MetricBoard:
    have = [(r, r.result.metrics[name]) for r in runs if name in r.result.metrics]
    groups: dict[str, list[int]] = {}
    for i, (r, s) in enumerate(have):
        groups.setdefault(_group_key(r, s), []).append(i)
    ref_key = _reference_group(name, have, groups, baseline)
    ref_run, ref_s = min((have[i] for i in groups[ref_key]), key=lambda rs: rs[0].label)
    board = MetricBoard(name=name, direction=ref_s.direction, aggregation=ref_s.aggregation)
    _, ds_notes = dataset_check(ref_run.result, ref_run.result)
    _, id_notes = metric_check(ref_s, ref_s)
    board.notes += ds_notes + id_notes
    summaries: dict[str, MetricSummary] = {}
    for r in runs:
        s = r.result.metrics.get(name)
        e = Entry(run=r.label, run_id=r.result.run_id, mean=s.mean if s else None, n=s.n if s else 0)
        board.entries.append(e)
        if s is None:
            e.excluded = "metric not in this run"
            continue
        if _group_key(r, s) != ref_key:
            names = (ref_run.label, r.label)
            reasons = dataset_check(ref_run.result, r.result, names)[0] + metric_check(ref_s, s, names)[0]
            why = "; ".join(reasons) or "dataset or metric identity differs"
            e.excluded = f"not comparable with {ref_run.label}: {why}"
            continue
        if s.mean is None:
            e.excluded = "no scored samples"
            continue
        summaries[r.label] = s
        for key, value in _interval(r, s, name, confidence=confidence, binary_ci=binary_ci, n_resamples=n_resamples,
                                    seed=seed).items():
            setattr(e, key, value)
    ranked = [e for e in board.entries if e.run in summaries]
    sign = -1.0 if board.direction is Direction.MAXIMIZE else 1.0
    ranked.sort(key=lambda e: (sign * e.mean, e.run))  # type: ignore[operator]
    for i, e in enumerate(ranked):
        e.rank = ranked[i - 1].rank if i and ranked[i - 1].mean == e.mean else i + 1
    board.entries = ranked + [e for e in board.entries if e.run not in summaries]
    if ranked:
        best = ranked[0]
        best.tied_with_best = True
        for e in ranked[1:]:
            ov = _overlap(best, e)
            e.tied_with_best = e.mean == best.mean or bool(ov)
            if ov is None and e.mean != best.mean:
                board.notes.append(f"{e.run}: no interval on one side, so a tie with {best.run} cannot be assessed")
        board.winners = [e.run for e in ranked if e.tied_with_best]
        board.tie = len(board.winners) > 1
    if pairwise and len(ranked) > 1:
        by_label = {r.label: r for r in runs}
        cells: list[PairwiseCell] = []
        for i in range(len(ranked)):
            for j in range(i + 1, len(ranked)):
                a, b = by_label[ranked[i].run], by_label[ranked[j].run]
                cells.append(_pair_cell(name, a, b, summaries[a.label], board.direction, board.aggregation,
                                        n_resamples=n_resamples, seed=seed, confidence=confidence))
        for c, adj in zip(cells, st.holm([c.p_value for c in cells])):
            c.p_holm = adj
            c.significant = None if adj is None else adj < alpha
        board.pairwise = cells
        # a run the paired test finds significantly worse than the best is not tied with it, whatever the
        # intervals say: "best or tied" and "significantly worse" never mark one run at once
        best = ranked[0].run
        for c in cells:
            other = c.b if c.a == best else c.a if c.b == best else None
            if other is not None and c.significant and c.better == best:
                e = next(x for x in ranked if x.run == other)
                if e.tied_with_best and e.mean != ranked[0].mean:
                    e.tied_with_best = False
        board.winners = [e.run for e in ranked if e.tied_with_best]
        board.tie = len(board.winners) > 1
    return board


def _pair_cell(name: str, a: LoadedRun, b: LoadedRun, sa: MetricSummary, direction: Direction, aggregation: str, *,
               n_resamples: int, seed: int, confidence: float) -> PairwiseCell:
    cell = PairwiseCell(a=a.label, b=b.label)
    (xa, ra), (xb, rb) = a.scores(), b.scores()
    if xa is None or xb is None:
        cell.reason = ra if xa is None else rb
        return cell
    ps = paired_stats(pair(xa, xb, name), direction, aggregation, summary=sa, n_resamples=n_resamples, seed=seed,
                      confidence=confidence, delta_ci=False)
    cell.n_paired, cell.unpaired, cell.test, cell.p_value = ps.n_paired, ps.unpaired, ps.test, ps.p_value
    cell.delta, cell.n_resamples, cell.seed, cell.reason = ps.delta, ps.n_resamples, ps.seed, ps.reason
    if ps.baseline_mean is not None and ps.candidate_mean is not None and ps.baseline_mean != ps.candidate_mean:
        cell.better = b.label if direction.better(ps.candidate_mean, ps.baseline_mean) else a.label
    return cell


# ----------------------------------------------------------------------------- the leaderboard
@gc_paused()
def leaderboard(runs: Sequence[Any], *, metrics: Iterable[str] | None = None, confidence: float = 0.95,
                binary_ci: str = "wilson",
                alpha: float = 0.05, n_resamples: int = 10_000, seed: int = 0, pairwise: bool = True,
                cost_axis: str = "auto", quality: Iterable[str] | None = None,
                fail_under: Mapping[str, float] | None = None, fail_over: Mapping[str, float] | None = None,
                baseline: Any = None, max_regression: Any = None,
                failed_cells: Iterable[Any] | None = None) -> Leaderboard:
    """Rank ``runs`` (RunResults or paths) on every metric. Pure: reads the
    results and their per-sample tables, writes nothing. ``failed_cells``:
    a sweep manifest's cells (the failed ones are listed)."""
    if binary_ci not in BINARY_CI:
        raise ConfigError(f"binary_ci must be one of {', '.join(BINARY_CI)}, got {binary_ci!r}")
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0 < alpha < 1 or not 0 < confidence < 1:
        raise ConfigError("alpha and confidence must be in (0, 1)")
    loaded = [load(r) for r in runs]
    if not loaded:
        raise ConfigError("a leaderboard needs at least one run")
    unique_labels(loaded)
    fail_under, fail_over = dict(fail_under or {}), dict(fail_over or {})
    validate_threshold_gates([r.result for r in loaded], fail_under, fail_over)
    limits = normalize_max_regression(max_regression)
    if limits and baseline is None:
        raise ConfigError("--max-regression needs --baseline FILE on a leaderboard")
    have = list(dict.fromkeys(m for r in loaded for m in r.result.metrics))
    names = have if metrics is None else list(dict.fromkeys(metrics))
    missing = [m for m in names if m not in have]
    if missing:
        raise ConfigError(f"metric(s) {', '.join(missing)} in none of the runs (metrics: {', '.join(have) or 'none'})")
    qual = list(names) if quality is None else list(dict.fromkeys(quality))
    if [q for q in qual if q not in names]:
        raise ConfigError(f"quality metric(s) {', '.join(q for q in qual if q not in names)} not on the leaderboard")
    axis, axis_note = choose_axis(cost_axis, [r.result for r in loaded])
    base = load(baseline) if baseline is not None else None
    boards = {m: _board(m, loaded, confidence=confidence, binary_ci=binary_ci, alpha=alpha, n_resamples=n_resamples,
                        seed=seed, pairwise=pairwise, baseline=base)
              for m in names}
    lb = Leaderboard(runs=[RunRef.of(r) for r in loaded], metrics=boards, cost_axis=axis,
                     cost=[cost_row(r.label, r.result, names) for r in loaded], pareto={}, confidence=confidence,
                     binary_ci=binary_ci, alpha=alpha, n_resamples=n_resamples, seed=seed,
                     failed_cells=failed_cells_of(failed_cells))
    if axis_note:
        lb.notes.append(axis_note)
    by_label = {r.label: r for r in loaded}
    if axis is not None:
        for m in qual:
            board = boards[m]
            pf = ParetoFront(metric=m, direction=board.direction, axis=axis)
            points = []
            for e in board.entries:
                c = AXES[axis](by_label[e.run].result)
                if e.rank is None:
                    pf.excluded[e.run] = e.excluded or "not ranked"
                elif c is None:
                    pf.excluded[e.run] = f"no {axis} recorded"
                else:
                    points.append((e.run, float(e.mean), float(c)))  # type: ignore[arg-type]
            pf.front, pf.dominated = pareto_front(points, board.direction)
            lb.pareto[m] = pf
    for ref, r in zip(lb.runs, loaded):
        if r._scores is not None:
            ref.samples_reason = r._scores[1]
    for r in loaded:
        lb.gates += threshold_gates(r.result, r.label, fail_under, fail_over)
    if base is not None:
        lb.baseline = RunRef.of(base)
        for r in loaded:
            cmp = compare(base, r, metrics=[m for m in names if m in r.result.metrics or m in base.result.metrics],
                          alpha=alpha, n_resamples=n_resamples, seed=seed, confidence=confidence,
                          max_regression=limits or None)
            lb.comparisons[r.label] = cmp
            lb.gates += cmp.gates
    return lb
