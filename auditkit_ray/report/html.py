"""A self-contained HTML report: one file, inline CSS, inline SVG and a small
inline script; nothing is fetched (no CDN, no fonts, no images by URL).

The banner states what decided the result: which run to ship (when a decision
rule asked: its line leads the page, and its section, every candidate's
verdict, comes first), the gates set and how they went
(without a gate the grades are advisory), the grading rule (thresholds read
with the paired test: a change that is not significant is ``n.s.``), and the
failed cells of a sweep, which get a section with their reasons.

Sections: the decision, failed cells, regressions against the baseline and gates (when given), a
leaderboard ranked by the primary metric and sortable by any column (click a header; ``#sort=<column>[:asc|desc]``
in the URL sorts on load), a chart per metric with its intervals, retention
curves across the grid the runs span (``grid.detect_grid``), quality against
cost with the Pareto fronts (the primary metric against latency, model size and
cost side by side, the recommended run and the baseline marked), a per-sample drill-down (the worst samples of
each run and the samples newly wrong against the reference run, with the
raw and the extracted answer), and each run's configuration and
fingerprints. Per metric, the matrix of Holm-adjusted pairwise p-values is a
heat map (a sortable table; at many runs the cells carry colour, the value on
hover). Charts keep labels apart: the Pareto chart labels the front only,
every point names its run on hover.

Every text from the data is HTML-escaped; no data is placed inside the
script. The script marks ``<html data-ready="true" data-charts="N">`` once it
has wired the page, and records an uncaught error in ``data-error``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .._version import __version__
from ..compare import text as tx
from ..compare.cost import AXES
from .grid import detect_grid, retention_curves
from .loader import SampleRow, sample_view
from .svg import ci_chart, display_names, e, line_chart, scatter_chart

MAX_CHARTS = 12
SNIPPET = 400
FULL = 20_000

CSS = """
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#fff;--panel:#f6f8fa;--accent:#0969da;--good:#1a7f37;
  --bad:#cf222e;--warn:#9a6700}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;color:var(--fg);
  background:var(--bg)}
header{padding:20px 32px 12px;border-bottom:1px solid var(--line);background:var(--panel)}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:18px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:18px 0 8px}
main{padding:0 32px 40px;max-width:1500px}
nav{margin-top:8px}nav a{margin-right:14px;color:var(--accent);text-decoration:none}
.meta{color:var(--muted);margin:2px 0}
.status{display:inline-block;font-weight:600;padding:2px 10px;border-radius:12px;margin-top:6px}
.status.ok{background:#dafbe1;color:var(--good)}.status.fail{background:#ffebe9;color:var(--bad)}
table{border-collapse:collapse;margin:6px 0 10px;font-variant-numeric:tabular-nums}
th,td{border:1px solid var(--line);padding:5px 9px;vertical-align:top;text-align:left}
th{background:var(--panel);font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;white-space:nowrap}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th:hover{background:#eaeef2}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2";color:var(--accent)}
table.sortable th[aria-sort=descending]::after{content:" \\25BC";color:var(--accent)}
td.best .mean{font-weight:700;color:var(--good)}
.ci{color:var(--muted);font-size:12px}
.mark{color:var(--bad);font-weight:600}
.grade-fail{color:var(--bad);font-weight:600}.grade-warn{color:var(--warn);font-weight:600}
.legend-text,.note{color:var(--muted);font-size:12.5px}
.charts{display:flex;flex-wrap:wrap;gap:18px}
figure{margin:0;padding:10px;border:1px solid var(--line);border-radius:6px;background:#fff}
figcaption{font-weight:600;margin-bottom:4px}
svg.chart text{fill:var(--fg)}
svg.chart .tick{fill:var(--muted);font-size:11px}
svg.chart .grid{stroke:#eaeef2}
svg.chart .axis{stroke:#8c959f}
svg.chart .reference{stroke:#8c959f;stroke-dasharray:4 3}
svg.chart .whisker{stroke:#57606a;stroke-width:1.6}
svg.chart .mark .dot{fill:#8c959f;stroke:#fff;stroke-width:1}
svg.chart .mark.best .dot{fill:var(--accent)}
svg.chart .mark.front .dot{fill:var(--good)}
svg.chart .series{fill:none;stroke-width:2}
svg.chart .front-line{fill:none;stroke:var(--good);stroke-width:1.6;stroke-dasharray:5 3}
svg.chart .point-label{font-size:11px;fill:var(--muted);paint-order:stroke;stroke:#fff;stroke-width:3px;
  stroke-linejoin:round}
svg.chart .mark.hl .dot{stroke:#000;stroke-width:2.5}
svg.chart .mark.hl .label,svg.chart .mark.hl .point-label{font-weight:700;fill:#000}
pre{white-space:pre-wrap;word-break:break-word;margin:0;
  font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
td pre{max-width:360px;max-height:160px;overflow:auto}
.scroll{overflow-x:auto;max-width:100%}
td code.ann{white-space:pre-wrap;word-break:break-word}
details{margin:6px 0}summary{cursor:pointer}
.samples td{font-size:13px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--panel);padding:1px 4px;
  border-radius:4px}
.chip{display:inline-block;padding:0 6px;margin:1px 2px;border-radius:10px;background:var(--panel);font-size:12px;
  white-space:nowrap}
.chip.bad{background:#ffebe9;color:var(--bad)}.chip.good{background:#dafbe1;color:var(--good)}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}dl.kv dt{color:var(--muted)}
dl.kv dd{margin:0}
footer{color:var(--muted);padding:12px 32px;border-top:1px solid var(--line)}
.status.warn{background:#fff8c5;color:var(--warn)}
.decision{margin:6px 0 0;padding-left:18px}.decision li{margin:1px 0}
.grade-n{color:var(--muted)}
table.heat td.hm{text-align:center;font-size:11px;padding:2px 3px;min-width:34px;white-space:nowrap}
table.heat.dense td.hm{min-width:16px;height:16px;padding:0}
table.heat th.rowhead{text-align:left;font-weight:400}
table.heat th.colhead{font-size:11px;padding:2px 3px;text-align:center}
svg.chart .legend-label{font-size:12px}
.ship{font-size:15px;font-weight:600;margin:10px 0 2px;padding:8px 12px;border-left:4px solid var(--good);
  background:#dafbe1;max-width:1200px}
.ship.keep{border-left-color:var(--warn);background:#fff8c5}
tr.recommended td{background:#dafbe1}
td.nowrap{white-space:nowrap}
td.v-non-inferior{color:var(--good);font-weight:600}td.v-inferior{color:var(--bad);font-weight:600}
td.v-inconclusive{color:var(--warn)}td.v-not-comparable{color:var(--muted)}
svg.chart .mark.recommended .dot{fill:var(--good);stroke:#000;stroke-width:2}
svg.chart .mark.baseline .dot{fill:#fff;stroke:var(--fg);stroke-width:2}
"""

JS = r"""
(function () {
  "use strict";
  var root = document.documentElement;
  window.addEventListener("error", function (ev) { root.setAttribute("data-error", String(ev.message || ev)); });
  function key(td) {
    var v = td.getAttribute("data-sort");
    if (v === null) { v = td.textContent.trim(); }
    return v;
  }
  function sortTable(table, th, dir) {
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.getAttribute("data-type") === "num";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var decorated = rows.map(function (row, i) { return { row: row, i: i, k: key(row.cells[idx]) }; });
    decorated.sort(function (a, b) {
      var ka = a.k, kb = b.k, missA = ka === "" || ka === "-", missB = kb === "" || kb === "-";
      if (missA || missB) { return missA === missB ? a.i - b.i : (missA ? 1 : -1); }
      var c;
      if (numeric) { c = parseFloat(ka) - parseFloat(kb); }
      else { c = ka.localeCompare(kb, undefined, { numeric: true }); }
      if (c === 0) { return a.i - b.i; }
      return dir === "asc" ? c : -c;
    });
    decorated.forEach(function (d) { body.appendChild(d.row); });
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === "asc" ? "ascending" : "descending");
    table.setAttribute("data-sorted-by", (th.getAttribute("data-key") || String(idx)) + ":" + dir);
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th) {
      th.tabIndex = 0;
      th.title = th.title || "sort by this column";
      var activate = function () {
        var cur = th.getAttribute("aria-sort");
        var first = th.getAttribute("data-first") || "asc";
        var dir = cur === "ascending" ? "desc" : cur === "descending" ? "asc" : first;
        sortTable(table, th, dir);
      };
      th.addEventListener("click", activate);
      th.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); activate(); }
      });
    });
  });
  // highlight a run across every chart on hover
  var marks = document.querySelectorAll("svg.chart [data-run]");
  Array.prototype.forEach.call(marks, function (m) {
    m.addEventListener("mouseenter", function () {
      var run = m.getAttribute("data-run");
      Array.prototype.forEach.call(marks, function (o) {
        o.classList.toggle("hl", o.getAttribute("data-run") === run);
      });
    });
    m.addEventListener("mouseleave", function () {
      Array.prototype.forEach.call(marks, function (o) { o.classList.remove("hl"); });
    });
  });
  // drill-down: show one run's samples at a time
  var pick = document.getElementById("sample-run");
  if (pick) {
    var show = function () {
      Array.prototype.forEach.call(document.querySelectorAll(".run-samples"), function (d) {
        d.hidden = pick.value !== "*" && d.getAttribute("data-run") !== pick.value;
      });
    };
    pick.addEventListener("change", show);
    show();
  }
  // #sort=<column key>[:asc|desc] sorts the leaderboard on load (links, tests)
  var m = /(?:^#|&)sort=([^&:]+)(?::(asc|desc))?/.exec(location.hash);
  if (m) {
    var want = decodeURIComponent(m[1]);
    var th = Array.prototype.filter.call(document.querySelectorAll("#leaderboard-table th"), function (h) {
      return h.getAttribute("data-key") === want;
    })[0];
    if (th) {
      th.dispatchEvent(new MouseEvent("click", { bubbles: true }));
      if (m[2] && th.getAttribute("aria-sort") !== (m[2] === "asc" ? "ascending" : "descending")) {
        th.dispatchEvent(new MouseEvent("click", { bubbles: true }));
      }
    }
  }
  root.setAttribute("data-charts", String(document.querySelectorAll("svg.chart").length));
  root.setAttribute("data-ready", "true");
})();
"""


def _num(v: float | None, digits: int = 4) -> str:
    return tx.num(v, digits)


def _sort_val(v: float | None) -> str:
    return "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else repr(float(v))


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, indent=1, default=str)


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n] + f" … ({len(s) - n} more)"


def _pre(v: Any, n: int = SNIPPET) -> str:
    s = _text(v)
    if len(s) > n:
        return f'<pre title="{len(s)} characters">{e(s[:n])}<span class="note"> … ({len(s) - n} more)</span></pre>'
    return f"<pre>{e(s)}</pre>"


def _unit(report: Any, metric: str) -> bool:
    vals = [v for r in report.runs if (s := r.result.metrics.get(metric)) is not None
            for v in (s.mean, s.ci_low, s.ci_high) if v is not None]
    return bool(vals) and all(0 <= v <= 1 for v in vals)


# ----------------------------------------------------------------------------- sections
def _decision(report: Any) -> list[str]:
    """What was decided, in words: the gates and their result, the grading rule, the failed cells."""
    from ..compare.report import GRADING, gate_summary

    lb = report.board
    items = [f"Gates: {e(gate_summary(lb))}."]
    if lb.gates:
        failed = [g for g in lb.gates if not g.passed]
        items.append("Gates set: " + e(", ".join(dict.fromkeys(g.gate for g in lb.gates)))
                     + (f"; failed: {e('; '.join(g.reason for g in failed))}" if failed else "; all held") + ".")
    if report.baseline is not None and lb.comparisons:
        th = next(iter(lb.comparisons.values())).thresholds
        items.append(f"Grades against {e(report.baseline.label)}: "
                     + e(GRADING.format(warn_at=th.warn_at, fail_at=th.fail_at, alpha=th.alpha))
                     + ("; they are advisory (no gate reads them)." if not lb.gates else "."))
    if report.failed_cells:
        items.append(f'<a href="#failed">{len(report.failed_cells)} sweep cell(s) failed</a>: they have no result '
                     "and are not ranked.")
    return ['<ul class="decision">'] + [f"<li>{i}</li>" for i in items] + ["</ul>"]


def _header(report: Any) -> list[str]:
    fails = report.failures
    bits = [f"{len(report.runs)} run(s)"]
    for sw in report.sweeps:
        bits.append(f"sweep {e(sw.name)} <code>{e(sw.fingerprint[:12])}</code>")
    if report.baseline is not None:
        bits.append(f"baseline <b>{e(report.baseline.label)}</b>")
    lb = report.board
    bits.append(f"{lb.confidence:.0%} intervals (binary: {e(lb.binary_ci)})")
    bits.append(f"pairwise paired tests Holm-adjusted at α = {lb.alpha:g}")
    from ..compare.report import verdict

    if fails or report.failed_cells:  # a failed cell is never shown beside a green "ok"
        status = ("fail", f"Result: {verdict(lb)}")
    elif lb.gates:
        status = ("ok", f"Result: ok, {len(lb.gates)} gate(s) passed")
    else:
        status = ("ok", "Result: ok (no gate set)")
    pills = [f'<span class="status {status[0]}" id="result-status">{e(status[1])}</span>']
    out = ["<header>", f"<h1>auditkit-ray report: {e(report.title)}</h1>", f'<p class="meta">{" · ".join(bits)}</p>',
           f'<p class="meta">generated {e(report.generated_at)} by auditkit-ray {e(__version__)}</p>',
           " ".join(pills)]
    if report.decision is not None:
        keep = " keep" if report.decision.recommended is None else ""
        out.append(f'<p class="ship{keep}" id="decision-line">{e(report.decision.headline())}</p>')
    out += _decision(report)
    out.append("<nav>")
    links = [("decision", "Decision")] if report.decision is not None else []
    links += [("failed", "Failed cells")] if report.failed_cells else []
    links += [("regressions", "Regressions")] if report.baseline is not None else []
    links += [("gates", "Gates")] if lb.gates else []
    links += [("leaderboard", "Leaderboard"), ("pairwise", "Pairwise"), ("charts", "Charts"),
              ("retention", "Retention"), ("pareto", "Quality vs cost"), ("samples", "Samples"), ("runs", "Runs")]
    out += [f'<a href="#{k}">{v}</a>' for k, v in links]
    out += ["</nav>", "</header>"]
    for n in report.notes:
        out.append(f'<p class="note">{e(n)}</p>')
    return out


def _choice(report: Any) -> list[str]:
    """Which run to ship: the rule and every candidate's verdict, the recommended one first."""
    d = report.decision
    if d is None:
        return []
    from ..compare.decision import excluded_text, ordered

    out = ['<section id="decision"><h2>Decision</h2>', f'<p class="note">{e(d.rule_text())}. Each candidate is '
           "tested against the baseline on the samples both scored (one-sided, paired); Δ = candidate − baseline; "
           "the bound is the worst plausible Δ at the level Holm's step tested it at: non-inferior when it stays "
           f"within {e(d.margin_text())}. Overlapping intervals are not this test (docs/concepts.md). Hover a run "
           "for its full name.</p>"]
    if d.reason:
        out.append(f'<p class="grade-fail">{e(d.reason)}</p>')
    num = ' class="num" data-type="num"'
    rows = list(zip(ordered(d), d.rows()))
    notes = any(r["why"] for _, r in rows)
    head = [("run", "run", ""), ("verdict", "verdict", ""), ("delta", "Δ", num),
            ("bound", f"bound ({d.confidence:.0%}, Holm)", num), ("p_holm", "Holm p", num), ("n", "n paired", num),
            ("excluded", "excluded (unscored)", ""), ("n_needed", "n needed", num), ("size", "size", num),
            ("latency", "p50 s", num), ("saving", "saving", ""), ("test", "test", "")]
    head += [("why", "note", "")] if notes else []
    names = display_names([r.label for r in report.runs])
    out.append('<div class="scroll"><table class="sortable" id="decision-table"><thead><tr>' + "".join(
        f'<th{kind} data-key="{k}">{e(label)}</th>' for k, label, kind in head) + "</tr></thead><tbody>")
    for c, r in rows:
        rec = " (recommended)" if c.run == d.recommended else ""
        vals = {"delta": c.delta, "bound": c.bound, "p_holm": c.p_holm, "n": c.n_paired, "n_needed": c.n_needed,
                "size": c.model_size_bytes, "latency": c.latency_p50_s}
        cells = [f'<td title="{e(c.run)}" data-sort="{e(c.run)}">{e(names.get(c.run, c.run))}<b>{e(rec)}</b></td>',
                 f'<td class="v-{e(c.verdict.replace(" ", "-"))}">{e(c.verdict)}</td>']
        for k in ("delta", "bound", "p_holm", "n"):
            cells.append(f'<td class="num" data-sort="{_sort_val(vals[k])}">{e(r[k])}</td>')
        cells.append(f'<td class="nowrap">{e(excluded_text(c))}</td>')
        for k in ("n_needed", "size", "latency"):
            cells.append(f'<td class="num" data-sort="{_sort_val(vals[k])}">{e(r[k])}</td>')
        test = {"tango": "Tango score", "t": "paired t", "bootstrap-t": "studentized bootstrap"}.get(c.method or "",
                                                                                                   "-")
        cells += [f'<td class="nowrap">{e(r["saving"])}</td>', f'<td class="nowrap" title="{e(r["method"])}">'
                  f"{e(test)}</td>"] + ([f"<td>{e(r['why'])}</td>"] if notes else [])
        cls = ' class="recommended"' if c.run == d.recommended else ""
        out.append(f'<tr{cls} data-run="{e(c.run)}" data-verdict="{e(c.verdict)}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    for n in d.notes:
        out.append(f'<p class="note">{e(n)}</p>')
    out.append("</section>")
    return out


def _failed(report: Any) -> list[str]:
    cells = report.failed_cells
    if not cells:
        return []
    out = [f'<section id="failed"><h2>Failed cells ({len(cells)})</h2>',
           '<p class="note">These cells of the sweep failed: they have no result and are not ranked. Running the '
           "sweep again redoes them.</p>",
           '<table class="sortable" id="failed-table"><thead><tr><th data-key="cell">cell</th>'
           '<th data-key="reason">reason</th><th class="num" data-key="attempts" data-type="num">attempts</th>'
           '<th data-key="fingerprint">run fingerprint</th></tr></thead><tbody>']
    for c in cells:
        out.append(f'<tr data-cell="{e(c.name)}"><td>{e(c.name)}</td><td class="grade-fail">{e(c.reason)}</td>'
                   f'<td class="num">{e(c.attempts if c.attempts is not None else "-")}</td>'
                   f"<td><code>{e((c.fingerprint or '-')[:16])}</code></td></tr>")
    out.append("</tbody></table></section>")
    return out


def _flaky(report: Any) -> list[str]:
    rows = [(run, m, s) for run in report.runs for m, s in run.result.metrics.items() if s.flaky]
    if not rows:
        return []
    out = ['<section id="flaky"><h2>Flaky samples</h2>',
           '<p class="note">Samples whose repeats disagree: their scores for the metric differ between repeats. '
           "Each repeat's score still counts with its own status.</p>",
           '<table class="sortable" id="flaky-table"><thead><tr><th data-key="run">run</th>'
           '<th data-key="metric">metric</th><th class="num" data-key="flaky" data-type="num">flaky</th>'
           '<th data-key="samples">samples</th></tr></thead><tbody>']
    for run, m, s in rows:
        more = f' <span class="note">and {s.flaky - len(s.flaky_samples)} more</span>' \
            if s.flaky > len(s.flaky_samples) else ""
        ids = ", ".join(f'<code class="flaky-sample">{e(x)}</code>' for x in s.flaky_samples)
        out.append(f'<tr data-run="{e(run.label)}" data-metric="{e(m)}"><td>{e(run.label)}</td><td>{e(m)}</td>'
                   f'<td class="num">{s.flaky}</td><td>{ids}{more}</td></tr>')
    out.append("</tbody></table></section>")
    return out


def _heat(p: float | None) -> str:
    """Background for a Holm-adjusted p: saturated for small p, pale near 1."""
    if p is None:
        return "background:#f6f8fa"
    strength = min(1.0, max(0.0, -math.log10(max(p, 1e-6)) / 4))
    light = 97 - 52 * strength
    return f"background:hsl(212,80%,{light:.0f}%);color:{'#fff' if light < 62 else '#1f2328'}"


def _pairwise(report: Any) -> list[str]:
    lb = report.board
    out = ['<section id="pairwise"><h2>Pairwise paired tests</h2>',
           f'<p class="note">Holm-adjusted p of the paired test between every two ranked runs (darker: smaller p; '
           f"† significant at α = {lb.alpha:g}); the row's run is the better one where it is marked ▲, the "
           "column's where ▼. Hover a cell for the pair.</p>"]
    names = display_names([r.label for r in report.runs])
    shown = 0
    for m in report.metrics:
        board = lb.metrics[m]
        order = board.order()
        if len(order) < 2 or not board.pairwise or shown >= MAX_CHARTS:
            continue
        shown += 1
        cells = {(c.a, c.b): c for c in board.pairwise} | {(c.b, c.a): c for c in board.pairwise}
        dense = len(order) > 12
        head = "".join(f'<th class="colhead num" data-type="num" title="{e(r)}">{i + 1}</th>'
                       for i, r in enumerate(order))
        rows = []
        for i, a in enumerate(order):
            tds = []
            for b in order:
                if a == b:
                    tds.append('<td class="hm" data-sort="">·</td>')
                    continue
                c = cells[(a, b)]
                arrow = "" if c.better is None else ("▲" if c.better == a else "▼")
                val = "n/a" if c.p_holm is None else tx.pval(c.p_holm)
                tip = (f"{a} vs {b}: Holm p {val}" + (" (significant)" if c.significant else "")
                       + (f"; better: {c.better}" if c.better else "") + (f"; {c.reason}" if c.reason else ""))
                text = "" if dense else e(("<.001" if c.p_holm is not None and c.p_holm < 1e-3 else
                                           f"{c.p_holm:.2f}" if c.p_holm is not None else "n/a")
                                          + ("†" if c.significant else "") + arrow)
                tds.append(f'<td class="hm" style="{_heat(c.p_holm)}" data-sort="{_sort_val(c.p_holm)}" '
                           f'title="{e(tip)}">{text}</td>')
            rows.append(f'<tr data-run="{e(a)}"><td class="num" data-sort="{i + 1}">{i + 1}</td>'
                        f'<th class="rowhead" title="{e(a)}">{e(names.get(a, a))}</th>' + "".join(tds) + "</tr>")
        out.append(f"<details{' open' if shown == 1 else ''}><summary>{e(m)} {board.direction.arrow} "
                   f"({len(order)} runs)</summary>"
                   f'<div class="scroll"><table class="heat sortable{" dense" if dense else ""}" '
                   f'data-metric="{e(m)}"><thead><tr><th class="num" data-key="rank" data-type="num">rank</th>'
                   f'<th data-key="run">run</th>{head}</tr></thead><tbody>' + "".join(rows)
                   + "</tbody></table></div></details>")
    if not shown:
        out.append('<p class="note">Fewer than two ranked runs: no pairwise test.</p>')
    out.append("</section>")
    return out


def _regressions(report: Any) -> list[str]:
    if report.baseline is None:
        return []
    regs = report.regressions()
    out = [f'<section id="regressions"><h2>Regressions vs {e(report.baseline.label)}</h2>']
    if not regs:
        out.append(f"<p>No regressions against {e(report.baseline.label)}.</p></section>")
        return out
    out.append('<table class="sortable" id="regressions-table"><thead><tr>'
               '<th data-key="run">run</th><th data-key="metric">metric</th><th>dir</th>'
               '<th class="num" data-type="num">baseline</th>'
               '<th class="num" data-type="num">candidate</th><th class="num" data-type="num">Δ</th>'
               '<th class="num" data-type="num">retention</th><th class="num" data-type="num">p</th>'
               '<th>grade</th><th>why</th></tr></thead><tbody>')
    for label, mc in regs:
        p = mc.paired.p_value if mc.paired is not None else None
        out.append(f"<tr><td>{e(label)}</td><td>{e(mc.name)}</td><td>{mc.direction.arrow}</td>"
                   f'<td class="num" data-sort="{_sort_val(mc.baseline_mean)}">{_num(mc.baseline_mean)}</td>'
                   f'<td class="num" data-sort="{_sort_val(mc.candidate_mean)}">{_num(mc.candidate_mean)}</td>'
                   f'<td class="num" data-sort="{_sort_val(mc.delta)}">{e(tx.signed(mc.delta))}</td>'
                   f'<td class="num" data-sort="{_sort_val(mc.retention)}">{e(tx.pct(mc.retention))}</td>'
                   f'<td class="num" data-sort="{_sort_val(p)}">{e(tx.pval(p))}{" †" if mc.significant else ""}</td>'
                   f'<td class="grade-{e(mc.grade.split()[0].split(".")[0])}">{e(mc.grade)}</td>'
                   f'<td>{e("; ".join(mc.reasons))}</td></tr>')
    out.append(
        f'</tbody></table><p class="legend-text">† paired test significant at α = {report.alpha:g}.</p></section>')
    return out


def _gates(report: Any) -> list[str]:
    gates = report.board.gates
    if not gates:
        return []
    out = ['<section id="gates"><h2>Gates</h2><table><thead>'
           '<tr><th>result</th><th>run</th><th>gate</th><th>reason</th></tr></thead><tbody>']
    for g in sorted(gates, key=lambda g: g.passed):
        cls = "" if g.passed else ' class="grade-fail"'
        out.append(f"<tr><td{cls}>{'ok' if g.passed else 'FAIL'}</td><td>{e(g.run)}</td>"
                   f"<td><code>{e(g.gate)}</code></td><td>{e(g.reason)}</td></tr>")
    out.append("</tbody></table></section>")
    return out


def _leaderboard(report: Any) -> list[str]:
    lb = report.board
    metrics = report.metrics
    primary = report.primary or (metrics[0] if metrics else None)
    marks = {m: report.significance(m) for m in metrics}
    head = ['<th class="num" data-key="rank" data-type="num" data-first="asc">rank</th>', '<th data-key="run">run</th>']
    for m in metrics:
        d = lb.metrics[m].direction
        head.append(f'<th class="num" data-key="{e(m)}" data-type="num" '
                    f'data-first="{"desc" if d.value == "maximize" else "asc"}" '
                    f'title="{e(m)}: {"higher" if d.value == "maximize" else "lower"} is better">{e(m)} {d.arrow}</th>')
    head += ['<th class="num" data-key="n" data-type="num" data-first="desc">n</th>',
             '<th class="num" data-key="latency_p50_s" data-type="num">p50 s</th>',
             '<th class="num" data-key="throughput" data-type="num" data-first="desc">samples/s</th>',
             '<th class="num" data-key="model_size_bytes" data-type="num">size</th>',
             '<th class="num" data-key="cost" data-type="num">cost</th>']
    out = ['<section id="leaderboard"><h2>Leaderboard</h2>',
           '<div class="scroll"><table class="sortable" id="leaderboard-table"><thead><tr>' + "".join(head)
           + "</tr></thead><tbody>"]
    order = [x.run for x in lb.metrics[primary].entries if x.rank is not None] if primary else []
    order += [r.label for r in report.runs if r.label not in order]
    cost = {c.run: c for c in lb.cost}
    for label in order:
        run = report.run(label)
        pe = next((x for x in lb.metrics[primary].entries if x.run == label), None) if primary else None
        rank = pe.rank if pe is not None else None
        base = " (baseline)" if report.baseline is not None and label == report.baseline.label else ""
        cells = [f'<td class="num" data-sort="{"" if rank is None else rank}">{"-" if rank is None else rank}</td>',
                 f'<td data-sort="{e(label)}">{e(label)}<span class="note">{e(base)}</span></td>']
        for m in metrics:
            ent = next((x for x in lb.metrics[m].entries if x.run == label), None)
            if ent is None or ent.mean is None:
                cells.append('<td class="num" data-sort="">-</td>')
                continue
            ci = f' <span class="ci">{e(tx.interval(ent.ci_low, ent.ci_high))}</span>' if ent.ci_low is not None else ""
            mk = f' <span class="mark">{e(marks[m][label])}</span>' if label in marks[m] else ""
            note = "" if ent.rank is not None else f' <span class="note">({e(ent.excluded or "not ranked")})</span>'
            best = " best" if ent.tied_with_best and ent.rank is not None else ""
            tip = e(ent.ci_method or ent.ci_note or "")
            cells.append(f'<td class="num{best}" data-sort="{_sort_val(ent.mean)}" title="{tip}">'
                         f'<span class="mean">{_num(ent.mean)}</span>{ci}{mk}{note}</td>')
        n = max((s.n for m in metrics if (s := run.result.metrics.get(m)) is not None), default=0)
        c = cost.get(label)
        cells.append(f'<td class="num" data-sort="{n}">{n}</td>')
        if c is not None:
            cells += [f'<td class="num" data-sort="{_sort_val(c.latency_p50_s)}">{_num(c.latency_p50_s, 3)}</td>',
                      f'<td class="num" data-sort="{_sort_val(c.throughput_samples_per_s)}">'
                      f'{_num(c.throughput_samples_per_s, 1)}</td>',
                      f'<td class="num" data-sort="{_sort_val(c.model_size_bytes)}">'
                      f'{e(tx.size(c.model_size_bytes))}</td>',
                      f'<td class="num" data-sort="{_sort_val(c.cost)}">{_num(c.cost, 4)}</td>']
        else:
            cells += ['<td class="num" data-sort="">-</td>'] * 4
        out.append(f'<tr data-run="{e(label)}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    legend = ["bold green: best, or tied with the best (intervals overlap)",
              "†: significantly worse than the best (paired test, Holm-adjusted)"]
    if report.baseline is not None:
        legend.append(f"▲/▼: significantly better/worse than the baseline (paired test, α = {lb.alpha:g})")
    out.append(
        f'<p class="legend-text">{e("; ".join(legend))}. Click a column header to sort. Ranked by '
        f'{e(primary or "-")}.</p>')
    for board in lb.metrics.values():
        for x in board.entries:
            if x.excluded:
                out.append(f'<p class="note">{e(board.name)}: {e(x.run)} not ranked: {e(x.excluded)}</p>')
    out.append("</section>")
    return out


def _charts(report: Any) -> list[str]:
    lb = report.board
    out = ['<section id="charts"><h2>Metrics with intervals</h2><div class="charts">']
    names = display_names([r.label for r in report.runs])
    for m in report.metrics[:MAX_CHARTS]:
        board = lb.metrics[m]
        marks = report.significance(m)
        entries = [(x.run, float(x.mean), x.ci_low, x.ci_high, x.tied_with_best, marks.get(x.run, ""))
                   for x in board.ranked]
        svg = ci_chart(f"{m} ({board.direction.value}) per run with {lb.confidence:.0%} intervals", entries,
                       unit=_unit(report, m),
                       names=names)
        if not svg:
            continue
        better = "higher" if board.direction.value == "maximize" else "lower"
        out.append(f"<figure><figcaption>{e(m)} {board.direction.arrow} <span class=\"note\">({better} is better; "
                   f"{lb.confidence:.0%} intervals; blue: best or tied)</span></figcaption>{svg}</figure>")
    out.append("</div>")
    if len(report.metrics) > MAX_CHARTS:
        out.append(
            f'<p class="note">charts for the first {MAX_CHARTS} of {len(report.metrics)} metrics; pass --metric to '
            'choose</p>')
    out.append("</section>")
    return out


def _retention(report: Any) -> list[str]:
    out = ['<section id="retention"><h2>Retention across the grid</h2>']
    grid = detect_grid(report.runs)
    if grid is None:
        out.append(
            '<p class="note">No grid: the runs share every parameter (or there is one run), so there is no retention '
            'curve.</p></section>')
        return out
    curves = retention_curves(report, grid)
    src = "run names" if grid.source == "names" else "run configs"
    out.append(f'<p class="note">Retention = run / reference ({e(report.reference.label)}), read through each '
               'metric\'s direction (1.0 = as good as the reference). One chart per metric and grid axis '
               f'({e(", ".join(grid.params))}, from the {src}): the axis is the x axis (numeric where its values are '
               'numbers), one line per value of the other axes.</p>')
    for n in grid.notes:
        out.append(f'<p class="note">{e(n)}</p>')
    out.append('<div class="charts">')
    for c in curves[:MAX_CHARTS]:
        svg = line_chart(f"retention of {c.metric} across {c.x_param}", c.x_values, c.series,
                         y_label=f"{c.metric} retention", x_label=c.x_param, x_numeric=c.x_numeric,
                         y_format=lambda v: f"{100 * v:.2f}%", y_percent=True)
        if svg:
            out.append(f'<figure data-metric="{e(c.metric)}" data-axis="{e(c.x_param)}"><figcaption>{e(c.metric)} '
                       f"retention vs {e(c.x_param)}</figcaption>{svg}</figure>")
    out.append("</div>")
    if len(curves) > MAX_CHARTS:
        out.append(f'<p class="note">the first {MAX_CHARTS} of {len(curves)} retention charts; pass --metric to '
                   "choose</p>")
    notes = list(dict.fromkeys(f"{c.metric}: {n}" for c in curves for n in c.notes))
    for n in notes:
        out.append(f'<p class="note">{e(n)}</p>')
    out.append("</section>")
    return out


def _axis_format(axis: str):
    """Tick format for a cost axis (None: ticks get as many decimals as it takes to differ)."""
    if axis == "model_size_bytes":
        return lambda v: tx.size(v)
    return None


def _pareto(report: Any) -> list[str]:
    lb = report.board
    out = ['<section id="pareto"><h2>Quality vs cost</h2>']
    by_label = {r.label: r for r in report.runs}
    names = display_names([r.label for r in report.runs])
    d = report.decision
    roles = ({d.baseline: "baseline"} | ({d.recommended: "recommended"} if d.recommended else {})) if d else {}
    if report.fronts:
        m = report.primary
        out.append(f'<h3>{e(m)} against latency, model size and cost</h3><p class="note">The primary metric against '
                   "each cost axis the runs record (lower is cheaper); the dashed line joins the Pareto front (no "
                   "other run is at least as good and at least as cheap)"
                   + ("; the recommended run and the baseline are marked" if roles else "") + '.</p>'
                   '<div class="charts" id="fronts">')
        for axis, pf in report.fronts.items():
            pts = [(x.run, float(c), float(x.mean), x.run in pf.front) for x in lb.metrics[m].ranked
                   if (c := AXES[axis](by_label[x.run].result)) is not None]
            svg = scatter_chart(f"{m} vs {axis}", pts, x_label=axis, y_label=m, x_format=_axis_format(axis),
                                unit_y=_unit(report, m), names=names, roles=roles)
            if svg:
                out.append(f'<figure data-axis="{e(axis)}"><figcaption>{e(m)} {pf.direction.arrow} vs {e(axis)} ↓'
                           f"</figcaption>{svg}</figure>")
        out.append("</div>")
        for axis, pf in report.fronts.items():
            out.append(f'<p class="note">{e(m)} vs {e(axis)}: Pareto front (cheapest first): '
                       f'{e(", ".join(pf.front) or "-")}</p>')
    if not lb.cost_axis:
        out.append(f'<p class="note">{e("; ".join(lb.notes) or "no cost axis recorded")}</p></section>')
        return out
    axis = lb.cost_axis
    others = [(m, pf) for m, pf in lb.pareto.items() if not (m == report.primary and axis in report.fronts)]
    if others:
        out.append(f'<h3>Every metric against {e(axis)}</h3>' if report.fronts else "")
        out.append(f'<p class="note">Cost axis: {e(axis)} (lower is better); the dashed line joins the Pareto '
                   'front (no other run is at least as good and at least as cheap).</p><div class="charts">')
        for m, pf in others[:MAX_CHARTS]:
            pts = []
            for x in lb.metrics[m].ranked:
                c = AXES[axis](by_label[x.run].result)
                if c is not None:
                    pts.append((x.run, float(c), float(x.mean), x.run in pf.front))
            svg = scatter_chart(f"{m} vs {axis}", pts, x_label=axis, y_label=m, x_format=_axis_format(axis),
                                unit_y=_unit(report, m), names=names)
            if svg:
                out.append(f"<figure><figcaption>{e(m)} {pf.direction.arrow} vs {e(axis)} ↓</figcaption>{svg}"
                           "</figure>")
        out.append("</div>")
        for m, pf in others:
            out.append(f'<p class="note">{e(m)}: Pareto front (cheapest first): {e(", ".join(pf.front) or "-")}'
                       + "".join(f"; {e(k)} not placed: {e(v)}" for k, v in pf.excluded.items()) + "</p>")
    out.append("</section>")
    return out


def _chips(row: SampleRow, metrics: list[str], directions: dict[str, Any]) -> str:
    out = []
    for m in metrics:
        st = row.status(m)
        if st is None:
            continue
        v = row.value(m)
        if v is None:
            cls = " bad" if st == "error" else ""
            reason = (row.scores[m] or {}).get("reason") or ""
            out.append(f'<span class="chip{cls}" title="{e(reason)}">{e(m)}: {e(st)}</span>')
            continue
        cls = ""
        if v in (0.0, 1.0):
            good = (v == 1.0) == (directions[m].value == "maximize")
            cls = " good" if good else " bad"
        out.append(f'<span class="chip{cls}">{e(m)} = {e(f"{v:.4g}")}</span>')
    return " ".join(out)


def _extracted(row: SampleRow | None) -> str:
    if row is None:
        return ""
    if not row.annotations:
        return '<span class="note">(no annotators)</span>'
    return "".join(f'<div><b>{e(k)}</b>: <code class="ann">{e(_cut(_text(v), 200))}</code></div>'
                   for k, v in row.annotations.items())


def _details(row: SampleRow) -> str:
    items = [("prompt", row.prompt), ("target", row.target), ("raw output", row.raw_text)]
    if row.text != row.raw_text:
        items.append(("output", row.text))
    items += [(f"extracted {k}", v) for k, v in row.annotations.items()]
    if row.error:
        items.append(("error", row.error))
    for m, s in row.scores.items():
        if s.get("reason") or s.get("status") not in (None, "scored"):
            items.append((f"{m} ({s.get('status')})", s.get("reason") or ""))
    body = "".join(f"<dt>{e(k)}</dt><dd>{_pre(v, FULL)}</dd>" for k, v in items)
    return f"<details><summary>full sample</summary><dl class=\"kv\">{body}</dl></details>"


def _samples(report: Any, max_samples: int) -> list[str]:
    out = ['<section id="samples"><h2>Samples</h2>']
    ref = report.reference
    opts = ['<option value="*">all runs</option>'] + [f'<option value="{e(r.label)}">{e(r.label)}</option>'
                                                        for r in report.runs]
    which = "" if report.baseline is not None else " (the first run; pass --baseline to choose)"
    out.append(f'<p><label>Run: <select id="sample-run">{"".join(opts)}</select></label> '
               f'<span class="note">worst {max_samples} samples per run (ranked by {e(", ".join(report.metrics))}, '
               f'errors first), and the samples newly wrong against {e(ref.label)}{which}.</span></p>')
    ref_view, ref_why = sample_view(ref)
    for run in report.runs:
        directions = {m: s.direction for m in report.metrics if (s := run.result.metrics.get(m)) is not None}
        metrics = [m for m in report.metrics if m in directions]
        out.append(f'<div class="run-samples" data-run="{e(run.label)}"><h3>{e(run.label)}</h3>')
        view, why = sample_view(run)
        if view is None:
            out.append(f'<p class="note">no per-sample rows: {e(why)}</p></div>')
            continue
        worst, what = view.worst(metrics, directions, max_samples)
        out.append(
            f'<h4>Worst samples <span class="note">({e(what)} of {view.total} rows; {len(worst)} shown)</span></h4>')
        if not worst:
            out.append('<p class="note">none</p>')
        out.append('<div class="scroll"><table class="samples"><thead><tr>'
                   '<th>sample</th><th>scores</th><th>target</th><th>raw output</th>'
                   '<th>extracted</th><th>detail</th></tr></thead><tbody>')
        for r in worst:
            out.append(f"<tr><td><code>{e(r.label)}</code></td><td>{_chips(r, metrics, directions)}</td>"
                       f"<td>{_pre(r.target)}</td><td>{_pre(r.raw_text)}</td><td>{_extracted(r)}</td>"
                       f"<td>{_details(r)}</td></tr>")
        out.append("</tbody></table></div>")
        if run is not ref:
            out += _newly_wrong(report, run, view, ref, ref_view, ref_why, max_samples)
        out.append("</div>")
    out.append("</section>")
    return out


def _newly_wrong(report: Any, run: Any, view: Any, ref: Any, ref_view: Any, ref_why: str | None,
                 n: int) -> list[str]:
    cmp = report.comparison(run.label)
    if cmp is None:
        return []
    out = []
    found = False
    for m, mc in cmp.metrics.items():
        p = mc.paired
        if p is None or p.diff is None or not view.binary(m):
            continue
        keys = list(p.diff.newly_wrong)
        if not keys:
            continue
        shown = [tuple(k) for k in keys[:n]]  # only the rows shown are read
        index, ref_index = view.rows_for(shown), (ref_view.rows_for(shown) if ref_view is not None else {})
        found = True
        out.append(f"<h4>Newly wrong on {e(m)}: {len(keys)}"
                   f'<span class="note"> (right in the reference {e(ref.label)}, wrong here; '
                   f'{len(p.diff.newly_right)} newly right; '
                   f'McNemar p = {e(tx.pval(p.p_value))})</span></h4>')
        out.append('<div class="scroll"><table class="samples"><thead><tr><th>sample</th><th>target</th>'
                   '<th>reference: raw output</th><th>reference: extracted</th>'
                   '<th>this run: raw output</th><th>this run: extracted</th><th>detail</th></tr></thead><tbody>')
        for k in keys[:n]:
            a, b = ref_index.get(tuple(k)), index.get(tuple(k))
            label = k[0] if k[1] == 0 else f"{k[0]}#{k[1]}"
            out.append(f"<tr><td><code>{e(label)}</code></td><td>{_pre(b.target if b else a.target if a else '')}</td>"
                       f"<td>{_pre(a.raw_text if a else '')}</td><td>{_extracted(a)}</td>"
                       f"<td>{_pre(b.raw_text if b else '')}</td><td>{_extracted(b)}</td>"
                       f"<td>{_details(b) if b else ''}</td></tr>")
        out.append("</tbody></table></div>")
        if len(keys) > n:
            out.append(f'<p class="note">… and {len(keys) - n} more</p>')
    if not found:
        reason = f" ({e(ref_why)})" if ref_why else ""
        out.append(f'<p class="note">No sample newly wrong against {e(ref.label)} on a binary metric{reason}.</p>')
    return out


def _runs(report: Any) -> list[str]:
    out = ['<section id="runs"><h2>Runs: configuration and fingerprints</h2>']
    for run in report.runs:
        r = run.result
        kv = [("run id", r.run_id), ("name", r.name), ("fingerprint", r.fingerprint),
              ("generation fingerprint", r.generation_fingerprint),
              ("dataset fingerprint", r.dataset_fingerprint), ("package version", r.package_version), ("seed", r.seed),
              ("repeat", r.repeat), ("created", r.created_at), ("samples", r.perf.samples), ("errors", r.error_count),
              ("source", run.source), ("per-sample table", r.samples_path)]
        body = "".join(f"<dt>{e(k)}</dt><dd><code>{e(v)}</code></dd>" for k, v in kv if v is not None)
        cfg = json.dumps(r.config or {}, indent=2, ensure_ascii=False, sort_keys=True, default=str)
        backend = json.dumps(r.backend or {}, indent=2, ensure_ascii=False, sort_keys=True, default=str)
        perf = json.dumps(r.perf.model_dump(exclude_none=True), indent=2, default=str)
        out.append(f'<details class="run" data-run="{e(run.label)}"><summary><b>{e(run.label)}</b> '
                   f'<code>{e(r.fingerprint[:16])}</code></summary>'
                   f'<dl class="kv">{body}</dl><details><summary>configuration</summary><pre>{e(cfg)}</pre></details>'
                   f"<details><summary>backend</summary><pre>{e(backend)}</pre></details>"
                   f"<details><summary>performance</summary><pre>{e(perf)}</pre></details></details>")
    out.append("</section>")
    return out


def format_html(report: Any, *, max_samples: int = 10) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>auditkit-ray report: {e(report.title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>"]
    parts += _header(report)
    parts.append("<main>")
    for section in (_choice(report), _failed(report), _regressions(report), _gates(report), _leaderboard(report),
                    _flaky(report), _pairwise(report),
                    _charts(report), _retention(report), _pareto(report),
                    _samples(report, max_samples), _runs(report)):
        parts += section
    parts.append("</main>")
    parts.append(f"<footer>auditkit-ray {e(__version__)} · self-contained report: no network needed</footer>")
    parts.append(f"<script>{JS}</script>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"
