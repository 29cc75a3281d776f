// auditkit-ray view: a single page over the JSON API. Every string from results is untrusted: it is placed
// with textContent (el()), never parsed as HTML. The page state lives in the URL hash, so links can be shared.
"use strict";

const app = document.getElementById("app");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function show(...nodes) {
  app.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined));
}

function fmt(v, digits) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(digits === undefined ? 4 : digits);
  return String(v);
}

// a p-value too small to print at 4 decimals is "< 0.0001", never "0.0000"
function fmtP(p) {
  if (typeof p === "number" && p > 0 && p < 0.0001) return "< 0.0001";
  return fmt(p);
}

function route() {
  const h = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = h.split("?");
  return { parts: path.split("/").filter(Boolean), q: new URLSearchParams(qs || "") };
}

function go(path, q) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(q || {})) if (v !== "" && v !== null && v !== undefined) qs.set(k, v);
  const s = qs.toString();
  location.hash = "#" + path + (s ? "?" + s : "");
}

async function getJSON(url) {
  const t0 = performance.now();
  const resp = await fetch(url, { credentials: "same-origin" });
  const data = await resp.json().catch(() => ({ error: resp.statusText }));
  if (!resp.ok) throw new Error(data.error || resp.statusText);
  document.body.dataset.lastFetchMs = String(Math.round(performance.now() - t0));
  return data;
}

function table(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

function interval(m) {
  if (!m || m.ci_low === null || m.ci_low === undefined) return "";
  return " [" + fmt(m.ci_low) + ", " + fmt(m.ci_high) + "]";
}

function runLink(fp, label) {
  return el("a", { href: "#/run/" + encodeURIComponent(fp), class: "run-link", text: label || fp.slice(0, 12) });
}

// ---------------------------------------------------------------------------- history
const HISTORY_FILTERS = ["name", "model", "dataset", "sweep", "fp", "since", "until"];

async function history(q) {
  const params = new URLSearchParams();
  for (const k of HISTORY_FILTERS) if (q.get(k)) params.set(k, q.get(k));
  const data = await getJSON("/api/runs?" + params);
  const form = el("form", { class: "filters", id: "history-filters" },
    HISTORY_FILTERS.map((k) => el("input", { name: k, placeholder: k === "fp" ? "fingerprint prefix" :
      (k === "since" || k === "until" ? k + " (YYYY-MM-DD)" : k), value: q.get(k) || "" })),
    el("button", { type: "submit", text: "filter" }));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = {};
    for (const k of HISTORY_FILTERS) f[k] = form.elements[k].value.trim();
    go("/runs", f);
  });
  const metricNames = [...new Set(data.runs.flatMap((r) => Object.keys(r.metrics || {})))].sort();
  const rows = data.runs.map((r) => el("tr", { "data-fp": r.fingerprint },
    el("td", {}, el("input", { type: "checkbox", class: "pick", value: r.fingerprint })),
    el("td", {}, r.state === "complete" ? runLink(r.fingerprint, r.name || r.fingerprint.slice(0, 12))
      : el("span", { text: (r.name || r.fingerprint.slice(0, 12)) })),
    el("td", { text: r.state }), el("td", {}, el("code", { text: r.fingerprint.slice(0, 12) })),
    el("td", { text: r.model || "" }), el("td", { text: r.dataset || "" }),
    el("td", { text: (r.sweeps || []).join(", ") }), el("td", { text: r.created_at || "" }),
    el("td", { class: "num", text: fmt(r.samples) }),
    metricNames.map((m) => el("td", { class: "num", text: r.metrics[m] ? fmt(r.metrics[m].mean) : "" }))));
  const diffBtn = el("button", { id: "diff-selected", text: "diff the two selected (first = baseline)" });
  const picked = [];  // in the order checked: the first is the baseline
  for (const box of rows.map((r) => r.querySelector("input.pick"))) {
    box.addEventListener("change", () => {
      const at = picked.indexOf(box.value);
      if (box.checked && at < 0) picked.push(box.value);
      if (!box.checked && at >= 0) picked.splice(at, 1);
    });
  }
  diffBtn.addEventListener("click", () => {
    if (picked.length === 2) go("/diff", { a: picked[0], b: picked[1] });
  });
  const sweeps = (data.sweeps || []).map((s) => el("li", {}, el("a", { href: "#/sweep/" + s.fingerprint,
    class: "sweep-link", text: s.name }), " ", el("span", { class: "muted", text: s.done + "/" + s.runs + " runs" })));
  show(
    el("h2", { text: "Runs" }), form,
    el("p", { class: "muted", id: "run-count", text: data.runs.length + " of " + data.total + " runs" }),
    table(["", "name", "state", "fingerprint", "model", "dataset", "sweep", "created", "samples", ...metricNames],
      rows),
    diffBtn,
    sweeps.length ? el("h2", { text: "Sweeps" }) : null, sweeps.length ? el("ul", {}, sweeps) : null);
}

// ---------------------------------------------------------------------------- one run
function scoreCell(scores) {
  return el("td", {}, scoreList(scores));
}

function scoreList(scores) {
  return el("div", { class: "scores" }, scores.map((s) => el("div", { class: "score status-" + s.status },
    el("b", { text: s.name + ": " }), el("span", { text: s.status === "scored" ? fmt(s.value) : s.status }),
    s.reason ? el("span", { class: "muted reason", text: " (" + s.reason + ")" }) : null)));
}

function sampleRow(r) {
  return el("tr", { class: "sample" },
    el("td", {}, el("code", { class: "sample-id", text: r.sample_id + (r.repeat ? "#" + r.repeat : "") })),
    el("td", {}, el("pre", { class: "prompt", text: r.prompt || "" })),
    el("td", {}, el("pre", { class: "raw", text: r.raw_text === null ? (r.error || "") : r.raw_text })),
    el("td", {}, el("pre", { class: "extracted", text: JSON.stringify(r.extracted) })),
    el("td", {}, el("pre", { class: "target", text: r.target === null ? "" : JSON.stringify(r.target) })),
    scoreCell(r.scores || []));
}

async function runPage(fp, q) {
  const run = await getJSON("/api/run/" + encodeURIComponent(fp));
  const page = Math.max(1, parseInt(q.get("page") || "1", 10));
  const size = Math.max(1, Math.min(500, parseInt(q.get("size") || "50", 10)));
  const sq = new URLSearchParams({ offset: String((page - 1) * size), limit: String(size) });
  for (const [k, p] of [["q", "q"], ["status", "status"], ["metric", "metric"], ["min", "min"], ["max", "max"]])
    if (q.get(k)) sq.set(p, q.get(k));
  const samples = await getJSON("/api/run/" + encodeURIComponent(fp) + "/samples?" + sq);
  const metrics = Object.values(run.metrics).map((m) => el("tr", {},
    el("td", { text: m.name }), el("td", { text: m.direction }),
    el("td", { class: "num metric-mean", text: fmt(m.mean) + interval(m) }), el("td", { class: "num", text: m.n }),
    el("td", { class: "num", text: m.total }),
    el("td", { text: Object.entries(m.counts || {}).map(([k, v]) => k + " " + v).join(", ") })));
  const perf = Object.entries(run.perf).filter(([, v]) => v !== null).map(([k, v]) =>
    el("tr", {}, el("td", { text: k }), el("td", { class: "num", text: fmt(v) })));
  const tokens = Object.entries(run.tokens).map(([k, v]) => el("tr", {}, el("td", { text: "tokens." + k }),
    el("td", { class: "num", text: fmt(v) })));
  const state = Object.fromEntries(q.entries());
  const form = el("form", { class: "filters", id: "sample-filters" },
    el("input", { name: "q", placeholder: "search id, prompt, output", value: q.get("q") || "" }),
    el("select", { name: "status" }, ["", "scored", "unknown", "not_tested", "error"].map((s) =>
      el("option", { value: s, text: s || "any status", selected: q.get("status") === s && s !== "" }))),
    el("select", { name: "metric" }, ["", ...samples.metrics].map((m) =>
      el("option", { value: m, text: m || "any metric", selected: q.get("metric") === m && m !== "" }))),
    el("input", { name: "min", placeholder: "score ≥", size: 6, value: q.get("min") || "" }),
    el("input", { name: "max", placeholder: "score ≤", size: 6, value: q.get("max") || "" }),
    el("button", { type: "submit", text: "filter" }));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = { size: q.get("size") || "" };
    for (const k of ["q", "status", "metric", "min", "max"]) f[k] = form.elements[k].value.trim();
    go("/run/" + fp, f);
  });
  const pages = Math.max(1, Math.ceil(samples.matched / size));
  const nav = (p, label, id) => el("button", { id, disabled: p < 1 || p > pages,
    onclick: () => go("/run/" + fp, { ...state, page: String(p) }), text: label });
  show(
    el("h2", { id: "run-name", text: run.name || run.fingerprint }),
    el("p", {}, el("code", { id: "run-fp", text: run.fingerprint }), " ",
      el("span", { class: "muted", text: run.created_at || "" }), " ",
      el("span", { class: "muted", text: "store " + run.store })),
    el("h3", { text: "Summary" }),
    table(["metric", "direction", "mean [interval]", "n", "total", "status counts"], metrics),
    el("h3", { text: "Performance and cost" }), table(["", ""], [...perf, ...tokens]),
    el("details", { id: "config" }, el("summary", { text: "Configuration (secrets redacted)" }),
      el("pre", { id: "config-json", text: JSON.stringify(run.config, null, 2) })),
    el("h3", { text: "Samples" }), form,
    el("p", { class: "pager" }, nav(page - 1, "‹ previous", "prev-page"),
      el("span", { id: "page-info", text: "page " + page + " of " + pages + " · " + samples.matched +
        " matching of " + samples.total }), nav(page + 1, "next ›", "next-page")),
    table(["sample", "prompt", "raw output", "extracted answer", "target", "scores (reason)"],
      samples.rows.map(sampleRow)));
}

// ---------------------------------------------------------------------------- diff
function sideBySide(pairs) {
  return table(["sample", "baseline output", "candidate output"], pairs.map((p) => el("tr", { class: "changed" },
    el("td", {}, el("code", { text: p.sample_id })),
    ...[p.baseline, p.candidate].map((r) => el("td", {}, r ? [el("pre", { class: "raw", text: r.raw_text || "" }),
      el("pre", { class: "extracted", text: JSON.stringify(r.extracted) }), scoreList(r.scores)] : "–")))));
}

async function diffPage(q) {
  const a = q.get("a") || "", b = q.get("b") || "";
  const d = await getJSON("/api/diff?" + new URLSearchParams({ a, b }));
  const rows = Object.values(d.metrics).map((m) => {
    const p = m.paired || {};
    return el("tr", { "data-metric": m.name }, el("td", { text: m.name }), el("td", { text: m.grade }),
      el("td", { class: "num", text: fmt(m.baseline_mean) }), el("td", { class: "num", text: fmt(m.candidate_mean) }),
      el("td", { class: "num", text: fmt(m.delta) }),
      el("td", { class: "num", text: p.delta_ci ? "[" + fmt(p.delta_ci[0]) + ", " + fmt(p.delta_ci[1]) + "]" : "" }),
      el("td", { text: p.test || "" }), el("td", { class: "num p-value", text: fmtP(p.p_value) }),
      el("td", { class: "num", text: fmt(p.n_paired) }),
      el("td", { text: (m.reasons || []).join("; ") }));
  });
  const changed = Object.entries(d.samples || {}).map(([metric, s]) => [
    el("h3", { text: metric + ": newly right " + s.newly_right_count + ", newly wrong " + s.newly_wrong_count }),
    el("div", { class: "side" },
      el("div", { id: "newly-right-" + metric }, el("b", { text: "newly right" }), sideBySide(s.newly_right)),
      el("div", { id: "newly-wrong-" + metric }, el("b", { text: "newly wrong" }), sideBySide(s.newly_wrong)))]);
  show(
    el("h2", { text: "Diff" }),
    el("p", {}, "baseline ", runLink(d.baseline.fingerprint, d.baseline_name), " → candidate ",
      runLink(d.candidate.fingerprint, d.candidate_name)),
    d.dataset_reasons.length ? el("p", { class: "error", text: d.dataset_reasons.join("; ") }) : null,
    table(["metric", "grade", "baseline", "candidate", "delta", "delta interval", "test", "p", "paired",
      "reasons"], rows), changed);
}

// ---------------------------------------------------------------------------- sweep
// which run to ship (the sweep's decision: section): the line to act on, then every candidate's verdict
function decisionBlock(d, fpOf) {
  if (!d) return null;
  const rows = (d.candidates || []).map((c) => el("tr", { class: "candidate", "data-verdict": c.verdict },
    el("td", {}, fpOf[c.run] ? runLink(fpOf[c.run], c.run) : el("span", { text: c.run }),
      c.run === d.recommended ? el("b", { text: " (recommended)" }) : null),
    el("td", { class: "verdict", text: c.verdict }), el("td", { class: "num", text: fmt(c.delta) }),
    el("td", { class: "num", text: fmt(c.bound) }), el("td", { class: "num", text: fmtP(c.p_holm) }),
    el("td", { class: "num", text: fmt(c.n_paired) }),
    el("td", { class: "num", text: fmt(c.excluded_candidate_unscored + c.excluded_baseline_unscored +
      c.excluded_both_unscored) }),
    el("td", { class: "num", text: c.n_needed ? String(c.n_needed) : "–" }),
    el("td", { text: c.reason || c.note || "" })));
  return [el("h2", { text: "Decision" }),
    el("p", { id: "decision-line", class: d.ok ? "ship" : "ship keep", text: d.headline }),
    d.rule ? el("p", { class: "muted", text: d.rule }) : null,
    rows.length ? table(["candidate", "verdict", "delta", "bound (Holm)", "Holm p", "n paired", "excluded",
      "n needed", "why"], rows) : null];
}

async function sweepPage(fp, q) {
  const s = await getJSON("/api/sweep/" + encodeURIComponent(fp));
  const cells = s.cells.map((c) => el("tr", {}, el("td", {}, c.state === "complete" ? runLink(c.fingerprint, c.name)
    : el("span", { text: c.name || c.fingerprint })), el("td", { text: c.state || "" }),
    el("td", { text: c.reason || "" })));
  const fpOf = Object.fromEntries(((s.leaderboard || {}).runs || []).map((r) => [r.label, r.fingerprint]));
  const boards = [];
  const metricSel = q.get("metric");
  for (const [name, board] of Object.entries((s.leaderboard || {}).metrics || {})) {
    if (metricSel && metricSel !== name) continue;
    boards.push(el("h3", { text: name + " (" + board.direction + ")" + (board.tie ? " · tie" : "") }),
      table(["rank", "run", "mean [interval]", "n", "best?"], board.entries.map((e) => el("tr", { class: "entry" },
        el("td", { class: "num", text: fmt(e.rank) }),
        el("td", {}, fpOf[e.run] ? runLink(fpOf[e.run], e.run) : el("span", { text: e.run })),
        el("td", { class: "num", text: fmt(e.mean) + interval(e) }), el("td", { class: "num", text: e.n }),
        el("td", { text: (board.winners || []).includes(e.run) ? "winner" : (e.tied_with_best ? "tied" : "") })))));
  }
  const metricNames = Object.keys((s.leaderboard || {}).metrics || {});
  const pick = el("select", { id: "sweep-metric", onchange: (ev) => go("/sweep/" + fp, { metric: ev.target.value }) },
    ["", ...metricNames].map((m) => el("option", { value: m, text: m || "every metric", selected: m === metricSel && m })));
  show(el("h2", { id: "sweep-name", text: "Sweep " + s.name }), decisionBlock(s.decision, fpOf),
    table(["run", "state", "reason"], cells), el("h2", { text: "Leaderboard" }), pick, boards,
    s.leaderboard ? [el("h2", { text: "Report (charts, pairwise tests, Pareto front)" }),
      el("iframe", { class: "report", sandbox: "allow-scripts", src: "/api/sweep/" + encodeURIComponent(fp) +
        "/report.html" })] : el("p", { text: "no run has finished yet" }));
}

// ---------------------------------------------------------------------------- dispatch
async function render() {
  document.body.dataset.ready = "0";
  const { parts, q } = route();
  try {
    if (parts[0] === "run" && parts[1]) await runPage(parts[1], q);
    else if (parts[0] === "diff") await diffPage(q);
    else if (parts[0] === "sweep" && parts[1]) await sweepPage(parts[1], q);
    else await history(q);
  } catch (err) {
    show(el("p", { class: "error", id: "error", text: String(err.message || err) }));
  }
  document.body.dataset.page = parts[0] || "runs";
  // tests and scripts wait on this: a count of finished renders
  document.body.dataset.renders = String(Number(document.body.dataset.renders || "0") + 1);
  document.body.dataset.ready = "1";
}

window.addEventListener("hashchange", render);
render();
