"""What a report is made of: runs found from paths, their per-sample rows,
and one ``Report`` (leaderboard, baseline comparisons, gates) that every
format (Markdown, JUnit, HTML, JSON, badge, text) renders.

Paths (``expand_inputs``):

- a run directory (holding ``result.json``) or a ``result.json`` file;
- a sweep directory ``<store>/sweeps/<fp>``: its ``sweep.json`` (a finished
  sweep) or else its ``manifest.json`` lists the runs' fingerprints, read from
  ``<store>/runs/<fp>/result.json``; runs without a result yet are left out
  with a note; the failed cells the manifest records (its ``cells`` entries
  whose state is ``failed``, each with a reason) are listed by every format; the decision rule the sweep
  ran with (its ``decision``) makes the report lead with the decision (``compare.decision``);
- a result store root holding exactly one sweep under ``sweeps/``.

pyarrow (per-sample rows) and the statistics load inside the functions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..compare.samples import LoadedRun, load, match_run
from ..core.rowjson import loads as row_loads
from ..errors import ConfigError
from ..store.samples import try_read_samples_table

#: per-sample columns the reports read (others are ignored; missing ones are None)
SAMPLE_COLUMNS = ("shard", "index", "sample_id", "repeat", "prompt", "target", "text", "raw_text", "annotations",
                  "scores",
                  "error", "latency_s")


# ----------------------------------------------------------------------------- inputs
@dataclass
class SweepRef:
    name: str
    fingerprint: str
    path: str


@dataclass
class Inputs:
    runs: list[LoadedRun]
    sweeps: list[SweepRef] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the sweeps' manifest ``cells`` entries (compare.failed_cells_of keeps the failed ones)
    cells: list[Any] = field(default_factory=list)
    #: the decision rule a sweep was run with (the last sweep given that has one)
    decision: dict[str, Any] | None = None


def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{p}: not valid JSON ({exc})") from None


def _is_sweep_dir(p: Path) -> bool:
    return (p.is_dir() and ((p / "sweep.json").is_file() or (p / "manifest.json").is_file())
            and not (p / "result.json").exists())


def _expand_sweep(d: Path, out: Inputs) -> None:
    doc_path = d / "sweep.json" if (d / "sweep.json").is_file() else d / "manifest.json"
    doc = _read_json(doc_path)
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise ConfigError(f"{doc_path}: not a sweep file (no 'runs' list)")
    store = d.parent.parent
    name = str(doc.get("name") or d.name)
    out.sweeps.append(SweepRef(name=name, fingerprint=str(doc.get("fingerprint") or d.name), path=str(d)))
    # the manifest is rewritten as cells end, so it holds the latest state of each (sweep.json may be older)
    manifest = _read_json(d / "manifest.json") if (d / "manifest.json").is_file() else doc
    cells = manifest.get("cells") if isinstance(manifest, dict) else None
    if isinstance(cells, list):
        out.cells += [c for c in cells if isinstance(c, dict)]
    rule = doc.get("decision") or (manifest.get("decision") if isinstance(manifest, dict) else None)
    if isinstance(rule, dict):
        out.decision = rule
    found = 0
    for entry in doc["runs"]:
        fp = entry.get("fingerprint") if isinstance(entry, dict) else None
        if not fp:
            continue
        rj = store / "runs" / str(fp) / "result.json"
        if not rj.is_file():
            state = entry.get("state", "no result") if isinstance(entry, dict) else "no result"
            out.notes.append(f"sweep {name}: run {entry.get('name', fp)} ({str(fp)[:12]}) has no result.json yet "
                             f"({state}); left out")
            continue
        out.runs.append(load(rj))
        found += 1
    if not found:
        failed = [c for c in out.cells if str(c.get("state", "")).lower() == "failed"]
        why = ("; every cell failed: " + "; ".join(f"{c.get('name')}: {c.get('reason')}" for c in failed)
               if failed else "")
        raise ConfigError(f"{d}: sweep {name!r} has no finished run (no runs/<fp>/result.json under {store}){why}")


def expand_inputs(paths: Iterable[str | os.PathLike]) -> Inputs:
    """Runs from run directories, result.json files and sweep directories,
    in the order given (a sweep's runs in the sweep's order)."""
    out = Inputs(runs=[])
    for raw in paths:
        s = str(raw)
        if "://" in s:
            raise ConfigError(f"{s}: reports read local paths; copy the run or sweep directory from the store first")
        p = Path(s)
        if not p.exists():
            raise ConfigError(f"{p}: no such run, result.json or sweep directory")
        if p.is_file():
            out.runs.append(load(p))
        elif (p / "result.json").is_file():
            out.runs.append(load(p))
        elif _is_sweep_dir(p):
            _expand_sweep(p, out)
        elif (p / "sweeps").is_dir():
            sweeps = sorted(x for x in (p / "sweeps").iterdir() if _is_sweep_dir(x))
            if len(sweeps) != 1:
                listed = ", ".join(x.name[:12] for x in sweeps) or "none"
                raise ConfigError(
                    f"{p}: a result store with {len(sweeps)} sweeps ({listed}); name one: {p}/sweeps/<fingerprint>")
            _expand_sweep(sweeps[0], out)
        else:
            raise ConfigError(
                f"{p}: not a run directory (no result.json) nor a sweep directory (no sweep.json or manifest.json)")
    if not out.runs:
        raise ConfigError("no runs to report on")
    return out


# ----------------------------------------------------------------------------- per-sample rows
def _json(v: Any, default: Any) -> Any:
    if v is None:
        return default
    if not isinstance(v, str):
        return v
    try:
        return row_loads(v)
    except (TypeError, ValueError):
        return v


@dataclass
class SampleRow:
    sample_id: str
    repeat: int
    prompt: Any = None
    target: Any = None
    text: str | None = None
    raw_text: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    #: metric name -> Score dict (name, value, status, reason, metadata)
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    latency_s: float | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.sample_id, self.repeat)

    @property
    def label(self) -> str:
        return self.sample_id if self.repeat == 0 else f"{self.sample_id}#{self.repeat}"

    def value(self, metric: str) -> float | None:
        s = self.scores.get(metric)
        if not s or s.get("status", "scored") != "scored":
            return None
        v = s.get("value")
        return float(v) if isinstance(v, (int, float)) else None

    def status(self, metric: str) -> str | None:
        s = self.scores.get(metric)
        return None if s is None else str(s.get("status", "scored"))


def read_samples(run: LoadedRun) -> tuple[list[SampleRow] | None, str | None]:
    """A run's per-sample rows in sample order, or ``(None, reason)``."""
    if "report_samples" not in run.cache:
        run.cache["report_samples"] = _read_samples(run)
    return run.cache["report_samples"]


def _read_samples(run: LoadedRun) -> tuple[list[SampleRow] | None, str | None]:
    table, reason = try_read_samples_table(run.result, SAMPLE_COLUMNS, required=("sample_id",), base_dir=run.base_dir)
    if table is None:
        return None, reason
    return [_sample_row(r) for r in table.to_pylist()], None


def _sample_row(r: dict[str, Any]) -> SampleRow:
    scores = _json(r.get("scores"), [])
    ann = _json(r.get("annotations"), {})
    return SampleRow(
        sample_id=str(r.get("sample_id")), repeat=int(r.get("repeat") or 0), prompt=r.get("prompt"),
        target=_json(r.get("target"), None), text=r.get("text"), raw_text=r.get("raw_text"),
        annotations=ann if isinstance(ann, dict) else {"value": ann},
        scores=({s["name"]: s for s in scores if isinstance(s, dict) and "name" in s}
                if isinstance(scores, list) else {}),
        error=r.get("error"), latency_s=r.get("latency_s"),
    )


class SampleView:
    """A run's per-sample table as the HTML report reads it: a page at a time (``store.paging``). Per metric,
    what picking the worst samples needs is kept as arrays (its scored value, 8 bytes a row); rows are read
    only for the samples shown."""

    def __init__(self, paged: Any, metrics: list[str]) -> None:
        import numpy as np
        import pyarrow.compute as pc

        from ..store.paging import metric_cells

        self.paged = paged
        self.total = paged.total
        self.metrics = metrics
        self.value: dict[str, Any] = {m: np.full(self.total, np.nan) for m in metrics}  # scored values only
        self.scored: dict[str, Any] = {m: np.zeros(self.total, bool) for m in metrics}
        self.failed: dict[str, Any] = {m: np.zeros(self.total, bool) for m in metrics}  # status error
        self.errored = np.zeros(self.total, bool)  # the generation failed
        starts = paged.starts()
        for k in range(len(paged.names)):
            a, b = int(starts[k]), int(starts[k + 1])
            err = paged.read_file(k, ["error"])
            if "error" in err.column_names:  # an error message, not an empty one
                self.errored[a:b] = np.asarray(pc.fill_null(pc.greater(pc.utf8_length(err.column("error")), 0),
                                                            False))
            for m, (status, value) in metric_cells(paged, k, metrics).items():
                ok = np.asarray(pc.fill_null(pc.equal(status, "scored"), False)) & ~np.isnan(value)
                self.scored[m][a:b] = ok
                self.value[m][a:b] = np.where(ok, value, np.nan)
                self.failed[m][a:b] = np.asarray(pc.fill_null(pc.equal(status, "error"), False))

    def binary(self, metric: str) -> bool:
        """Every scored value of ``metric`` is 0 or 1 (and at least one is scored)."""
        import numpy as np

        if metric not in self.value:
            return False
        v = self.value[metric][self.scored[metric]]
        return bool(v.size) and bool(np.isin(v, (0.0, 1.0)).all())

    def rows(self, positions: Any) -> list[SampleRow]:
        return [_sample_row(r) for r in self.paged.rows(list(positions), SAMPLE_COLUMNS)]

    def rows_for(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], SampleRow]:
        where = self.paged.positions_of(keys)
        keys_at = list(where.items())
        return {k: r for (k, _), r in zip(keys_at, self.rows([p for _, p in keys_at]))}

    def worst(self, metrics: list[str], directions: dict[str, Any], n: int) -> tuple[list[SampleRow], str]:
        """The worst rows, errors first, then by the metrics in order (each read through its direction). With a
        binary metric only rows that are wrong on one (or errored) are listed; without one, the n lowest."""
        import numpy as np
        import pyarrow as pa

        errored = self.errored.copy()
        for m in metrics:
            errored |= self.failed[m]
        binary = [m for m in metrics if self.binary(m)]
        if binary:
            pool = errored.copy()
            for m in binary:
                pool |= self.value[m] == (0.0 if directions[m].value == "maximize" else 1.0)
            what = f"wrong on {', '.join(binary)} or errored"
        else:
            pool = errored.copy()
            for m in metrics:
                pool |= self.scored[m]
            what = f"lowest on {', '.join(metrics)}"
        idx = np.nonzero(pool)[0]
        ids, reps = [], []
        starts = self.paged.starts()
        for k in np.unique(np.searchsorted(starts, idx, side="right") - 1):
            t = self.paged.read_file(int(k), ["sample_id", "repeat"])
            sel = idx[(idx >= starts[k]) & (idx < starts[k + 1])] - starts[k]
            ids.append(pa.compute.cast(t.column("sample_id"), pa.string()).take(sel))
            reps.append(t.column("repeat").take(sel).to_numpy(zero_copy_only=False) if "repeat" in t.column_names
                        else np.zeros(len(sel), np.int64))
        cols = {"e": (~errored[idx]).astype(np.int8)}
        for j, m in enumerate(metrics):
            v = self.value[m][idx]
            cols[f"m{j}"] = np.where(np.isnan(v), np.inf, v if directions[m].value == "maximize" else -v)
        cols["s"] = pa.chunked_array(ids, pa.string()) if ids else pa.array([], pa.string())
        cols["r"] = np.concatenate(reps).astype(np.int64) if reps else np.empty(0, np.int64)
        table = pa.table(cols)
        keys = [("e", "ascending")] + [(f"m{j}", "ascending") for j in range(len(metrics))] + [
            ("s", "ascending"), ("r", "ascending")]
        top = pa.compute.sort_indices(table, sort_keys=keys).to_numpy()[:n]
        rows = self.rows(idx[top])
        return rows, f"{len(idx)} {what}" if binary else what


def sample_view(run: LoadedRun) -> tuple[SampleView | None, str | None]:
    """A run's per-sample table, paged (``SampleView``), or ``(None, reason)``."""
    if "report_view" not in run.cache:
        from ..store.paging import PagedTable
        from ..store.samples import first_line, samples_location, table_store

        try:
            path = samples_location(run.result, run.base_dir)
            store = table_store(run.result, path)
            paged = PagedTable(path if store is not None else path.removeprefix("file://"), store)
            if not paged.names:
                raise ConfigError(f"per-sample table {path} does not exist")
            if "sample_id" not in paged.schema_names():
                raise ConfigError(f"per-sample table {path} lacks column(s) sample_id")
            run.cache["report_view"] = (SampleView(paged, sorted(run.result.metrics)), None)
        except ConfigError as exc:
            run.cache["report_view"] = (None, str(exc))
        except ImportError:
            run.cache["report_view"] = (None, "reading per-sample tables needs pyarrow: pip install "
                                              "'auditkit-ray[ray]'")
        except Exception as exc:  # noqa: BLE001 - whatever makes a stored table unreadable becomes the reason
            run.cache["report_view"] = (None, f"cannot read per-sample table: {first_line(exc)}")
    return run.cache["report_view"]


def binary_metric(rows: list[SampleRow], metric: str) -> bool:
    """Every scored value of ``metric`` is 0 or 1 (and at least one is scored)."""
    vals = [v for r in rows if (v := r.value(metric)) is not None]
    return bool(vals) and all(v in (0.0, 1.0) for v in vals)


# ----------------------------------------------------------------------------- the report
@dataclass
class Report:
    title: str
    runs: list[LoadedRun]
    metrics: list[str]
    board: Any  # compare.Leaderboard
    sweeps: list[SweepRef]
    #: the run named by --baseline (None: no baseline given)
    baseline: LoadedRun | None
    notes: list[str]
    generated_at: str
    alpha: float
    confidence: float
    n_resamples: int
    seed: int
    _reference_cmp: dict[str, Any] = field(default_factory=dict)
    #: which run to ship (``compare.Decision``), when a rule asked for one: every format leads with it
    decision: Any = None
    #: the metric the reports rank by: the decision's, else ``--primary``, else the first
    primary: str | None = None
    #: the primary metric's Pareto fronts against each cost axis two or more ranked runs record
    fronts: dict[str, Any] = field(default_factory=dict)

    @property
    def reference(self) -> LoadedRun:
        """The run retention and newly-wrong samples are read against: the
        baseline, else the first run."""
        return self.baseline or self.runs[0]

    @property
    def failures(self) -> list[str]:
        return self.board.failures

    @property
    def failed_cells(self) -> list[Any]:
        """The sweeps' failed cells (compare.FailedCell: name, reason, attempts, fingerprint)."""
        return self.board.failed_cells

    @property
    def ok(self) -> bool:
        """No gate failed and no sweep cell failed."""
        return self.board.ok

    def run(self, label: str) -> LoadedRun:
        for r in self.runs:
            if r.label == label:
                return r
        raise KeyError(label)

    def comparison(self, label: str) -> Any:
        """``compare(reference, run)``: the leaderboard's own when a baseline
        was given, else computed on first use against the first run."""
        if self.baseline is not None:
            return self.board.comparisons.get(label)
        if label not in self._reference_cmp:
            from ..compare import compare

            ref = self.reference
            run = self.run(label)
            names = [m for m in self.metrics if m in run.result.metrics or m in ref.result.metrics]
            self._reference_cmp[label] = compare(ref, run, metrics=names, alpha=self.alpha,
                                                 n_resamples=self.n_resamples,
                                                 seed=self.seed, confidence=self.confidence)
        return self._reference_cmp[label]

    def significance(self, metric: str) -> dict[str, str]:
        """Per run label, significance marks on ``metric``: ``†`` significantly
        worse than the best run (pairwise paired test, Holm-adjusted), ``▲``/``▼``
        significantly better/worse than the baseline (paired test at alpha)."""
        board = self.board.metrics[metric]
        marks: dict[str, str] = {}
        ranked = board.ranked
        if ranked:
            best = ranked[0].run
            cells = {(c.a, c.b): c for c in board.pairwise} | {(c.b, c.a): c for c in board.pairwise}
            for e in ranked[1:]:
                c = cells.get((best, e.run))
                if c is not None and c.significant and c.better == best:
                    marks[e.run] = "†"
        if self.baseline is not None:
            for label, cmp in self.board.comparisons.items():
                if label == self.baseline.label:
                    continue
                mc = cmp.metrics.get(metric)
                if mc is not None and mc.significant:
                    if mc.candidate_better:
                        marks[label] = marks.get(label, "") + "▲"
                    elif mc.candidate_worse:
                        marks[label] = marks.get(label, "") + "▼"
        return marks

    def regressions(self) -> list[tuple[str, Any]]:
        """(run label, MetricComparison) against the baseline, worst first:
        failed grades, then warnings, then regressions over a threshold that
        are not significant (n.s.), then metrics that cannot be compared
        although both runs have them, then regressions within the thresholds;
        runs other than the baseline only."""
        if self.baseline is None:
            return []
        order = {"fail": 0, "warn": 1, "n.s.": 2, "not comparable": 3, "pass": 4}
        out = []
        for label, cmp in self.board.comparisons.items():
            if label == self.baseline.label:
                continue
            for mc in cmp.metrics.values():
                both = mc.baseline_mean is not None and mc.candidate_mean is not None
                if mc.grade in ("fail", "warn") or mc.candidate_worse or (mc.grade == "not comparable" and both):
                    out.append((label, mc))
        out.sort(key=lambda t: (order.get(t[1].grade, 9), -(t[1].relative_regression or t[1].regression or 0.0), t[0],
                                t[1].name))
        return out


def _same(a: LoadedRun, b: LoadedRun) -> bool:
    return a.result.fingerprint == b.result.fingerprint and a.result.run_id == b.result.run_id


def build_report(inputs: Inputs | Iterable[Any], *, metrics: Iterable[str] | None = None, baseline: Any = None,
                 fail_under: Mapping[str, float] | None = None, fail_over: Mapping[str, float] | None = None,
                 max_regression: Any = None, title: str | None = None, confidence: float = 0.95, alpha: float = 0.05,
                 n_resamples: int = 10_000, seed: int = 0, cost_axis: str = "auto",
                 binary_ci: str = "wilson", failed_cells: Iterable[Any] | None = None, decision: Any = None,
                 primary: str | None = None) -> Report:
    """Load the runs (paths, RunResults or an ``Inputs``), rank them and
    check the gates. ``baseline`` is a path, or the label, name, run id or
    fingerprint prefix of one of the runs; a baseline not among the runs is
    added first. ``failed_cells``: sweep manifest cells (the failed ones are
    listed) besides those of the sweep directories given. ``decision``: the
    fields of a decision rule (``compare.DecisionRule``) over the one a sweep
    directory holds, or ``False`` for none; the decision's baseline is the
    report's when ``baseline`` is not given. ``primary``: the metric to rank
    by when no decision names one (default: the first)."""
    from ..compare import leaderboard
    from ..compare.decision import DecisionRule, decide, merge_rule

    if not isinstance(inputs, Inputs):
        items = list(inputs)
        paths = [x for x in items if isinstance(x, (str, os.PathLike))]
        # all paths (none at all included: nothing to report on is an error there) expand sweeps too
        inputs = expand_inputs(paths) if len(paths) == len(items) else Inputs(runs=[load(x) for x in items])
    runs = list(inputs.runs)
    notes = list(inputs.notes)
    rule: DecisionRule | None = None
    if decision is not False:
        flags = decision.to_dict() if isinstance(decision, DecisionRule) else dict(decision or {})
        if inputs.decision is None and flags.get("margin") is None:  # no decision asked for: --primary ranks
            primary = flags.get("metric") or primary
            flags = {}
        rule = merge_rule(inputs.decision, **flags)
        if rule is not None and rule.baseline is None and isinstance(baseline, str):
            rule.baseline = baseline
        if rule is not None and baseline is None:
            baseline = rule.baseline
    base: LoadedRun | None = None
    if baseline is not None:
        if isinstance(baseline, LoadedRun):
            base = baseline
        elif isinstance(baseline, (str, os.PathLike)) and Path(baseline).exists():
            base = load(baseline)
        elif isinstance(baseline, str):
            base = match_run(baseline, runs)
            if base is None:
                names = ", ".join(r.label for r in runs)
                raise ConfigError(f"--baseline {baseline!r}: not a path, nor a run among {names}")
        else:
            base = load(baseline)
        same = next((r for r in runs if _same(r, base)), None)
        if same is not None:
            base = same
        else:
            runs.insert(0, base)
            notes.append(f"baseline {base.label} added to the runs")
    primary = rule.metric if rule is not None else primary
    if primary is not None:
        have = list(dict.fromkeys(m for r in runs for m in r.result.metrics))
        if primary not in have:
            raise ConfigError(f"primary metric {primary!r} is in none of the runs (metrics: {', '.join(have)})")
        metrics = [primary] + [m for m in (metrics or have) if m != primary]
    board = leaderboard(runs, metrics=list(metrics) if metrics else None, confidence=confidence, binary_ci=binary_ci,
                        alpha=alpha,
                        n_resamples=n_resamples, seed=seed, cost_axis=cost_axis, fail_under=fail_under,
                        fail_over=fail_over,
                        baseline=base, max_regression=max_regression,
                        failed_cells=list(inputs.cells) + list(failed_cells or ()))
    if title is None:
        if len(inputs.sweeps) == 1:
            title = inputs.sweeps[0].name
        else:
            title = runs[0].label if len(runs) == 1 else f"{len(runs)} runs"
    report = Report(title=title, runs=runs, metrics=list(board.metrics), board=board, sweeps=list(inputs.sweeps),
                    baseline=base,
                    notes=notes, generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                    alpha=alpha, confidence=confidence, n_resamples=n_resamples, seed=seed)
    report.primary = report.metrics[0] if report.metrics else None
    if rule is not None:
        report.decision = decide(runs, rule, baseline=base, n_resamples=n_resamples, seed=seed,
                                 failed_cells=list(inputs.cells) + list(failed_cells or ()))
    report.fronts = fronts(report)
    return report


#: the cost axes the primary metric's fronts are drawn against, in order (all lower-is-better)
FRONT_AXES = ("latency_p50_s", "model_size_bytes", "cost")


def fronts(report: Report) -> dict[str, Any]:
    """The primary metric's Pareto front against each of FRONT_AXES that two or more ranked runs record."""
    from ..compare.cost import AXES, ParetoFront, pareto_front

    if report.primary is None:
        return {}
    board = report.board.metrics[report.primary]
    out = {}
    for axis in FRONT_AXES:
        pf = ParetoFront(metric=report.primary, direction=board.direction, axis=axis)
        points = []
        for e in board.ranked:
            c = AXES[axis](report.run(e.run).result)
            if c is None:
                pf.excluded[e.run] = f"no {axis} recorded"
            else:
                points.append((e.run, float(e.mean), float(c)))  # type: ignore[arg-type]
        if len(points) < 2:
            continue
        pf.front, pf.dominated = pareto_front(points, board.direction)
        out[axis] = pf
    return out
