"""Today's comparison, row by row: the reader and paired statistics that comparisons used before they read
the per-sample tables column-wise (a ``Cell`` object per sample and metric, Python loops over the pairs).

The reference that ``tests/compare/test_columns.py`` and ``tests/pipeline/test_scale.py`` hold the
column-wise comparison to: ``rowwise()`` puts these functions in place of the package's, so that
``compare`` and ``leaderboard`` run today's path end to end on the same stored runs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

from auditkit_ray.compare import stats as st
from auditkit_ray.compare.pairs import PairedStats, SampleDiff, resolve_corpus_metric
from auditkit_ray.compare.samples import LoadedRun
from auditkit_ray.core.gcpause import gc_paused
from auditkit_ray.core.metric import Direction
from auditkit_ray.core.result import MetricSummary, RunResult
from auditkit_ray.core.rowjson import loads as row_loads
from auditkit_ray.store.samples import samples_location, try_read_samples_table

Key = tuple[str, int]

#: where a cluster id may sit: a table column, or a score's metadata
CLUSTER_KEYS = ("cluster", "cluster_id")


@dataclass(frozen=True, slots=True)
class Cell:
    status: str
    value: float | None
    stats: tuple[float, ...] | None = None
    cluster: str | None = None

    @property
    def scored(self) -> bool:
        return self.status == "scored" and self.value is not None


@dataclass
class RunScores:
    """Per-sample scores of one run: metric name -> key -> Cell."""

    cells: dict[str, dict[Key, Cell]] = field(default_factory=dict)
    keys: set[Key] = field(default_factory=set)
    duplicates: int = 0


@gc_paused()
def read_scores(result: RunResult, base_dir: str | os.PathLike | None = None) -> tuple[RunScores | None, str | None]:
    """Read a run's per-sample scores. Returns ``(scores, None)`` or
    ``(None, reason)``; never raises for an unreadable table."""
    # pairing sorts its keys itself: the table is read as stored, unsorted
    table, reason = try_read_samples_table(result, ["sample_id", "repeat", "scores", *CLUSTER_KEYS],
                                           required=("sample_id", "repeat", "scores"), base_dir=base_dir, sort=False)
    if table is None:
        return None, reason
    path = samples_location(result, base_dir)
    names = table.schema.names
    cluster_col = next((c for c in CLUSTER_KEYS if c in names), None)
    out = RunScores()
    sids = table.column("sample_id").to_pylist()
    reps = table.column("repeat").to_pylist()
    blobs = table.column("scores").to_pylist()
    clusters = table.column(cluster_col).to_pylist() if cluster_col else [None] * len(sids)
    for sid, rep, blob, clus in zip(sids, reps, blobs, clusters):
        key = (str(sid), int(rep or 0))
        if key in out.keys:
            out.duplicates += 1
            continue
        out.keys.add(key)
        try:
            scores = row_loads(blob) if blob else []
        except (TypeError, json.JSONDecodeError):
            return None, f"per-sample table {path}: row {key[0]!r} has unreadable scores JSON"
        for s in scores if isinstance(scores, list) else []:
            if not isinstance(s, dict) or "name" not in s:
                continue
            meta = s.get("metadata") or {}
            stats = meta.get("stats") if isinstance(meta, dict) else None
            cl = clus
            if cl is None and isinstance(meta, dict):
                cl = next((meta[k] for k in CLUSTER_KEYS if meta.get(k) is not None), None)
            value = s.get("value")
            try:
                st = tuple(float(x) for x in stats) if isinstance(stats, (list, tuple)) else None
            except (TypeError, ValueError):
                st = None
            out.cells.setdefault(s["name"], {})[key] = Cell(
                status=str(s.get("status", "scored")),
                value=float(value) if isinstance(value, (int, float)) else None,
                stats=st,
                cluster=None if cl is None else str(cl),
            )
    return out, None


@dataclass
class Pairing:
    """The pairs two runs share on one metric, in sorted key order."""

    keys: list[Key] = field(default_factory=list)
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    a_stats: list[tuple[float, ...] | None] = field(default_factory=list)
    b_stats: list[tuple[float, ...] | None] = field(default_factory=list)
    #: rows present in both tables where only one side is scored
    scored_only_a: int = 0
    scored_only_b: int = 0
    #: rows present in both tables where both sides carry an unscored status
    unscored_both: int = 0
    #: rows present in one table only
    only_in_a: int = 0
    only_in_b: int = 0

    @property
    def n(self) -> int:
        return len(self.keys)

    @property
    def unpaired(self) -> int:
        """Rows scored in one run and unscored (or absent) in the other."""
        return self.scored_only_a + self.scored_only_b


def pair(sa: RunScores, sb: RunScores, metric: str) -> Pairing:
    ca = sa.cells.get(metric, {})
    cb = sb.cells.get(metric, {})
    out = Pairing(only_in_a=len(sa.keys - sb.keys), only_in_b=len(sb.keys - sa.keys))
    for key in sorted(sa.keys & sb.keys):
        x, y = ca.get(key), cb.get(key)
        xs = x is not None and x.scored
        ys = y is not None and y.scored
        if xs and ys:
            out.keys.append(key)
            out.a.append(x.value)  # type: ignore[union-attr,arg-type]
            out.b.append(y.value)  # type: ignore[union-attr,arg-type]
            out.a_stats.append(x.stats)  # type: ignore[union-attr]
            out.b_stats.append(y.stats)  # type: ignore[union-attr]
        elif xs:
            out.scored_only_a += 1
        elif ys:
            out.scored_only_b += 1
        elif x is not None and y is not None:
            out.unscored_both += 1
    # scored rows whose sample the other table lacks altogether are unpaired too
    for key in sa.keys - sb.keys:
        c = ca.get(key)
        if c is not None and c.scored:
            out.scored_only_a += 1
    for key in sb.keys - sa.keys:
        c = cb.get(key)
        if c is not None and c.scored:
            out.scored_only_b += 1
    return out


def _counts(p: Pairing) -> dict[str, int]:
    return dict(n_paired=p.n, unpaired=p.unpaired, scored_only_baseline=p.scored_only_a,
                scored_only_candidate=p.scored_only_b,
                unscored_both=p.unscored_both, only_in_baseline=p.only_in_a, only_in_candidate=p.only_in_b)


def paired_stats(p: Pairing, direction: Direction, aggregation: str = "mean", *, summary: MetricSummary | None = None,
                 n_resamples: int = 10_000, seed: int = 0, confidence: float = 0.95,
                 delta_ci: bool = True) -> PairedStats:
    """Paired test and diff of candidate (``p.b``) against baseline (``p.a``);
    ``delta_ci=False`` skips the bootstrap interval of the difference."""
    out = PairedStats(**_counts(p), confidence=confidence, seed=seed)
    if p.n == 0:
        out.reason = "no sample is scored in both runs"
        return out
    if aggregation == "corpus":
        return _corpus(out, p, summary, n_resamples=n_resamples, seed=seed, confidence=confidence, delta_ci=delta_ci)
    a, b = p.a, p.b
    n = p.n
    out.baseline_mean = sum(a) / n
    out.candidate_mean = sum(b) / n
    out.delta = out.candidate_mean - out.baseline_mean
    for x, y in zip(a, b):
        if x == y:
            out.same += 1
        elif direction.better(y, x):
            out.better += 1
        else:
            out.worse += 1
    out.binary = all(v in (0.0, 1.0) for v in a) and all(v in (0.0, 1.0) for v in b)
    if out.binary:
        good = 1.0 if direction is Direction.MAXIMIZE else 0.0
        d = SampleDiff()
        for key, x, y in zip(p.keys, a, b):
            if x == good and y == good:
                d.still_right += 1
            elif x == good:
                d.newly_wrong.append(key)
            elif y == good:
                d.newly_right.append(key)
            else:
                d.still_wrong += 1
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
    sa, sb = p.a_stats, p.b_stats
    if any(s is None for s in sa) or any(s is None for s in sb):
        out.reason = "some scored samples lack metadata.stats, so the corpus score cannot be resampled"
        return out
    widths = {len(s) for s in sa} | {len(s) for s in sb}  # type: ignore[arg-type]
    if len(widths) != 1:
        out.reason = f"per-sample statistics have different lengths ({sorted(widths)})"
        return out
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


def _clusters(cells: list[tuple[tuple[str, int], Any]]) -> tuple[list[str] | None, str | None]:
    """Cluster ids for scored cells: explicit ids, else sample_id when samples repeat."""
    if any(c.cluster is not None for _, c in cells):
        return [c.cluster if c.cluster is not None else f"sample:{k[0]}" for k, c in cells], "cluster ids"
    sids = [k[0] for k, _ in cells]
    if len(set(sids)) < len(sids):
        return sids, "repeats clustered by sample_id"
    return None, None


def _interval(run: LoadedRun, s: MetricSummary, name: str, *, confidence: float, binary_ci: str, n_resamples: int,
              seed: int) -> dict[str, Any]:
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
    cells = sorted(((k, c) for k, c in scores.cells.get(name, {}).items() if c.scored), key=lambda kc: kc[0])
    if not cells:
        out.update(ci_note="no interval: no scored sample in the per-sample table")
        return out
    notes: list[str] = []
    if len(cells) != s.n:
        notes.append(f"per-sample table has {len(cells)} scored rows, the summary counts {s.n}")
    if s.aggregation == "corpus":
        metric, reason = resolve_corpus_metric(s)
        stats = [c.stats for _, c in cells]
        if metric is None:
            out.update(ci_note=f"no interval: {reason}")
        elif any(x is None for x in stats) or len({len(x) for x in stats}) != 1:  # type: ignore[arg-type]
            out.update(
                ci_note="no interval: scored samples lack consistent metadata.stats to resample the corpus score")
        else:
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
    values = [c.value for _, c in cells]
    n = len(values)
    mean = sum(values) / n  # type: ignore[arg-type]
    if n > 1:
        var = sum((v - mean) ** 2 for v in values) / (n - 1)  # type: ignore[operator]
        out["stderr"] = math.sqrt(var / n)
    clusters, kind = _clusters(cells)
    binary = all(v in (0.0, 1.0) for v in values)
    if clusters is not None:
        res = st.clustered_se(values, clusters)  # type: ignore[arg-type]
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
        k = sum(values)  # type: ignore[arg-type]
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


def _scores(self: LoadedRun) -> tuple[RunScores | None, str | None]:
    if self._scores is None:
        self._scores = read_scores(self.result, self.base_dir)
    return self._scores


@contextlib.contextmanager
def rowwise(monkeypatch: Any) -> Iterator[None]:
    """``compare`` and ``leaderboard`` as they were: these functions in place of the package's."""
    import importlib

    comparison, leaderboard, samples = (importlib.import_module(f"auditkit_ray.compare.{m}")
                                        for m in ("comparison", "leaderboard", "samples"))
    with monkeypatch.context() as m:
        m.setattr(samples.LoadedRun, "scores", _scores)
        for mod in (comparison, leaderboard):
            m.setattr(mod, "pair", pair)
            m.setattr(mod, "paired_stats", paired_stats)
        m.setattr(leaderboard, "_interval", _interval)
        yield
