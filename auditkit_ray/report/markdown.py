"""Markdown for pull requests: GitHub-flavoured tables.

Order: the decision (which run to ship, when a rule asked for one), regressions
against the baseline (when one is given, worst first), gates (failed first),
the leaderboard ranked by the primary metric with intervals and significance
marks, per-metric detail, quality vs cost with the primary metric's Pareto
fronts against latency, size and cost, and the runs' fingerprints. Text from the
data is backslash-escaped so a run or metric name cannot break a table or
inject markup.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..compare import text as tx
from ..compare.report import gate_summary, verdict

_SPECIAL = re.compile(r"([\\`*_\[\]<>|#!~&{}])")


def esc(v: Any) -> str:
    """One table cell: markup characters escaped, newlines flattened."""
    s = "" if v is None else str(v)
    s = " ".join(s.split())
    return _SPECIAL.sub(r"\\\1", s)


def table(head: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> list[str]:
    """A GitHub table; ``align`` per column: 'l', 'r' or 'c' (cells are
    already escaped)."""
    align = list(align or ["l"] * len(head))
    sep = {"l": ":---", "r": "---:", "c": ":---:"}
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(sep[a] for a in align) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _ci(lo: float | None, hi: float | None) -> str:
    return tx.interval(lo, hi)


def _mean_cell(report: Any, metric: str, label: str, marks: dict[str, str]) -> str:
    board = report.board.metrics[metric]
    e = next((e for e in board.entries if e.run == label), None)
    if e is None or e.mean is None:
        return "–"
    if e.rank is None:
        return f"{tx.num(e.mean)} (not ranked)"
    mean = f"**{tx.num(e.mean)}**" if e.tied_with_best else tx.num(e.mean)
    ci = f" {esc(_ci(e.ci_low, e.ci_high))}" if e.ci_low is not None else ""
    mark = f" {marks[label]}" if label in marks else ""
    return mean + ci + mark


def format_markdown(report: Any, *, max_samples: int = 10) -> str:
    """The report as Markdown: its sections in order, each a step of its own."""
    primary = report.primary or (report.metrics[0] if report.metrics else None)
    lines = _header(report)
    lines += _decision(report)
    if report.baseline is not None:
        lines += _regressions(report, max_samples)
    lines += _gates(report)
    lines += _leaderboard(report, primary)
    lines += _per_metric(report)
    lines += _quality_vs_cost(report, primary)
    lines += _runs(report)
    lines += _failed_cells(report)
    lines.append(
        f"**Result: {esc(verdict(report.board))}** ({esc(gate_summary(report.board))}) · "
        f"generated {esc(report.generated_at)} by auditkit-ray")
    return "\n".join(lines) + "\n"


def _header(report: Any) -> list[str]:
    """The title with the verdict's mark, what the report covers, and its notes."""
    lb = report.board
    status = "✅" if report.ok else "❌"
    lines = [f"## {status} auditkit-ray report: {esc(report.title)}", ""]
    bits = [f"{len(report.runs)} run(s)"]
    for sw in report.sweeps:
        bits.append(f"sweep {esc(sw.name)} (`{sw.fingerprint[:12]}`)")
    if report.baseline is not None:
        bits.append(f"baseline **{esc(report.baseline.label)}**")
    bits.append(f"{lb.confidence:.0%} intervals (binary: {lb.binary_ci})")
    bits.append(f"pairwise paired tests Holm-adjusted at α = {lb.alpha:g}")
    lines += ["; ".join(bits) + ".", ""]
    lines += [f"> {esc(n)}" for n in report.notes]
    if report.notes:
        lines.append("")
    return lines


def _decision(report: Any) -> list[str]:
    """Which run to ship: the line to act on, the rule, and every candidate's verdict."""
    d = report.decision
    if d is None:
        return []
    from ..compare.decision import excluded_text, ordered

    lines = ["### Decision", "", f"**{esc(d.headline())}**", "", f"Rule: {esc(d.rule_text())}.", ""]
    rows = []
    for c, r in zip(ordered(d), d.rows()):
        mark = "✅ " if c.verdict == "non-inferior" else "❌ " if c.verdict == "inferior" else ""
        rows.append([esc(r["run"]) + (" (recommended)" if c.run == d.recommended else ""), mark + esc(r["verdict"]),
                     r["delta"], r["bound"], r["p_holm"], r["n"], esc(excluded_text(c)), r["n_needed"],
                     esc(r["size"]), r["latency"], esc(r["saving"]), esc(r["why"])])
    lines += table(["candidate", "verdict", "Δ", f"bound ({d.confidence:.0%}, Holm)", "Holm p", "n paired",
                    "excluded (unscored)", "n needed", "size", "p50 s", "saving", "note"], rows,
                   ["l", "l", "r", "r", "r", "r", "l", "r", "r", "r", "l", "l"])
    lines += [f"Δ: candidate − baseline on the paired samples; bound: the worst plausible Δ at the level Holm's "
              f"step tested it at (non-inferior when it stays within {esc(d.margin_text())}); n needed: paired "
              "samples at which the test would decide at the observed difference.", ""]
    return lines


_GRADES = {"fail": "❌ fail", "warn": "⚠️ warn", "pass": "pass", "n.s.": "n.s.", "not comparable": "not comparable"}


def _regressions(report: Any, max_samples: int) -> list[str]:
    """Regressions against the baseline, worst first, and the samples they got newly wrong."""
    lb, base = report.board, esc(report.baseline.label)
    regs = report.regressions()
    lines = [f"### Regressions vs {base}", ""]
    if not regs:
        return lines + [f"No regressions against {base}.", ""]
    rows = []
    for label, mc in regs:
        p = mc.paired
        pv = tx.pval(p.p_value) if p is not None and p.p_value is not None else "–"
        sig = " †" if mc.significant else ""
        rows.append([esc(label), esc(mc.name), mc.direction.arrow, tx.num(mc.baseline_mean),
                     tx.num(mc.candidate_mean),
                     esc(tx.signed(mc.delta)), esc(tx.pct(mc.retention)), pv + sig, _GRADES.get(mc.grade, mc.grade),
                     esc("; ".join(mc.reasons))])
    lines += table(["run", "metric", "dir", "baseline", "candidate", "Δ", "retention", "p", "grade", "why"],
                   rows,
                   ["l", "l", "c", "r", "r", "r", "r", "r", "l", "l"])
    lines += [f"† paired test significant at α = {lb.alpha:g}.", ""]
    return lines + _newly_wrong(regs, max_samples)


def _newly_wrong(regs: list, max_samples: int) -> list[str]:
    wrong = [(label, mc) for label, mc in regs
             if mc.paired is not None and mc.paired.diff is not None and mc.paired.diff.newly_wrong]
    if not wrong:
        return []
    lines = ["<details><summary>Newly wrong samples</summary>", ""]
    for label, mc in wrong:
        keys = mc.paired.diff.newly_wrong
        shown = ", ".join(esc(k[0] if k[1] == 0 else f"{k[0]}#{k[1]}") for k in keys[:max_samples])
        more = f" and {len(keys) - max_samples} more" if len(keys) > max_samples else ""
        lines.append(f"- {esc(label)} · {esc(mc.name)}: {len(keys)} newly wrong "
                     f"({len(mc.paired.diff.newly_right)} newly right): "
                     f"{shown}{more}")
    return lines + ["", "</details>", ""]


def _gates(report: Any) -> list[str]:
    """The gates, failed first."""
    gates = report.board.gates
    if not gates:
        return []
    rows = [[("❌ FAIL" if not g.passed else "✅ ok"), esc(g.run), esc(g.gate), esc(g.reason)]
            for g in sorted(gates, key=lambda g: g.passed)]
    return ["### Gates", ""] + table(["result", "run", "gate", "reason"], rows)


def _leaderboard(report: Any, primary: str | None) -> list[str]:
    """One row per run, ranked by the first metric: means, intervals and significance marks."""
    lb = report.board
    lines = ["### Leaderboard", ""]
    marks = {m: report.significance(m) for m in report.metrics}
    head = ["#", "run"] + [f"{esc(m)} {lb.metrics[m].direction.arrow}" for m in report.metrics] + ["n"]
    rows = []
    for label in _run_order(report, primary):
        e = next((e for e in lb.metrics[primary].entries if e.run == label), None) if primary else None
        rank = str(e.rank) if e is not None and e.rank is not None else "–"
        n = max(
            (report.run(label).result.metrics[m].n for m in report.metrics if m in report.run(label).result.metrics),
            default=0)
        name = esc(label) + (" (baseline)" if report.baseline is not None and label == report.baseline.label else "")
        rows.append([rank, name] + [_mean_cell(report, m, label, marks[m]) for m in report.metrics] + [str(n)])
    lines += table(head, rows, ["r", "l"] + ["r"] * len(report.metrics) + ["r"])
    legend = [f"**bold**: best, or tied with the best ({lb.confidence:.0%} intervals overlap)",
              "†: significantly worse than the best (paired test, Holm-adjusted)"]
    if report.baseline is not None:
        legend.append(f"▲/▼: significantly better/worse than the baseline (paired test, α = {lb.alpha:g})")
    lines.append("; ".join(legend) + ". Ranked by " + (f"{esc(primary)}" if primary else "-") + ".")
    return lines + [""]


def _per_metric(report: Any) -> list[str]:
    """Each metric's board (rank, mean, interval and its method, n, unscored counts), then flaky samples."""
    lines = ["<details><summary>Per-metric detail</summary>", ""]
    any_flaky = any(s.flaky for run in report.runs for s in run.result.metrics.values())
    for m, board in report.board.metrics.items():
        better = "higher" if board.direction.value == "maximize" else "lower"
        if board.tie:
            win = "tie: " + ", ".join(esc(w) for w in board.winners)
        else:
            win = f"winner: {esc(board.winners[0])}" if board.winners else "no winner"
        lines += [f"#### {esc(m)} {board.direction.arrow} ({better} is better, {board.aggregation}); {win}", ""]
        rows = []
        for e in board.entries:
            r = report.run(e.run).result.metrics.get(m)
            c = r.counts if r else {}
            uns = f"{r.unscored} ({c.get('unknown', 0)}/{c.get('not_tested', 0)}/{c.get('error', 0)})" if r else "–"
            rows.append([str(e.rank) if e.rank is not None else "–", esc(e.run), tx.num(e.mean),
                         esc(_ci(e.ci_low, e.ci_high)),
                         esc(e.ci_method or "-"), str(e.n), uns]
                        + ([str(r.flaky) if r else "–"] if any_flaky else []) + [esc(e.excluded or e.ci_note or "")])
        lines += table(["rank", "run", "mean", "interval", "method", "n", "unscored (unknown/not tested/error)"]
                       + (["flaky"] if any_flaky else []) + ["note"], rows,
                       ["r", "l", "r", "r", "l", "r", "r"] + (["r"] if any_flaky else []) + ["l"])
    lines += ["</details>", ""]
    return lines + (_flaky(report) if any_flaky else [])


def _flaky(report: Any) -> list[str]:
    lines = ["<details><summary>Flaky samples (repeats that disagree)</summary>", ""]
    for run in report.runs:
        for m, s in run.result.metrics.items():
            if s.flaky:
                more = f" and {s.flaky - len(s.flaky_samples)} more" if s.flaky > len(s.flaky_samples) else ""
                lines.append(f"- {esc(run.label)} · {esc(m)}: {s.flaky} flaky: "
                             f"{', '.join(esc(x) for x in s.flaky_samples)}{more}")
    return lines + ["", "</details>", ""]


def _quality_vs_cost(report: Any, primary: str | None) -> list[str]:
    """Each run's metrics beside its latency, throughput, tokens, size and cost, with the Pareto front."""
    lb = report.board
    if not lb.cost:
        return []
    lines = ["### Quality vs cost", ""]
    for axis, pf in report.fronts.items():
        lines.append(f"- Pareto front, {esc(pf.metric)} {pf.direction.arrow} vs {esc(axis)} ↓ (cheapest first): "
                     f"{esc(', '.join(pf.front) or '-')}")
    if report.fronts:
        lines.append("")
    front = lb.pareto.get(primary) if primary else None
    head = ["run"] + [esc(m) for m in report.metrics] + ["p50 s", "samples/s", "tokens in+out", "size", "cost"]
    if front is not None:
        head.append(f"Pareto ({esc(primary)} vs {esc(front.axis)})")
    rows = []
    for c in lb.cost:
        row = [esc(c.run)] + [tx.num(c.metrics.get(m)) for m in report.metrics] + [
            tx.num(c.latency_p50_s, 3), tx.num(c.throughput_samples_per_s, 1),
            f"{c.prompt_tokens}+{c.completion_tokens}",
            esc(tx.size(c.model_size_bytes)), tx.num(c.cost, 4)]
        if front is not None:
            if c.run in front.front:
                row.append("✓ front")
            else:
                row.append(f"dominated by {esc(front.dominated[c.run])}" if c.run in front.dominated else "–")
        rows.append(row)
    lines += table(head, rows, ["l"] + ["r"] * (len(head) - 1))
    for n in lb.notes:
        lines += [f"> {esc(n)}", ""]
    return lines


def _runs(report: Any) -> list[str]:
    """The runs' fingerprints, dataset fingerprints, models, sizes and package versions."""
    rows = []
    for r in report.runs:
        res = r.result
        model = (res.config or {}).get("model") or res.backend or {}
        what = ", ".join(f"{k}={v}" for k, v in model.items()
                         if k in ("type", "path", "name", "quantization", "dtype") and v is not None)
        rows.append([esc(r.label), f"`{res.fingerprint[:16]}`", f"`{(res.dataset_fingerprint or '-')[:12]}`",
                     esc(what or "-"),
                     str(res.perf.samples), str(res.error_count), esc(res.package_version)])
    return (["<details><summary>Runs and fingerprints</summary>", ""]
            + table(["run", "fingerprint", "dataset", "model", "samples", "errors", "version"], rows)
            + ["</details>", ""])


def _failed_cells(report: Any) -> list[str]:
    """A sweep's cells that left no result (not ranked)."""
    if not report.failed_cells:
        return []
    return ([f"### Failed cells ({len(report.failed_cells)}: no result, not ranked)", ""]
            + table(["cell", "reason", "attempts", "run fingerprint"],
                    [[esc(c.name), esc(c.reason), str(c.attempts or "-"), f"`{(c.fingerprint or '-')[:16]}`"]
                     for c in report.failed_cells])
            + [""])


def _run_order(report: Any, primary: str | None) -> list[str]:
    if primary is None:
        return [r.label for r in report.runs]
    board = report.board.metrics[primary]
    ranked = [e.run for e in board.entries if e.rank is not None]
    return ranked + [r.label for r in report.runs if r.label not in ranked]
