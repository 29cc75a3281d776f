"""Which checkpoint to ship: every candidate against the baseline by a one-sided non-inferiority test on the
primary metric, Holm-adjusted across candidates, and the preferred one among those that qualify.

A ``DecisionRule`` (a sweep file's ``decision:`` section, or the ``--primary/--margin/--prefer`` flags) names
the primary metric, the baseline run, the margin (absolute in the metric's units, ``0.02``, or relative to
the baseline's mean, ``"2%"``: converted once with the baseline's mean over its scored samples), the
confidence (one-sided: ``alpha = 1 - confidence``), what to prefer among qualifying candidates (an order of
``size``, ``latency``, ``cost``, ``quality``) and the test (``auto``: Tango's score test for binary scores, the
studentized bootstrap for continuous ones; ``compare.noninferiority``).

Per candidate (``decide``): the samples both runs scored are paired exactly as every other paired statistic
pairs them (``samples.pair``); samples scored on one side only, or on neither, are excluded and counted.
Verdicts:

- ``non-inferior``: Holm-adjusted p <= alpha (the one-sided bound at the level Holm's step tested it at lies
  above ``-margin``);
- ``inferior``: the one-sided upper bound at the rule's confidence lies below ``-margin`` (worse by more
  than the margin; not adjusted: it only ever removes a candidate);
- ``inconclusive``: neither; ``n_needed`` is the number of paired samples at which the test would decide at
  the observed difference and spread (normal approximation at Holm's strictest level, alpha / candidates);
- ``not comparable``: no test: the metric is missing, the datasets or metric identities differ, the metric
  is a corpus metric (its per-sample scores do not average to it), no sample is scored in both, or the
  cell failed and left no result.

The recommendation is the first qualifying candidate by the preference order (a missing figure sorts last;
``quality``: the largest observed advantage; ties: the larger advantage, then the name), with its size,
latency and cost saving against the baseline; with none qualifying, the baseline stays and the closest
candidate (the highest lower bound) is named with its bound.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..core.metric import Direction
from ..errors import ConfigError
from . import stats as st
from . import text as tx
from .gates import Limit
from .noninferiority import METHODS, NIResult, n_needed, noninferiority
from .pairs import dataset_check, metric_check
from .samples import LoadedRun, load, match_run, pair, unique_labels

#: what a candidate can be preferred for: (RunResult perf attribute, the saving in words)
PREFER = {"size": ("model_size_bytes", "smaller"), "latency": ("latency_p50_s", "lower latency"),
          "cost": ("cost", "cheaper"), "quality": (None, "better")}
VERDICTS = ("non-inferior", "inferior", "inconclusive", "not comparable")


@dataclass
class DecisionRule:
    """What to decide: the sweep file's ``decision:`` section, or the command line's flags."""

    metric: str
    margin: Any
    baseline: str | None = None
    confidence: float = 0.95
    prefer: list[str] = field(default_factory=lambda: ["size", "latency", "cost"])
    method: str = "auto"

    @classmethod
    def parse(cls, data: Any, where: str = "decision") -> "DecisionRule":
        """A rule from a mapping (the file's section) or a rule; a ConfigError names the field."""
        if isinstance(data, DecisionRule):
            rule = data
        elif isinstance(data, Mapping):
            unknown = set(data) - {"metric", "margin", "baseline", "confidence", "prefer", "method"}
            if unknown:
                raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
            if not data.get("metric"):
                raise ConfigError(f"{where}.metric: name the primary metric (as results name it: exact_match@number)")
            if data.get("margin") is None:
                raise ConfigError(f"{where}.margin: give the non-inferiority margin (0.02, or 2% of the baseline)")
            rule = cls(metric=str(data["metric"]), margin=data["margin"], baseline=data.get("baseline"),
                       confidence=data.get("confidence", 0.95) if data.get("confidence") is not None else 0.95,
                       prefer=list(_prefer_list(data.get("prefer"), where)) if data.get("prefer") is not None
                       else ["size", "latency", "cost"], method=str(data.get("method") or "auto"))
        else:
            raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
        limit = Limit.parse(rule.margin, f"{where}.margin")
        if limit.value <= 0:
            raise ConfigError(f"{where}.margin: {rule.margin!r} must be above 0")
        if not isinstance(rule.confidence, (int, float)) or not 0.5 < float(rule.confidence) < 1:
            raise ConfigError(f"{where}.confidence: {rule.confidence!r} must be in (0.5, 1), e.g. 0.95")
        rule.prefer = list(_prefer_list(rule.prefer, where))
        if rule.method not in METHODS:
            raise ConfigError(f"{where}.method: {rule.method!r} is not one of {', '.join(METHODS)}")
        return rule

    @property
    def limit(self) -> Limit:
        return Limit.parse(self.margin, "decision.margin")

    @property
    def alpha(self) -> float:
        return 1.0 - float(self.confidence)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "margin": str(self.limit) if self.limit.relative else self.limit.value,
                "baseline": self.baseline, "confidence": self.confidence, "prefer": list(self.prefer),
                "method": self.method}


def merge_rule(stored: Any = None, *, metric: str | None = None, margin: Any = None, baseline: str | None = None,
               confidence: float | None = None, prefer: Any = None, method: str | None = None,
               where: str = "decision") -> DecisionRule | None:
    """A sweep file's (or a sweep directory's) rule with the command line's flags over it; None when neither
    asks for a decision. Flags without a rule to complete need ``--margin`` and ``--primary``."""
    flags = {k: v for k, v in dict(metric=metric, margin=margin, baseline=baseline, confidence=confidence,
                                   prefer=prefer, method=method).items() if v is not None}
    if stored is None and not flags:
        return None
    base = stored.to_dict() if isinstance(stored, DecisionRule) else dict(stored or {})
    if stored is None and set(flags) <= {"baseline"}:
        return None  # --baseline alone is the reports' baseline, not a decision
    if stored is None and (margin is None or metric is None):
        missing = " and ".join(f for f, v in (("--primary METRIC", metric), ("--margin X", margin)) if v is None)
        raise ConfigError(f"a decision needs {missing} (the sweep file's decision: section gives them too)")
    return DecisionRule.parse({**base, **flags}, where)


def _prefer_list(value: Any, where: str) -> list[str]:
    items = [value] if isinstance(value, str) else list(value or [])
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            if part not in PREFER:
                raise ConfigError(f"{where}.prefer: {part!r} is not one of {', '.join(PREFER)}")
            if part not in out:
                out.append(part)
    if not out:
        raise ConfigError(f"{where}.prefer: give at least one of {', '.join(PREFER)}")
    return out


@dataclass
class Candidate:
    """One candidate's verdict against the baseline. Differences and bounds are in the metric's units; the
    ``advantage`` ones read through its direction (positive: the candidate is better)."""

    run: str
    verdict: str
    reason: str | None = None
    method: str | None = None
    n_paired: int = 0
    #: scored in the baseline only (the candidate's sample unscored or missing), in the candidate only, in neither
    excluded_candidate_unscored: int = 0
    excluded_baseline_unscored: int = 0
    excluded_both_unscored: int = 0
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    #: candidate - baseline over the paired samples
    delta: float | None = None
    advantage: float | None = None
    #: one-sided bounds of the advantage at the rule's confidence, and the lower one at Holm's level for it
    lower: float | None = None
    upper: float | None = None
    lower_holm: float | None = None
    #: the worst plausible delta in the metric's units (the bound on the worse side, at Holm's level)
    bound: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    better: int = 0
    worse: int = 0
    same: int = 0
    n_needed: int | None = None
    #: the per-pair variance the test scaled (Tango: at the restricted MLE on the margin; else the sample's)
    variance: float | None = None
    n_resamples: int | None = None
    seed: int | None = None
    note: str | None = None
    model_size_bytes: float | None = None
    latency_p50_s: float | None = None
    cost: float | None = None
    #: axis -> fraction saved against the baseline (0.5: half the baseline's), where both have the figure
    savings: dict[str, float] = field(default_factory=dict)

    @property
    def excluded(self) -> int:
        return self.excluded_candidate_unscored + self.excluded_baseline_unscored + self.excluded_both_unscored


@dataclass
class Decision:
    metric: str
    direction: Direction
    baseline: str
    #: the margin in the metric's units, and as written (``0.02`` or ``2%``)
    margin: float
    margin_spec: str
    confidence: float
    prefer: list[str]
    method: str
    candidates: list[Candidate] = field(default_factory=list)
    recommended: str | None = None
    baseline_figures: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the decision could not be made (the baseline's cell failed): why
    reason: str | None = None

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def qualifying(self) -> list[Candidate]:
        return [c for c in self.candidates if c.verdict == "non-inferior"]

    @property
    def ok(self) -> bool:
        """A candidate qualifies (``--require-candidate`` exits 1 otherwise)."""
        return self.recommended is not None

    def candidate(self, run: str) -> Candidate:
        return next(c for c in self.candidates if c.run == run)

    @property
    def closest(self) -> Candidate | None:
        """The tested candidate nearest to qualifying: the highest Holm-level lower bound."""
        tested = [c for c in self.candidates if c.lower_holm is not None]
        return max(tested, key=lambda c: (c.lower_holm, c.run)) if tested else None

    def counts(self) -> dict[str, int]:
        return {v: sum(c.verdict == v for c in self.candidates) for v in VERDICTS}

    def margin_text(self) -> str:
        worse = "-" if self.direction is Direction.MAXIMIZE else "+"
        rel = f" ({self.margin_spec} of the baseline)" if self.margin_spec.endswith("%") else ""
        return f"{worse}{_g(self.margin)}{rel}"

    def headline(self) -> str:
        """The decision in one line a user can act on."""
        arrow = self.direction.arrow
        if self.reason:
            return f"decision: none: {self.reason}"
        if self.recommended is not None:
            c = self.candidate(self.recommended)
            saved = savings_text(c)
            return (f"decision: ship {c.run} instead of {self.baseline}: non-inferior on {self.metric} {arrow} "
                    f"within {self._within()}: {self._evidence(c)}" + (f"; {saved}" if saved else ""))
        near = self.closest
        why = (f"; the closest, {near.run}, has a {self.confidence:.0%} bound of {tx.signed(near.bound)} against "
               f"a margin of {self.margin_text()}" if near is not None else "")
        return (f"decision: keep {self.baseline}: no candidate is non-inferior on {self.metric} {arrow} within "
                f"{self._within()}{why}")

    def _within(self) -> str:
        rel = f" ({self.margin_spec} of the baseline)" if self.margin_spec.endswith("%") else ""
        return f"{_g(self.margin)}{rel}"

    def _evidence(self, c: Candidate) -> str:
        return (f"delta {tx.signed(c.delta)}, {self.confidence:.0%} bound {tx.signed(c.bound)}, "
                f"{method_label(c.method)}, Holm p {tx.pval(c.p_holm)}, n {c.n_paired}")

    def rule_text(self) -> str:
        tested = sum(c.p_value is not None for c in self.candidates)
        return (f"primary metric {self.metric} {self.direction.arrow}; baseline {self.baseline}; margin "
                f"{self.margin_text()}; one-sided at {self.confidence:.0%} (alpha {self.alpha:g}), Holm across "
                f"{tested} tested candidate(s); prefer {', then '.join(self.prefer)}")

    def rows(self) -> list[dict[str, str]]:
        """One row per candidate, qualifying first, as the reports show them."""
        out = []
        for c in ordered(self):
            out.append({"run": c.run, "verdict": c.verdict, "delta": tx.signed(c.delta),
                        "bound": tx.signed(c.bound), "p_holm": tx.pval(c.p_holm), "n": str(c.n_paired),
                        "excluded": excluded_text(c), "n_needed": str(c.n_needed) if c.n_needed else "-",
                        "method": method_label(c.method) if c.method else "-",
                        "size": tx.size(c.model_size_bytes), "latency": tx.num(c.latency_p50_s, 3),
                        "cost": tx.num(c.cost, 4), "saving": savings_text(c) or "-",
                        "why": c.reason or c.note or ""})
        return out

    def format(self, *, width: int = 120) -> str:
        """The decision block of the terminal: the line to act on, the rule, a row per candidate (the table is
        not wrapped; run names are cut in the middle to fit)."""
        from .report import cut, fit

        lines = fit([self.headline(), f"  rule: {self.rule_text()}"], width)
        counts = self.counts()
        lines.append("  verdicts: " + ", ".join(f"{v} {counts[v]}" for v in VERDICTS if counts[v]))
        rows = self.rows()
        if rows:
            head = ["run", "verdict", "delta", f"bound ({self.confidence:.0%}, Holm)", "Holm p", "n", "excluded",
                    "n needed", "size", "p50 s"]
            keep = [i for i, h in enumerate(head) if h not in ("size", "p50 s")
                    or any(r["size" if h == "size" else "latency"] != "-" for r in rows)]
            short, how = tx.short_labels([self.baseline] + [r["run"] for r in rows], 40)
            if how:
                lines.append(f"  note: {how}")
            body = [[cut(short.get(r["run"], r["run"]), 40), r["verdict"], r["delta"], r["bound"], r["p_holm"],
                     r["n"], r["excluded"].split(" (")[0], r["n_needed"], r["size"], r["latency"]] for r in rows]
            lines += tx.table([head[i] for i in keep], [[row[i] for i in keep] for row in body], indent="  ")
        for c in self.candidates:
            if c.reason:
                lines += fit([f"  {c.run}: {c.reason}"], width)
            elif c.excluded:
                lines += fit([f"  {c.run}: excluded {excluded_text(c)}"], width)
        for n in self.notes:
            lines += fit([f"  note: {n}"], width)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        from .report import jsonable

        return jsonable(self) | {"headline": self.headline(), "ok": self.ok, "alpha": self.alpha,
                                 "counts": self.counts(), "rule": self.rule_text()}


def _g(v: float) -> str:
    return f"{v:.3g}"


def method_label(method: str | None) -> str:
    from .noninferiority import METHOD_NAMES

    return METHOD_NAMES.get(method or "", method or "-")


def excluded_text(c: Candidate) -> str:
    if not c.excluded:
        return "0"
    parts = [f"{c.excluded_candidate_unscored} unscored here" if c.excluded_candidate_unscored else "",
             f"{c.excluded_baseline_unscored} in the baseline" if c.excluded_baseline_unscored else "",
             f"{c.excluded_both_unscored} in both" if c.excluded_both_unscored else ""]
    return f"{c.excluded} (" + ", ".join(p for p in parts if p) + ")"


def savings_text(c: Candidate) -> str:
    """``87% smaller (0.8 MB vs 6.0 MB), 40% lower latency`` (the figures both runs have)."""
    bits = []
    for axis, fraction in c.savings.items():
        words = PREFER[axis][1]
        if round(fraction, 2) == 0:
            continue
        if fraction > 0:
            bits.append(f"{fraction:.0%} {words}")
        else:
            worse = {"size": "larger", "latency": "higher latency", "cost": "dearer"}[axis]
            bits.append(f"{-fraction:.0%} {worse}")
    return ", ".join(bits)


def ordered(decision: Decision) -> list[Candidate]:
    """Candidates as reports list them: the recommended first, then by verdict, then the best bound first."""
    rank = {v: i for i, v in enumerate(VERDICTS)}

    def key(c: Candidate) -> tuple:
        return (c.run != decision.recommended, rank[c.verdict],
                -(c.lower_holm if c.lower_holm is not None else -math.inf), c.run)

    return sorted(decision.candidates, key=key)


# ----------------------------------------------------------------------------- deciding
def _figure(run: LoadedRun, axis: str) -> float | None:
    attr = PREFER[axis][0]
    v = getattr(run.result.perf, attr) if attr else None
    return float(v) if isinstance(v, (int, float)) else None


def decide(runs: Iterable[Any], rule: Any, *, baseline: Any = None, n_resamples: int = 10_000, seed: int = 0,
           failed_cells: Iterable[Any] | None = None) -> Decision:
    """The decision over ``runs`` (RunResults, LoadedRuns or paths) by ``rule`` (a DecisionRule or its mapping).
    ``baseline`` (a run, or a label, name, run id or fingerprint prefix of one of ``runs``) overrides the rule's.
    ``failed_cells``: a sweep manifest's cells; a failed one is a candidate that is not comparable."""
    from .leaderboard import failed_cells_of

    rule = DecisionRule.parse(rule)
    loaded = [load(r) for r in runs]
    unique_labels(loaded)
    failed = failed_cells_of(failed_cells)
    spec = baseline if baseline is not None else rule.baseline
    if spec is None:
        raise ConfigError("decision: name the baseline run (decision.baseline in the sweep file, or --baseline)")
    base = spec if isinstance(spec, LoadedRun) else (match_run(str(spec), loaded) if isinstance(spec, str) else None)
    if base is None and (not isinstance(spec, str) or os.path.exists(spec)):  # a run given by its path or result
        base = load(spec)
    if base is not None and base not in loaded:
        same = next((r for r in loaded if r.result.fingerprint == base.result.fingerprint
                     and r.result.run_id == base.result.run_id), None)
        base = same or base
        if same is None:
            loaded.insert(0, base)
    limit = rule.limit
    out_common = dict(metric=rule.metric, confidence=float(rule.confidence), prefer=list(rule.prefer),
                      method=rule.method, margin_spec=str(limit))
    if base is None:
        gone = next((f for f in failed if spec in (f.name, *f.runs) or (f.fingerprint or "").startswith(str(spec))),
                    None)
        if gone is None:
            names = ", ".join(r.label for r in loaded)
            raise ConfigError(f"decision.baseline {spec!r}: not a run among {names}")
        d = Decision(direction=Direction.MAXIMIZE, baseline=str(spec), margin=limit.value, **out_common)
        d.reason = f"the baseline {spec} has no result (its cell failed: {gone.reason})"
        return d
    summary = base.result.metrics.get(rule.metric)
    if summary is None:
        raise ConfigError(f"decision.metric {rule.metric!r} is not a metric of the baseline {base.label} "
                          f"(metrics: {', '.join(base.result.metrics) or 'none'})")
    if limit.relative:
        if summary.mean is None or summary.mean == 0:
            raise ConfigError(f"decision.margin {limit}: relative to a baseline mean of {summary.mean}: give an "
                              "absolute margin")
        margin = limit.value * abs(summary.mean)
    else:
        margin = limit.value
    d = Decision(direction=summary.direction, baseline=base.label, margin=margin, **out_common)
    d.baseline_figures = {axis: _figure(base, axis) for axis in ("size", "latency", "cost")}
    if limit.relative:
        d.notes.append(f"margin {limit} of the baseline's mean {tx.num(summary.mean)} = {tx.num(margin)}")
    for run in loaded:
        if run is base:
            continue
        d.candidates.append(_candidate(d, rule, base, run, n_resamples=n_resamples, seed=seed))
    for f in failed:
        if f.state == "failed" or f.state == "skipped":
            d.candidates.append(Candidate(run=f.name, verdict="not comparable",
                                          reason=f"no result: the cell {f.state} ({f.reason})"))
    _adjust(d, rule, base, loaded, n_resamples=n_resamples, seed=seed)
    d.recommended = _recommend(d)
    return d


def _candidate(d: Decision, rule: DecisionRule, base: LoadedRun, run: LoadedRun, *, n_resamples: int,
               seed: int) -> Candidate:
    c = Candidate(run=run.label, verdict="not comparable")
    for axis in ("size", "latency", "cost"):
        setattr(c, PREFER[axis][0], _figure(run, axis))
        b, v = d.baseline_figures.get(axis), _figure(run, axis)
        if b is not None and v is not None and b > 0:
            c.savings[axis] = 1.0 - v / b
    sb, sc = base.result.metrics.get(rule.metric), run.result.metrics.get(rule.metric)
    if sc is None:
        c.reason = f"{rule.metric} is not a metric of this run"
        return c
    reasons = dataset_check(base.result, run.result, (base.label, run.label))[0]
    reasons += metric_check(sb, sc, (base.label, run.label))[0]
    if reasons:
        c.reason = "; ".join(reasons)
        return c
    if sb.aggregation == "corpus":  # type: ignore[union-attr]
        c.reason = "a corpus metric: the mean of its per-sample scores is not the metric, so no paired test applies"
        return c
    (xa, ra), (xb, rb) = base.scores(), run.scores()
    if xa is None or xb is None:
        c.reason = f"per-sample scores unavailable: {ra if xa is None else rb}"
        return c
    p = pair(xa, xb, rule.metric)
    c.n_paired = p.n
    c.excluded_candidate_unscored, c.excluded_baseline_unscored = p.scored_only_a, p.scored_only_b
    c.excluded_both_unscored = p.unscored_both
    if p.n == 0:
        c.reason = "no sample is scored in both runs"
        return c
    res = noninferiority(p.a, p.b, margin=d.margin, direction=d.direction, alpha=rule.alpha, method=rule.method,
                         n_resamples=n_resamples, seed=seed)
    _fill(c, res, p.a, p.b, d.direction)
    c.verdict = "inconclusive"
    return c


def _fill(c: Candidate, res: NIResult, a: Sequence[float], b: Sequence[float], direction: Direction) -> None:
    c.method, c.p_value, c.lower, c.upper, c.note = res.method, res.p_value, res.lower, res.upper, res.note
    c.better, c.worse, c.same = res.better, res.worse, res.same
    c.n_resamples, c.seed, c.variance = res.n_resamples, res.seed, res.variance
    c.baseline_mean, c.candidate_mean = sum(a) / len(a), sum(b) / len(b)
    c.delta = c.candidate_mean - c.baseline_mean
    c.advantage = res.difference
    c.lower_holm = res.lower


def _adjust(d: Decision, rule: DecisionRule, base: LoadedRun, loaded: list[LoadedRun], *, n_resamples: int,
            seed: int) -> None:
    """Holm across the tested candidates, each one's bound at the level its step tested it at, and verdicts."""
    tested = [c for c in d.candidates if c.p_value is not None]
    m = len(tested)
    for c, adj in zip(tested, st.holm([c.p_value for c in tested])):
        c.p_holm = adj
    order = sorted(tested, key=lambda c: (c.p_value, c.run))
    by_label = {r.label: r for r in loaded}
    xa = base.scores()[0]
    for step, c in enumerate(order):
        level = d.alpha / (m - step)
        if m > 1 and level != d.alpha:
            p = pair(xa, by_label[c.run].scores()[0], d.metric)  # type: ignore[arg-type]
            c.lower_holm = noninferiority(p.a, p.b, margin=d.margin, direction=d.direction, alpha=level,
                                          method=rule.method, n_resamples=n_resamples, seed=seed).lower
    strict = d.alpha / max(1, m)
    sign = 1.0 if d.direction is Direction.MAXIMIZE else -1.0
    for c in tested:
        c.bound = None if c.lower_holm is None else sign * c.lower_holm
        if c.p_holm is not None and c.p_holm <= d.alpha:
            c.verdict = "non-inferior"
        elif c.upper is not None and c.upper < -d.margin:
            c.verdict = "inferior"
        else:
            c.verdict = "inconclusive"
            probe = NIResult(method=c.method or "", n=c.n_paired, margin=d.margin, alpha=strict,
                             difference=c.advantage, variance=c.variance)
            c.n_needed = n_needed(probe)
    for c in d.candidates:
        if c.verdict == "not comparable" and c.p_value is None and c.reason is None:
            c.reason = c.note or "no test"


def _recommend(d: Decision) -> str | None:
    qual = d.qualifying
    if not qual:
        return None

    def key(c: Candidate) -> tuple:
        parts: list[float] = []
        for axis in d.prefer:
            if axis == "quality":
                parts.append(-(c.advantage or 0.0))
            else:
                v = getattr(c, PREFER[axis][0])
                parts.append(math.inf if v is None else float(v))
        return (*parts, -(c.advantage or 0.0), c.run)

    return min(qual, key=key).run
