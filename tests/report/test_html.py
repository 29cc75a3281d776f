"""The HTML report: one self-contained file, escaped, and working in a real
headless Chromium (leaderboard sorting, charts, no console errors)."""

import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from auditkit_ray.report.html import format_html


class _Doc(HTMLParser):
    """Tags with attributes, and the leaderboard's rows (run label per row)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.rows: list[str] = []
        self._in_board = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self._in_board = a.get("id") == "leaderboard-table"
        if self._in_board and tag == "tr" and "data-run" in a:
            self.rows.append(a["data-run"])

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_board = False


def parse(html: str) -> _Doc:
    d = _Doc()
    d.feed(html)
    return d


@pytest.fixture(scope="module")
def grid_html(sweep_dir, sweep_runs, report_of, tmp_path_factory):
    """The pruning-grid report against its first run, with the hostile sample wrong in one run."""
    report = report_of(sweep_dir, baseline=str(sweep_runs[0]))
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(format_html(report), encoding="utf-8")
    return path


def test_the_report_is_one_self_contained_file(grid_html):
    html = grid_html.read_text()
    doc = parse(html)
    assert not [a for t, a in doc.tags if t in ("link", "img", "iframe", "object", "embed")]
    assert not [a for t, a in doc.tags if t == "script" and "src" in a]
    assert "@import" not in html and "url(" not in html
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "http://" not in html and "https://" not in html  # not even an SVG namespace: inline SVG needs none
    assert [t for t, _ in doc.tags].count("svg") >= 3 * 3  # intervals, retention and Pareto charts for 3 metrics


def test_every_section_is_there(grid_html, sweep_runs, kit):
    html = grid_html.read_text()
    for section in ("regressions", "leaderboard", "charts", "retention", "pareto", "samples", "runs"):
        assert f'<section id="{section}">' in html
    doc = parse(html)
    assert len(doc.rows) == len(kit.GRID)
    assert doc.rows[0] == "tiny/path=tiny-model/quantization=None"
    # retention: a chart per metric and grid axis, one line per value of the other axes
    assert "One chart per metric and grid axis (path, quantization, from the run names)" in html
    assert 'data-metric="exact_match" data-axis="path"' in html and 'data-axis="quantization"' in html
    for ckpt in ("tiny-model", "tiny-model-p25", "tiny-model-p50"):
        assert f">{ckpt}</text>" in html
    assert "quantization=int8-dynamic</text>" in html
    # Pareto front on the cost axis
    assert "Cost axis: latency_p50_s" in html and 'class="front-line"' in html
    # drill-down: worst and newly-wrong samples with raw and extracted answers
    assert "Worst samples" in html and "Newly wrong on exact_match" in html and "reference: extracted" in html
    assert "<b>number</b>" in html
    # configuration and fingerprint of each run
    from auditkit_ray.core.result import load_run

    for p in sweep_runs:
        r = load_run(p)
        assert r.fingerprint in html and f"/ckpt/{r.config['model']['path'].split('/')[-1]}" in html


def test_data_is_html_escaped(tmp_path, kit, report_of):
    ids = kit.sample_ids()
    a = kit.write_run(tmp_path, "base <b>", accuracy=0, seed=1, right=set(ids))
    b = kit.write_run(tmp_path, "cand\"'><script>alert(1)</script>", accuracy=0, seed=2, right=set(ids[:-1]))
    html = format_html(report_of(a, b))
    assert "<script>alert" not in html and "base <b>" not in html and "base &lt;b&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the run name, shown as text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html  # the hostile sample's output (newly wrong)
    assert html.count("<script>") == 1  # only the report's own script
    assert "\x01" in html or "&#" in html  # control characters are inert inside <pre>


def _chromium_dom(kit, chromium, tmp_path: Path, page: Path, fragment: str = "") -> tuple[str, str]:
    out = kit.run_chromium(chromium, tmp_path, page.as_uri() + fragment, "--dump-dom", "--virtual-time-budget=3000")
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout, out.stderr


def test_chromium_renders_the_report_sorts_the_leaderboard_and_logs_no_errors(grid_html, sweep_runs, kit, tmp_path):
    chromium = kit.find_chromium()  # fails (not skips) when missing, naming the install command
    dom, err = _chromium_dom(kit, chromium, tmp_path, grid_html)
    root = re.search(r"<html[^>]*>", dom).group(0)
    assert 'data-ready="true"' in root, root  # the script ran to its end
    assert "data-error" not in root, root
    assert int(re.search(r'data-charts="(\d+)"', root).group(1)) >= 9
    # the page logs nothing: any console line (console.error, an uncaught exception) is a failure
    assert "Uncaught" not in err and ":CONSOLE" not in err, err[-3000:]
    assert "<svg" in dom and "leaderboard-table" in dom
    # sorting: #sort=token_f1:asc clicks the header (twice: token_f1, higher-is-better, sorts high-to-low first)
    from auditkit_ray.core.result import load_run

    f1 = {r.name: r.metrics["token_f1"].mean for r in map(load_run, sweep_runs)}
    served = parse(grid_html.read_text()).rows
    dom, err = _chromium_dom(kit, chromium, tmp_path, grid_html, "#sort=token_f1:asc")
    assert "Uncaught" not in err
    assert 'data-sorted-by="token_f1:asc"' in dom and 'aria-sort="ascending"' in dom
    rows = parse(dom).rows
    assert rows == sorted(served, key=f1.__getitem__) and rows != served
    # text columns sort by the browser's collation; asc and desc are each other's reverse
    asc = parse(_chromium_dom(kit, chromium, tmp_path, grid_html, "#sort=run:asc")[0]).rows
    desc = parse(_chromium_dom(kit, chromium, tmp_path, grid_html, "#sort=run:desc")[0]).rows
    assert sorted(asc) == sorted(served) and desc == asc[::-1] and asc != desc


def test_chromium_screenshot_of_the_report(grid_html, kit, tmp_path):
    chromium = kit.find_chromium()
    shot = tmp_path / "report.png"
    out = kit.run_chromium(chromium, tmp_path, grid_html.as_uri(), f"--screenshot={shot}", "--window-size=1280,2000",
                           "--hide-scrollbars", "--virtual-time-budget=3000")
    assert out.returncode == 0, out.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a rendered page, not a blank one
    keep = os.environ.get("AUDITKIT_REPORT_SCREENSHOT")
    if keep:  # save it for a look: AUDITKIT_REPORT_SCREENSHOT=/tmp/report.png pytest tests/report
        shutil.copy(shot, keep)
