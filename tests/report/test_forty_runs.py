"""Issue #37, readable at 40 runs: a 40-run sweep (4 model families x 5
pruning levels x 2 quantizations, seeded per-model quality, two failed
cells in its manifest) as a terminal leaderboard within 120 columns, in
JUnit and JSON with its failed cells, and as an HTML report rendered in
Chromium, whose DOM boxes (read through the DevTools protocol) show no two
chart labels overlapping and no text overflowing its cell. The runs are
written directly (result.json + per-sample Parquet, as the conftest does):
no Ray is needed to read them.

Screenshots of the 40-run report are kept under results/test-artifacts/
(git-ignored) and the pytest tmp dir; the test prints their paths.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import subprocess
import time
import urllib.request
from itertools import product
from pathlib import Path

import pytest

FAMILIES = ("llama-7b", "mistral-7b", "qwen-14b", "gemma-9b")
PRUNING = (0.0, 0.1, 0.2, 0.3, 0.5)
QUANT = ("None", "int8")
FAILED = [
    {"name": "night/family=broken-70b/pruning=0.0/quantization=None", "state": "failed",
     "reason": "model load failed: SafetensorError: Error while deserializing header: HeaderTooLarge", "attempts": 1,
     "runs": ["night/family=broken-70b/pruning=0.0/quantization=None"], "fingerprints": ["f" * 64]},
    {"name": "night/family=hung-13b/pruning=0.1/quantization=int8", "state": "failed",
     "reason": "model load exceeded execution.load_timeout_s=30s", "attempts": 2,
     "runs": ["night/family=hung-13b/pruning=0.1/quantization=int8"], "fingerprints": ["e" * 64]},
    {"name": "night/family=llama-7b/pruning=0.0/quantization=None", "state": "done", "attempts": 1, "reason": None},
]


@pytest.fixture(scope="module")
def forty(tmp_path_factory, kit):
    """The sweep directory of 40 finished runs and 2 failed cells."""
    pytest.importorskip("pyarrow")
    store = tmp_path_factory.mktemp("forty")
    runs = []
    for i, (fam, prune, quant) in enumerate(product(FAMILIES, PRUNING, QUANT)):
        name = f"night/family={fam}/pruning={prune}/quantization={quant}"
        # seeded per-model quality: the family sets the level, pruning and int8 cost some of it
        acc = 0.55 + 0.1 * FAMILIES.index(fam) - 0.5 * prune * prune - (0.03 if quant == "int8" else 0.0)
        size = int((7e9 + 2e9 * FAMILIES.index(fam)) * (1 - prune) * (0.5 if quant == "int8" else 1.0))
        d = kit.write_run(store, name, accuracy=acc, seed=i, config={"name": name},
                          perf={"latency_p50_s": 0.01 + size / 1e12, "latency_p95_s": 0.02 + size / 5e11,
                                "latency_scope": "batch", "model_size_bytes": size, "wall_s": 30.0 + i,
                                "throughput_samples_per_s": 40.0 / (30.0 + i),
                                "cost": round(0.002 + size / 4e12 + (0.0004 if quant == "int8" else 0.0), 6)})
        runs.append({"name": name, "fingerprint": d.name, "state": "complete"})
    sdir = store / "sweeps" / ("a" * 64)
    sdir.mkdir(parents=True)
    doc = {"name": "night", "fingerprint": "a" * 64, "runs": runs, "cells": FAILED}
    (sdir / "manifest.json").write_text(json.dumps(doc))
    return sdir


BASELINE = "night/family=llama-7b/pruning=0.0/quantization=None"
RULE = {"metric": "exact_match", "baseline": BASELINE, "margin": 0.1, "confidence": 0.95,
        "prefer": ["size", "latency", "cost"], "method": "auto"}


@pytest.fixture(scope="module")
def forty_decided(forty):
    """The same 40 runs as a sweep that ran with a decision: section (its manifest keeps the rule)."""
    doc = json.loads((forty / "manifest.json").read_text())
    sdir = forty.parent / ("c" * 64)
    sdir.mkdir()
    (sdir / "manifest.json").write_text(json.dumps(doc | {"fingerprint": "c" * 64, "decision": RULE}))
    return sdir


@pytest.fixture(scope="module")
def grid_html(sweep_dir, sweep_runs, report_of, tmp_path_factory):
    """The 6-run pruning grid's report (as tests/report/test_html.py renders it)."""
    from auditkit_ray.report.html import format_html

    path = tmp_path_factory.mktemp("grid-html") / "grid.html"
    path.write_text(format_html(report_of(sweep_dir, baseline=str(sweep_runs[0]))), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def report40(forty, report_of):
    return report_of(forty, baseline="night/family=llama-7b/pruning=0.0/quantization=None")


def test_forty_run_leaderboard_fits_a_120_column_terminal(report40):
    text = report40.board.format()
    lines = text.splitlines()
    too_long = [(len(line), line) for line in lines if len(line) > 120]
    assert not too_long, too_long[:3]
    # every ranked run on each metric, with rank, mean, interval, n and both paired tests in the header
    head = next(line for line in lines if line.strip().startswith("rank"))
    for col in ("rank", "run", "mean", "interval", "n", "vs best: Holm p", "vs baseline"):
        assert col in head
    # at 40 runs the names are the values of the sweep parameters that vary, said once
    assert "note: runs shown as family/pruning/quantization" in text
    assert sum(1 for line in lines if re.match(r"\s+\d+\s+[\w.-]+/[\d.]+/(None|int8)\b", line)) == 3 * 40
    # no pairwise matrix by default: a count and where to find it
    assert "pairwise (paired tests, Holm-adjusted p" not in text
    assert "the matrix with --pairwise or in --json" in text
    # the failed cells with their reasons, and what decided the result
    assert "failed cells: 2" in text and "HeaderTooLarge" in text and "load_timeout_s" in text
    assert "hung-13b" in text and "after 2 attempt(s)" in text
    # a failed cell is never an ok result beside the others' ranks (issue 45)
    assert text.splitlines()[-1] == ("result: failed: 2 sweep cell(s) failed (no gate set: grades are advisory; "
                                     "the failed cells decide the result)")
    full = report40.board.format(pairwise=True)
    assert "pairwise (paired tests, Holm-adjusted p; † significant):" in full
    assert re.search(r"^\s+Holm p\s+1\s+2\s+3", full, re.M)


def test_forty_run_failed_cells_are_junit_errors_and_in_json(report40):
    import xml.etree.ElementTree as ET

    from auditkit_ray.report.render import render

    root = ET.fromstring(render(report40, "junit"))
    suite = next(s for s in root.findall("testsuite") if s.get("name") == "failed cells")
    cases = {c.get("name"): c.find("error") for c in suite.findall("testcase")}
    assert set(cases) == {FAILED[0]["name"], FAILED[1]["name"]}
    assert "HeaderTooLarge" in cases[FAILED[0]["name"]].get("message")
    assert suite.get("errors") == "2" and int(root.get("errors")) >= 2
    doc = json.loads(render(report40, "json"))
    assert [c["name"] for c in doc["failed_cells"]] == [FAILED[0]["name"], FAILED[1]["name"]]
    assert doc["failed_cells"][1]["attempts"] == 2 and "load_timeout_s" in doc["failed_cells"][1]["reason"]
    assert doc["failed_cells"][0]["fingerprint"] == "f" * 64
    # the full pairwise matrix is always in the JSON: 40 x 39 / 2 pairs per metric
    assert len(doc["leaderboard"]["metrics"]["exact_match"]["pairwise"]) == 40 * 39 // 2
    assert "no gate set" in doc["decision"] and doc["ok"] is False
    # the HTML lists them with their reasons; the banner says what decided the result
    html = render(report40, "html")
    section = html[html.index('<section id="failed">'):]
    section = section[:section.index("</section>")]
    assert all(f["name"] in section and f["reason"] in section for f in FAILED[:2]) and "llama-7b" not in section
    assert '<span class="status fail" id="result-status">Result: failed: 2 sweep cell(s) failed</span>' in html
    assert "Result: ok" not in html and "2 sweep cell(s) failed</a>" in html
    assert "Gates: no gate set: grades are advisory; the failed cells decide the result." in html
    assert "each only when the paired test is significant at alpha 0.05" in html
    text = render(report40, "text")
    assert "failed cells: 2" in text and "HeaderTooLarge" in text


def test_a_report_on_a_sweep_whose_every_cell_failed_names_the_reasons(tmp_path):
    from auditkit_ray.errors import ConfigError
    from auditkit_ray.report.loader import build_report

    sdir = tmp_path / "sweeps" / ("b" * 64)
    sdir.mkdir(parents=True)
    (sdir / "manifest.json").write_text(json.dumps({"name": "night", "runs": [], "cells": FAILED[:2]}))
    with pytest.raises(ConfigError, match=r"every cell failed: .*HeaderTooLarge.*load_timeout_s=30s"):
        build_report([str(sdir)])


BOXES_JS = r"""
(function () {
  function box(el) { var r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  var charts = Array.prototype.map.call(document.querySelectorAll("svg.chart"), function (svg, i) {
    var texts = Array.prototype.filter.call(svg.querySelectorAll("text"), function (t) {
      return t.textContent.trim() !== "" && t.getBoundingClientRect().width > 0;
    }).map(function (t) { return { text: t.textContent, cls: t.getAttribute("class"), box: box(t) }; });
    var fig = svg.closest("figure");
    return { index: i, title: svg.getAttribute("aria-label"), box: box(svg), texts: texts,
             figure: fig ? box(fig) : null };
  });
  var overflow = [];
  Array.prototype.forEach.call(document.querySelectorAll("td, th"), function (c) {
    if (c.offsetParent === null) { return; }  // hidden (a closed <details>)
    if (c.scrollWidth > c.clientWidth + 1 || c.scrollHeight > c.clientHeight + 1) {
      overflow.push({ text: c.textContent.slice(0, 80), scroll: [c.scrollWidth, c.scrollHeight],
                      client: [c.clientWidth, c.clientHeight] });
    }
  });
  var root = document.documentElement;
  return JSON.stringify({ charts: charts, overflow: overflow, ready: root.getAttribute("data-ready"),
                          error: root.getAttribute("data-error"),
                          height: document.documentElement.scrollHeight });
})()
"""


class _Page:
    """One page of a headless Chromium, driven over the DevTools protocol (websockets' sync client)."""

    def __init__(self, ws):
        self.ws, self.n = ws, 0

    def call(self, method: str, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self.n:
                assert "error" not in msg, msg
                return msg.get("result", {})


def _devtools(chromium: str, profile: Path, url: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-dev-shm-usage",
         "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}",
         "--remote-debugging-port=0", "--window-size=1400,1000", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"DevTools listening on (ws://[^\s]+)", line)
        if m:
            return proc, m.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail("chromium did not open its DevTools port", pytrace=False)


@contextlib.contextmanager
def _chromium_page(chromium: str, profile: Path):
    """A headless Chromium's first page, driven over the DevTools protocol; the browser is stopped after."""
    from websockets.sync.client import connect

    proc, browser_ws = _devtools(chromium, profile, "about:blank")
    try:
        port = re.search(r":(\d+)/", browser_ws).group(1)
        for _ in range(100):
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
            target = next((t for t in targets if t.get("type") == "page"), None)
            if target:
                break
            time.sleep(0.1)
        assert target, targets
        with connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as ws:
            yield _Page(ws)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _keep_shots(shots: dict[str, str], tmp_path: Path) -> None:
    """Screenshots (name -> base64 PNG) written to the test's tmp dir and kept under results/test-artifacts/."""
    keep = Path(__file__).resolve().parents[2] / "results" / "test-artifacts"
    keep.mkdir(parents=True, exist_ok=True)
    for name, data in shots.items():
        raw = base64.b64decode(data)
        assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 20_000, name
        (tmp_path / name).write_bytes(raw)
        shutil.copy(tmp_path / name, keep / name)
        print(f"screenshot: {keep / name} (and {tmp_path / name})")


def _overlaps(a, b, tol: float = 0.5) -> bool:
    return a[0] + tol < b[2] and b[0] + tol < a[2] and a[1] + tol < b[3] and b[1] + tol < a[3]


def _measure(p: _Page, url: str, *, shots: dict[str, str] | None = None) -> dict:
    """Load ``url``, open the heat maps, read the DOM boxes; with ``shots``, screenshots (name -> base64 PNG)."""
    p.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
    p.call("Page.navigate", url=url)
    for _ in range(200):
        state = p.call("Runtime.evaluate", returnByValue=True,
                       expression="location.href + ' ' + document.documentElement.getAttribute('data-ready')")
        if state["result"].get("value") == f"{url} true":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"{url} did not get ready: {state}")
    # open every heat map so its cells are measured too
    p.call("Runtime.evaluate", expression="document.querySelectorAll('#pairwise details').forEach("
                                          "function (d) { d.open = true; })")
    got = json.loads(p.call("Runtime.evaluate", expression=BOXES_JS, returnByValue=True)["result"]["value"])
    if shots is not None:
        height = min(int(got["height"]), 16000)
        p.call("Emulation.setDeviceMetricsOverride", width=1400, height=height, deviceScaleFactor=1, mobile=False)
        shots["forty-runs-report.png"] = p.call("Page.captureScreenshot", format="png")["data"]
        p.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
        p.call("Runtime.evaluate", expression="document.getElementById('pareto').scrollIntoView()")
        shots["forty-runs-pareto.png"] = p.call("Page.captureScreenshot", format="png")["data"]
    return got


def _layout_problems(got: dict) -> list[str]:
    problems = []
    for c in got["charts"]:
        texts, sb = c["texts"], c["box"]
        for i, a in enumerate(texts):
            if a["box"][0] < sb[0] - 1 or a["box"][2] > sb[2] + 1 or a["box"][1] < sb[1] - 1 or a["box"][3] > sb[3] + 1:
                problems.append(f"{c['title']}: {a['text']!r} leaves its chart {a['box']} vs {sb}")
            for b in texts[i + 1:]:
                if _overlaps(a["box"], b["box"]):
                    problems.append(f"{c['title']}: {a['text']!r} overlaps {b['text']!r}")
    return problems + [f"overflowing cell: {o}" for o in got["overflow"]]


def test_forty_run_html_report_in_chromium_has_no_overlapping_labels_and_no_overflowing_cells(report40, grid_html, kit,
                                                                                            tmp_path):
    """One Chromium serves the 40-run report and the 6-run pruning grid (long category labels)."""

    from auditkit_ray.report.render import render

    page = tmp_path / "forty.html"
    page.write_text(render(report40, "html"), encoding="utf-8")
    chromium = kit.find_chromium()
    shots: dict[str, str] = {}
    with _chromium_page(chromium, tmp_path / "profile") as p:
        got = _measure(p, page.as_uri(), shots=shots)
        grid = _measure(p, grid_html.as_uri())
    _keep_shots(shots, tmp_path)
    for doc in (got, grid):
        assert doc["ready"] == "true" and doc["error"] is None
    charts = got["charts"]
    kinds = {c["title"].split(" ")[0] for c in charts}
    assert len(charts) >= 9 and {"retention", "exact_match"} <= kinds, [c["title"] for c in charts]
    # the 40-row interval charts label every run; the Pareto charts label (part of) their front only
    assert any(sum(1 for t in c["texts"] if t["cls"] == "label") == 40 for c in charts)
    pareto = [c for c in charts if " vs " in c["title"]]
    assert pareto and all(0 < sum(1 for t in c["texts"] if t["cls"] == "point-label") < 40 for c in pareto)
    assert not _layout_problems(got), _layout_problems(got)[:10]
    assert len(grid["charts"]) >= 9 and not _layout_problems(grid), _layout_problems(grid)[:10]


def test_chart_axis_ticks_differ_from_their_neighbours(sweep_dir, report_of):
    """The output-length retention axis once read "100%, 100%, 100%": every chart's tick labels now differ."""
    from auditkit_ray.report.render import render
    from auditkit_ray.report.svg import tick_labels

    assert tick_labels([0.998, 0.999, 1.0], 100, "%") == ["99.8%", "99.9%", "100.0%"]
    assert tick_labels([0.0, 0.25, 0.5]) == ["0.00", "0.25", "0.50"]
    html = render(report_of(sweep_dir), "html")
    charts = re.findall(r"<svg class=\"chart\".*?</svg>", html, re.S)
    assert len(charts) >= 9
    for svg in charts:
        ticks = re.findall(r'<text class="tick" x="[^"]+" y="([^"]+)"[^>]*>([^<]*)</text>', svg)
        by_row: dict[str, list[str]] = {}  # x ticks share a baseline; each y tick has its own
        for y, t in ticks:
            by_row.setdefault(y, []).append(t)
        x_ticks = max(by_row.values(), key=len)
        assert len(set(x_ticks)) == len(x_ticks), x_ticks
        y_ticks = [t for y, t in ticks if len(by_row[y]) == 1]
        assert len(set(y_ticks)) == len(y_ticks), y_ticks


DECISION_JS = r"""
(function () {
  function top(sel) { var el = document.querySelector(sel); return el ? el.getBoundingClientRect().top : null; }
  var main = document.querySelector("main");
  var first = main.querySelector("section");
  var fronts = Array.prototype.map.call(document.querySelectorAll("#fronts figure"), function (f) {
    return { axis: f.getAttribute("data-axis"), front: f.querySelectorAll(".front-line").length,
             labels: f.querySelectorAll(".point-label").length,
             recommended: f.querySelectorAll(".mark.recommended").length,
             baseline: f.querySelectorAll(".mark.baseline").length };
  });
  return JSON.stringify({ line: top("#decision-line"), lineText: document.getElementById("decision-line").textContent,
                          firstSection: first ? first.id : null, leaderboard: top("#leaderboard"),
                          rows: document.querySelectorAll("#decision-table tbody tr").length,
                          fronts: fronts, viewport: window.innerHeight });
})()
"""


def test_the_html_report_of_a_40_cell_sweep_leads_with_the_decision_draws_the_fronts_and_overlaps_no_labels(
        forty_decided, report_of, kit, tmp_path):
    """Issue 52: a 40-cell sweep that ran with a decision: section, its report rendered in Chromium. The decision
    line is the first thing under the title, inside the first screen; its section (every candidate's verdict)
    comes before the leaderboard; the primary metric's fronts against latency, model size and cost are drawn
    with the recommended run and the baseline marked; no two chart labels overlap and no cell overflows.
    Screenshots of the top of the page and of the fronts are kept under results/test-artifacts/."""

    from auditkit_ray.report.render import render

    report = report_of(forty_decided)
    d = report.decision
    assert d is not None and d.baseline == BASELINE and report.primary == "exact_match"
    assert d.recommended is not None and len(d.candidates) == 39 + 2, d.format()
    page = tmp_path / "forty-decided.html"
    page.write_text(render(report, "html"), encoding="utf-8")
    chromium = kit.find_chromium()
    shots: dict[str, str] = {}
    with _chromium_page(chromium, tmp_path / "profile") as p:
        got = _measure(p, page.as_uri())
        layout = json.loads(p.call("Runtime.evaluate", expression=DECISION_JS, returnByValue=True)["result"]["value"])
        shots["forty-decision-top.png"] = p.call("Page.captureScreenshot", format="png")["data"]
        p.call("Runtime.evaluate", expression="document.getElementById('fronts').scrollIntoView()")
        shots["forty-decision-fronts.png"] = p.call("Page.captureScreenshot", format="png")["data"]
    _keep_shots(shots, tmp_path)
    assert got["ready"] == "true" and got["error"] is None
    # the decision leads: its line under the title, on the first screen; its section first in the page
    assert layout["lineText"] == d.headline() and layout["lineText"].startswith("decision: ship ")
    assert 0 < layout["line"] < layout["viewport"] and layout["line"] < layout["leaderboard"]
    assert layout["firstSection"] == "decision" and layout["rows"] == 41
    # the fronts: one chart per cost axis, each with its front line and both marked runs
    assert [f["axis"] for f in layout["fronts"]] == ["latency_p50_s", "model_size_bytes", "cost"]
    assert all(f["front"] == 1 and f["recommended"] == 1 and f["baseline"] == 1 and 0 < f["labels"] < 40
               for f in layout["fronts"]), layout["fronts"]
    assert not _layout_problems(got), _layout_problems(got)[:10]
