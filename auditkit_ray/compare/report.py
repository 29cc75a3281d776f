"""Comparisons and leaderboards for humans (aligned text) and machines (JSON).

``Comparison.format()`` and ``Leaderboard.format()`` call in here, so this
module names their types in words only: importing them (even for type
checking) would make the two modules depend on each other.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Any

from . import text as tx
from .gates import Limit

#: sample ids listed per diff category in the text report
MAX_LISTED = 10


def jsonable(obj: Any) -> Any:
    """Dataclasses, enums, tuples and non-finite floats to plain JSON values
    (a Limit as its written form: ``"2%"`` or ``"0.02"``)."""
    if isinstance(obj, Limit):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)


def _key(k: tuple[str, int]) -> str:
    return k[0] if k[1] == 0 else f"{k[0]}#{k[1]}"


def _ids(keys: list[tuple[str, int]]) -> str:
    shown = ", ".join(_key(k) for k in keys[:MAX_LISTED])
    return shown + (f", ... ({len(keys) - MAX_LISTED} more)" if len(keys) > MAX_LISTED else "")


def _run_line(role: str, ref: Any) -> str:
    src = f"  ({ref.source})" if ref.source else ""
    ds = ref.dataset_fingerprint[:12] if ref.dataset_fingerprint else "-"
    return f"{role:<10} {ref.label}  run {ref.run_id}  fingerprint {ref.fingerprint[:12]}  dataset {ds}{src}"


def format_comparison(c: Any) -> str:
    """A ``Comparison`` as aligned text: runs, the metric table, reasons, per-sample changes, gates."""
    lines = [_run_line("baseline", c.baseline), _run_line("candidate", c.candidate)]
    if c.dataset_comparable:
        lines.append("dataset    same" + (f" ({c.notes[0]})" if c.notes else ""))
    else:
        lines.append("dataset    NOT COMPARABLE: " + "; ".join(c.dataset_reasons))
    th = c.thresholds
    lines.append(f"grading    warn over {th.warn_at}, fail over {th.fail_at} regression; "
                 f"significance at alpha {th.alpha:g} (paired tests: seed {c.seed}, {c.n_resamples} resamples)")
    for ref in (c.baseline, c.candidate):
        if ref.samples_reason:
            lines.append(f"note       {ref.label}: {ref.samples_reason}")
    lines.append("")
    head = ["metric", "dir", "baseline", "candidate", "delta", "retention", "paired", "unpaired", "test", "p", "grade"]
    rows = []
    for m in c.metrics.values():
        p = m.paired
        rows.append([m.name, m.direction.arrow, tx.num(m.baseline_mean), tx.num(m.candidate_mean), tx.signed(m.delta),
                     tx.pct(m.retention), str(p.n_paired) if p else "-", str(p.unpaired) if p else "-",
                     (p.test or "-") if p else "-", tx.pval(p.p_value) if p else "-",
                     m.grade.upper() if m.grade == "fail" else m.grade])
    lines += tx.table(head, rows)
    lines.append("")
    for m in c.metrics.values():
        lines.append(f"{m.name} {m.direction.arrow}: {m.grade} - " + "; ".join(m.reasons))
        p = m.paired
        if p is not None and p.diff is not None:
            d = p.diff
            lines.append(f"  per sample: {len(d.newly_wrong)} newly wrong, {len(d.newly_right)} newly right, "
                         f"{d.still_right} still right, {d.still_wrong} still wrong")
            if d.newly_wrong:
                lines.append(f"  newly wrong: {_ids(d.newly_wrong)}")
            if d.newly_right:
                lines.append(f"  newly right: {_ids(d.newly_right)}")
        elif p is not None and p.n_paired:
            lines.append(f"  per sample: {p.better} better, {p.worse} worse, {p.same} unchanged")
        if p is not None and p.delta is not None:
            ci = (f" [{c.confidence:.0%} CI {tx.signed(p.delta_ci[0])}, {tx.signed(p.delta_ci[1])}]"
                  if p.delta_ci else "")
            test = f"; {p.test}" if p.test else ""
            if p.test and p.n_resamples:
                if p.exact:
                    test += f" (exact over {p.n_resamples} arrangements)"
                else:
                    test += f" (Monte Carlo, {p.n_resamples} resamples, seed {p.seed})"
            elif p.test and p.exact and p.p_value == 1.0 and p.test != "mcnemar exact":
                test += " (no pair differs)"
            lines.append(f"  paired delta {tx.signed(p.delta)} over {p.n_paired} shared samples{ci}{test}")
        for note in m.notes + (p.notes if p else []):
            lines.append(f"  note: {note}")
    if c.gates:
        lines.append("")
        lines.append("gates:")
        for g in c.gates:
            lines.append(f"  {'ok  ' if g.passed else 'FAIL'}  {g.reason}")
    lines.append("")
    fails = c.failures
    if fails:
        lines.append(f"result: {len(fails)} failure(s)")
    elif not any(m.comparable for m in c.metrics.values()):
        lines.append("result: ok, but no metric is comparable (see the reasons above)")
    else:
        lines.append("result: ok")
    for f in fails:
        lines.append(f"  - {f}")
    return "\n".join(lines)


def format_leaderboard(lb: Any) -> str:
    """A ``Leaderboard`` as aligned text: per-metric rankings, pairwise tests, quality vs cost, gates."""
    lines = [f"leaderboard: {len(lb.runs)} runs; {lb.confidence:.0%} intervals (binary: {lb.binary_ci}); "
             f"pairwise paired tests Holm-adjusted at alpha {lb.alpha:g} (seed {lb.seed}, {lb.n_resamples} resamples)"]
    for ref in lb.runs:
        if ref.samples_reason:
            lines.append(f"note: {ref.label}: {ref.samples_reason}")
    for board in lb.metrics.values():
        lines.append("")
        better = "higher" if board.direction.value == "maximize" else "lower"
        if not board.winners:
            win = "no winner"
        else:
            win = f"tie: {', '.join(board.winners)} (intervals overlap)" if board.tie else f"winner: {board.winners[0]}"
        lines.append(f"{board.name} {board.direction.arrow} ({better} is better, {board.aggregation})  {win}")
        rows = []
        for e in board.entries:
            if e.rank is None:
                continue
            rows.append([str(e.rank), e.run + (" *" if e.tied_with_best else ""), tx.num(e.mean),
                         tx.interval(e.ci_low, e.ci_high),
                         e.ci_method or "-", str(e.n)])
        if rows:
            lines += tx.table(["rank", "run", "mean", "interval", "method", "n"], rows, indent="  ")
        for e in board.entries:
            if e.excluded:
                lines.append(f"  excluded {e.run}: {e.excluded}")
            if e.ci_note:
                lines.append(f"  note {e.run}: {e.ci_note}")
        for n in board.notes:
            lines.append(f"  note: {n}")
        if board.pairwise:
            order = board.order()
            cells = {(c.a, c.b): c for c in board.pairwise} | {(c.b, c.a): c for c in board.pairwise}
            head = ["Holm p"] + [str(i + 1) for i in range(len(order))]
            rows = []
            for i, a in enumerate(order):
                row = [f"{i + 1} {a}"]
                for b in order:
                    if a == b:
                        row.append("-")
                        continue
                    c = cells[(a, b)]
                    row.append(("n/a" if c.p_holm is None else tx.pval(c.p_holm)) + ("*" if c.significant else ""))
                rows.append(row)
            lines.append("  pairwise (paired tests, Holm-adjusted p; * significant):")
            lines += tx.table(head, rows, indent="  ")
            for c in board.pairwise:
                if c.reason:
                    lines.append(f"  note {c.a} vs {c.b}: {c.reason}")
    lines.append("")
    lines.append("quality vs cost" + (f" (Pareto cost axis: {lb.cost_axis})" if lb.cost_axis else ""))
    names = list(lb.metrics)
    head = ["run"] + names + ["p50 s", "p95 s", "p99 s", "samples/s", "tokens/s", "tokens in+out", "size", "cost"]
    rows = []
    for r in lb.cost:
        rows.append([r.run] + [tx.num(r.metrics.get(m)) for m in names] +
                    [tx.num(r.latency_p50_s, 3), tx.num(r.latency_p95_s, 3), tx.num(r.latency_p99_s, 3),
                     tx.num(r.throughput_samples_per_s, 1), tx.num(r.tokens_per_s, 1),
                     f"{r.prompt_tokens}+{r.completion_tokens}",
                     tx.size(r.model_size_bytes), tx.num(r.cost, 4)])
    lines += tx.table(head, rows, indent="  ")
    for n in lb.notes:
        lines.append(f"  note: {n}")
    for m, pf in lb.pareto.items():
        lines.append(f"  Pareto front, {m} {pf.direction.arrow} vs {pf.axis} ↓: {', '.join(pf.front) or '-'}")
        for lab, dom in pf.dominated.items():
            lines.append(f"    {lab} is dominated by {dom}")
    if lb.baseline is not None:
        lines.append("")
        lines.append(f"against baseline {lb.baseline.label}:")
        for label, cmp in lb.comparisons.items():
            grades = ", ".join(f"{m.name} {m.grade} ({tx.signed(m.delta)})" for m in cmp.metrics.values())
            lines.append(f"  {label}: {grades}")
    if lb.gates:
        lines.append("")
        lines.append("gates:")
        for g in lb.gates:
            lines.append(f"  {'ok  ' if g.passed else 'FAIL'}  {g.reason}")
    lines.append("")
    lines.append("result: ok" if lb.ok else f"result: {len(lb.failures)} gate(s) failed")
    return "\n".join(lines)
