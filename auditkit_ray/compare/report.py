"""Comparisons and leaderboards for humans (aligned text) and machines (JSON).

``Comparison.format()`` and ``Leaderboard.format()`` call in here, so this
module names their types in words only: importing them (even for type
checking) would make the two modules depend on each other.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from enum import Enum
from typing import Any

from . import text as tx
from .gates import Limit

#: the grading rule in words (comparison.GRADING, repeated: importing comparison here would be a cycle)
GRADING = ("warn over {warn_at}, fail over {fail_at} regression, each only when the paired test is significant at "
           "alpha {alpha:g}; a regression over a threshold that is not significant is n.s.; without a paired test "
           "the thresholds alone decide")

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
    lines += fit(["grading    " + GRADING.format(warn_at=th.warn_at, fail_at=th.fail_at, alpha=th.alpha)
                  + f" (paired tests: seed {c.seed}, {c.n_resamples} resamples)"], 120)
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
    else:
        lines.append("result: ok")
    for f in fails:
        lines.append(f"  - {f}")
    return "\n".join(lines)


def cut(s: str, n: int) -> str:
    """At most ``n`` characters, cut in the middle (run names differ at both ends)."""
    if len(s) <= n:
        return s
    head = (n - 1) // 2
    return s[:head] + "…" + s[len(s) - (n - 1 - head):]


def fit(lines: list[str], width: int) -> list[str]:
    """Lines longer than ``width`` wrapped, continuing under their own indent."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        out += textwrap.wrap(line, width=width, subsequent_indent=indent + "    ", break_on_hyphens=False)
    return out


def verdict(lb: Any) -> str:
    """The result in words: ``ok``, or ``failed: `` and what failed (gates; sweep cells with no result, a
    failed cell is never ok beside the others' ranks)."""
    cells = getattr(lb, "failed_cells", None) or []
    n_failed = sum(1 for c in cells if c.state != "skipped")
    parts = [f"{len(lb.failures)} gate(s) failed"] if lb.failures else []
    parts += [f"{n_failed} sweep cell(s) failed"] if n_failed else []
    parts += [f"{len(cells) - n_failed} skipped"] if len(cells) > n_failed else []
    return "failed: " + ", ".join(parts) if parts else "ok"


def gate_summary(lb: Any) -> str:
    """What decided the result: the gates set and how they went (grades alone decide nothing)."""
    if not lb.gates:
        if getattr(lb, "failed_cells", None):
            return "no gate set: grades are advisory; the failed cells decide the result"
        return "no gate set: the result is ok by default and any grades are advisory"
    failed = len(lb.failures)
    return (f"{len(lb.gates)} gate(s) set, {len(lb.gates) - failed} passed, {failed} failed; grades without a gate "
            "are advisory")


def _vs_best(cells: dict, best: str, run: str) -> str:
    c = cells.get((best, run))
    if c is None:
        return "-"
    if c.p_holm is None:
        return "n/a"
    return tx.pval(c.p_holm) + ("†" if c.significant else "")


def _vs_base(lb: Any, run: str, metric: str) -> str:
    if lb.baseline is None or run == lb.baseline.label:
        return "-" if lb.baseline is None else "baseline"
    cmp = lb.comparisons.get(run)
    mc = cmp.metrics.get(metric) if cmp is not None else None
    if mc is None or not mc.comparable:
        return "n/c"
    p = mc.paired.p_value if mc.paired is not None else None
    return f"{tx.signed(mc.delta)} p={tx.pval(p)} {mc.grade}"


def _methods(entries: list[Any]) -> str:
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.ci_method or "none"] = counts.get(e.ci_method or "none", 0) + 1
    return "; ".join(f"{k} ({v})" if len(counts) > 1 else k for k, v in counts.items())


def format_leaderboard(lb: Any, *, pairwise: bool = False, width: int = 120) -> str:
    """A ``Leaderboard`` as aligned text within ``width`` columns: per metric the ranking with mean, interval, n,
    the Holm-adjusted paired test against the best run and the paired test against the baseline; quality vs cost;
    failed cells; gates. The full pairwise matrix only with ``pairwise`` (it is always in the JSON)."""
    name_w = max(16, min(44, width - (84 if lb.baseline is not None else 62)))
    raw: set[int] = set()  # the --pairwise matrix's lines: a matrix is not wrapped
    short, how = tx.short_labels([r.label for r in lb.runs], name_w)
    lines = [f"leaderboard: {len(lb.runs)} runs; {lb.confidence:.0%} intervals (binary: {lb.binary_ci}); "
             f"paired tests Holm-adjusted at alpha {lb.alpha:g} (seed {lb.seed}, {lb.n_resamples} resamples)"]
    for ref in lb.runs:
        if ref.samples_reason:
            lines.append(f"note: {ref.label}: {ref.samples_reason}")
    if how:
        lines.append(f"note: {how}")
    if lb.failed_cells:
        lines.append("")
        lines.append(f"failed cells: {len(lb.failed_cells)} (no result; not ranked)")
        for f in lb.failed_cells:
            tries = f" after {f.attempts} attempt(s)" if f.attempts else ""
            lines.append(f"  FAILED {f.name}{tries}: {f.reason}")
    for board in lb.metrics.values():
        lines.append("")
        better = "higher" if board.direction.value == "maximize" else "lower"
        if not board.winners:
            win = "no winner"
        elif board.tie:
            shown = ", ".join(short.get(w, w) for w in board.winners[:3])
            more = f" and {len(board.winners) - 3} more" if len(board.winners) > 3 else ""
            win = f"tie: {shown}{more} (intervals overlap: marked *)"
        else:
            win = f"winner: {short.get(board.winners[0], board.winners[0])}"
        lines.append(f"{board.name} {board.direction.arrow} ({better} is better, {board.aggregation})  {win}")
        ranked = board.ranked
        cells = {(c.a, c.b): c for c in board.pairwise} | {(c.b, c.a): c for c in board.pairwise}
        best = ranked[0].run if ranked else ""
        rows = []
        for e in ranked:
            rows.append([str(e.rank), short.get(e.run, e.run) + (" *" if e.tied_with_best else ""), tx.num(e.mean),
                         tx.interval(e.ci_low, e.ci_high), str(e.n),
                         "best" if e.run == best else _vs_best(cells, best, e.run), _vs_base(lb, e.run, board.name)])
        if rows:
            head = ["rank", "run", "mean", "interval", "n", "vs best: Holm p", "vs baseline"]
            if lb.baseline is None:
                head, rows = head[:-1], [r[:-1] for r in rows]
            lines += tx.table(head, rows, indent="  ")
            lines.append(f"  * best or tied with the best (intervals overlap); vs best: paired test against "
                         f"{short.get(best, best)}, Holm-adjusted, † significant"
                         + ("; vs baseline: delta, paired p, grade" if lb.baseline is not None else "")
                         + f"; intervals: {_methods(ranked)}")
        for e in board.entries:
            if e.excluded:
                lines.append(f"  excluded {e.run}: {e.excluded}")
            if e.ci_note:
                lines.append(f"  note {e.run}: {e.ci_note}")
        for n in board.notes:
            lines.append(f"  note: {n}")
        if pairwise and board.pairwise:
            start = len(lines)
            lines += _matrix(board, short)
            raw.update(range(start, len(lines)))
        elif board.pairwise:
            sig = sum(1 for c in board.pairwise if c.significant)
            lines.append(f"  pairwise: {sig} of {len(board.pairwise)} pairs differ significantly (Holm-adjusted); "
                         "the matrix with --pairwise or in --json")
    lines.append("")
    lines.append("quality vs cost" + (f" (Pareto cost axis: {lb.cost_axis})" if lb.cost_axis else ""))
    cols = [("p50 s", lambda r: tx.num(r.latency_p50_s, 3)), ("p95 s", lambda r: tx.num(r.latency_p95_s, 3)),
            ("samples/s", lambda r: tx.num(r.throughput_samples_per_s, 1)),
            ("tokens/s", lambda r: tx.num(r.tokens_per_s, 1)),
            ("tokens in+out", lambda r: f"{r.prompt_tokens}+{r.completion_tokens}"),
            ("size", lambda r: tx.size(r.model_size_bytes)), ("cost", lambda r: tx.num(r.cost, 4))]
    table = [[f(r) for _, f in cols] for r in lb.cost]
    keep = [i for i in range(len(cols)) if any(row[i] != "-" for row in table)]
    head = ["run"] + [cols[i][0] for i in keep]
    # a run no metric ranks (another dataset, nothing scored) is marked, so its cost is not read against the rest
    ranked_anywhere = {e.run for b in lb.metrics.values() for e in b.ranked}
    unranked = {r.run for r in lb.cost} - ranked_anywhere
    lines += tx.table(head, [[short.get(r.run, cut(r.run, name_w)) + (" (not ranked)" if r.run in unranked else "")]
                             + [row[i] for i in keep] for r, row in zip(lb.cost, table)], indent="  ")
    for n in lb.notes:
        lines.append(f"  note: {n}")
    for m, pf in lb.pareto.items():
        out = f" ({len(pf.excluded)} not ranked: {', '.join(short.get(x, x) for x in sorted(pf.excluded))})" \
            if pf.excluded else ""
        lines.append(f"  Pareto front, {m} {pf.direction.arrow} vs {pf.axis} ↓: "
                     f"{', '.join(short.get(x, x) for x in pf.front) or '-'}"
                     f" ({len(pf.dominated)} dominated){out}")
    if lb.baseline is not None:
        lines.append("")
        th = next(iter(lb.comparisons.values())).thresholds if lb.comparisons else None
        rule = GRADING.format(warn_at=th.warn_at, fail_at=th.fail_at, alpha=th.alpha) if th else ""
        lines.append(f"grades against baseline {lb.baseline.label}: {rule}")
    if lb.gates:
        lines.append("")
        lines.append("gates:")
        for g in lb.gates:
            lines.append(f"  {'ok  ' if g.passed else 'FAIL'}  {g.reason}")
    lines.append("")
    lines.append(f"result: {verdict(lb)} ({gate_summary(lb)})")
    return "\n".join(x for i, line in enumerate(lines) for x in ([line] if i in raw else fit([line], width)))


def _matrix(board: Any, short: dict[str, str]) -> list[str]:
    order = board.order()
    cells = {(c.a, c.b): c for c in board.pairwise} | {(c.b, c.a): c for c in board.pairwise}
    head = ["Holm p"] + [str(i + 1) for i in range(len(order))]
    rows = []
    for i, a in enumerate(order):
        row = [f"{i + 1} {short.get(a, a)}"]
        for b in order:
            if a == b:
                row.append("-")
                continue
            c = cells[(a, b)]
            row.append(("n/a" if c.p_holm is None else tx.pval(c.p_holm)) + ("†" if c.significant else ""))
        rows.append(row)
    lines = ["  pairwise (paired tests, Holm-adjusted p; † significant):"]
    lines += tx.table(head, rows, indent="  ")
    for c in board.pairwise:
        if c.reason:
            lines.append(f"  note {c.a} vs {c.b}: {c.reason}")
    return lines
