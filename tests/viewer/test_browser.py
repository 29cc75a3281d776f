"""``auditkit-ray view`` in a real browser: the system Chromium driven by Playwright against the real server,
started through the console script over a store written directly (no Ray)."""

from __future__ import annotations

import json
import re
import time

import pytest

pytestmark = pytest.mark.timeout(120)


def test_the_history_lists_every_run_with_its_sweep(viewer, page, stores):
    page.open(viewer.url)
    rows = page.locator("tbody tr[data-fp]")
    assert rows.count() == 3
    names = page.locator("a.run-link").all_text_contents()
    assert {"arith/baseline", "arith/candidate", "arith/big"} <= set(names)
    assert page.locator("a.sweep-link").all_text_contents() == ["alpha-vs-beta"]
    sweep_cells = page.locator(f'tr[data-fp="{stores["candidate"]}"] td').nth(6).text_content()
    assert sweep_cells == "alpha-vs-beta"
    page.shot("history")


def test_filtering_the_history_keeps_only_the_matching_runs_and_puts_the_filter_in_the_url(viewer, page, stores):
    page.open(viewer.url)
    page.fill('#history-filters input[name="model"]', "beta")
    page.act(lambda: page.click('#history-filters button[type="submit"]'))
    assert "model=beta" in page.url
    assert page.locator("tbody tr[data-fp]").count() == 1
    assert page.locator("a.run-link").all_text_contents() == ["arith/candidate"]
    page.shot("history-filtered")
    # by fingerprint prefix, by sweep and by date, straight from the URL
    page.open(viewer.base + f"/#/runs?fp={stores['big'][:8]}")
    assert page.locator("a.run-link").all_text_contents() == ["arith/big"]
    page.open(viewer.base + "/#/runs?sweep=alpha")
    assert sorted(page.locator("a.run-link").all_text_contents()) == ["arith/baseline", "arith/candidate"]
    page.open(viewer.base + "/#/runs?since=2026-03-01&until=2026-03-01")
    assert page.locator("a.run-link").all_text_contents() == ["arith/candidate"]


def test_a_run_shows_intervals_status_counts_config_performance_and_its_samples(viewer, page, stores):
    page.open(viewer.url)
    page.act(lambda: page.click("a.run-link:text-is('arith/baseline')"))
    assert page.locator("#run-fp").text_content() == stores["baseline"]
    means = page.locator("td.metric-mean").all_text_contents()
    assert re.match(r"^0\.7500 \[0\.\d+, 0\.\d+\]$", means[0]), means  # exact_match 150/200 with its interval
    assert "scored 200" in page.locator("table").nth(0).text_content()
    perf = page.locator("table").nth(1).text_content()
    assert "cost" in perf and "0.42" in perf and "throughput_samples_per_s" in perf
    assert json.loads(page.locator("#config-json").text_content())["model"]["model"] == "model-alpha"
    first = page.locator("tr.sample").first
    assert first.locator("pre.raw").text_content() == "The answer is 1."  # s000000 is wrong: 0 % 4 == 0
    assert json.loads(first.locator("pre.extracted").text_content()) == {"number": "1"}
    assert "extracted 1 != target 0" in first.locator(".score").first.text_content()
    assert page.locator("tr.sample").count() == 50
    page.shot("run")


def test_the_samples_filter_by_status_metric_and_score_on_the_server(viewer, page, stores):
    fp = stores["baseline"]
    page.open(viewer.base + f"/#/run/{fp}?metric=exact_match&max=0")
    assert "50 matching of 200" in page.locator("#page-info").text_content()  # the i % 4 == 0 misses
    assert set(page.locator("tr.sample pre.raw").all_text_contents()) != set()
    page.open(viewer.base + f"/#/run/{fp}?status=error")
    assert "0 matching of 200" in page.locator("#page-info").text_content()
    page.select_option('#sample-filters select[name="status"]', "")
    page.fill('#sample-filters input[name="q"]', "question 17:")
    page.act(lambda: page.click('#sample-filters button[type="submit"]'))
    assert "q=question+17" in page.url or "q=question%2017" in page.url
    assert page.locator("code.sample-id").all_text_contents() == ["s000017"]


def test_paging_through_100000_samples_fetches_one_page_at_a_time(viewer, page, stores):
    fp = stores["big"]
    served = []
    t0 = time.perf_counter()
    page.open(viewer.base + f"/#/run/{fp}")
    print(f"first page (the table read once) in {time.perf_counter() - t0:.3f}s")
    for _ in range(5):
        page.act(lambda: page.click("#next-page"))
        served.append(float(page.evaluate("document.body.dataset.lastFetchMs")))
    assert "page 6 of 2000 · 100000 matching of 100000" in page.locator("#page-info").text_content()
    assert page.locator("code.sample-id").first.text_content() == "s000250"
    page.act(lambda: page.click("#prev-page"))
    assert page.locator("code.sample-id").first.text_content() == "s000200"
    page.open(viewer.base + f"/#/run/{fp}?page=2000")
    served.append(float(page.evaluate("document.body.dataset.lastFetchMs")))
    assert page.locator("code.sample-id").last.text_content() == "s099999"
    page.open(viewer.base + f"/#/run/{fp}?q=s099998&page=1")
    served.append(float(page.evaluate("document.body.dataset.lastFetchMs")))
    assert page.locator("code.sample-id").all_text_contents() == ["s099998"]
    page.shot("big-run")
    pages = [json.loads(b) for u, s, b in page.bodies if "/samples?" in u and s == 200]
    assert pages and all(len(p["rows"]) <= 50 and p["total"] == 100_000 for p in pages)  # never the whole table
    # the serve time of each page, as the browser saw it (logged, not asserted: timing depends on the machine)
    print("page serve times (ms):", ", ".join(f"{ms:.0f}" for ms in served))


def test_a_diff_shows_the_paired_test_and_the_newly_right_and_wrong_samples_side_by_side(viewer, page, stores):
    page.open(viewer.url)
    page.check(f'input.pick[value="{stores["baseline"]}"]')
    page.check(f'input.pick[value="{stores["candidate"]}"]')
    page.act(lambda: page.click("#diff-selected"))
    assert f"a={stores['baseline']}" in page.url
    row = page.locator('tr[data-metric="exact_match"]')
    assert row.locator("td").nth(2).text_content() == "0.7500"
    assert row.locator("td").nth(3).text_content() == "0.8000"
    assert float(row.locator("td.p-value").text_content()) < 1
    # baseline wrong on i % 4 == 0, candidate on i % 5 == 0: 40 newly right, 30 newly wrong
    assert "newly right 40, newly wrong 30" in page.locator("h3").first.text_content()
    right = page.locator("#newly-right-exact_match tr.changed")
    assert right.count() == 40
    first = right.first
    assert first.locator("td").first.text_content() == "s000004"
    assert first.locator("pre.raw").nth(0).text_content() == "The answer is 5."
    assert first.locator("pre.raw").nth(1).text_content() == "The answer is 4."
    page.shot("diff")


def test_a_shared_url_opens_the_same_state_in_a_new_browser(viewer, page, chromium_browser, stores, kit):
    url = viewer.base + f"/#/run/{stores['baseline']}?metric=exact_match&max=0&size=25&page=2"
    other = chromium_browser.new_context().new_page()
    other.goto(url)
    kit.wait_rendered(other)
    assert other.locator("#page-info").text_content().startswith("page 2 of 2 · 50 matching")
    assert other.locator("code.sample-id").first.text_content() == "s000100"  # the 26th miss: 25 * 4
    assert other.locator('#sample-filters select[name="metric"]').input_value() == "exact_match"
    other.context.close()


def test_a_sweep_shows_its_leaderboard_and_the_reports_charts(viewer, page, stores):
    page.open(viewer.url)
    page.act(lambda: page.click("a.sweep-link"))
    assert page.locator("#sweep-name").text_content() == "Sweep alpha-vs-beta"
    entries = page.locator("h3:has-text('exact_match (maximize)') + table tr.entry")
    assert entries.count() == 2
    best = entries.first.locator("td")
    assert best.nth(0).text_content() == "1" and "candidate" in best.nth(1).text_content()
    assert best.nth(4).text_content() == "winner"
    assert best.nth(1).locator("a").get_attribute("href") == f"#/run/{stores['candidate']}"
    frame = page.frame_locator("iframe.report")
    frame.locator("html[data-ready='true']").wait_for(timeout=30_000)
    assert int(frame.locator("html").get_attribute("data-charts")) >= 1
    assert frame.locator("svg").count() >= 1
    page.locator("iframe.report").scroll_into_view_if_needed()
    page.shot("sweep-report")
    page.act(lambda: page.select_option("#sweep-metric", "length"))
    assert "metric=length" in page.url
    assert page.locator("h3").all_text_contents()[0].startswith("length")
    page.shot("sweep")


def test_the_sweep_page_leads_with_the_decision_and_so_does_its_report(viewer, page, stores):
    """Issue 52: a sweep that ran with a decision: section. Its page opens on the line to act on and each
    candidate's verdict, above its cells and leaderboard; the report it embeds leads with the same line."""
    page.open(viewer.base + f"/#/sweep/{stores['sweep'][:12]}")
    line = page.locator("#decision-line").text_content()
    assert line.startswith("decision: ship arith/candidate instead of arith/baseline: non-inferior on exact_match ↑ "
                           "within 0.05: delta +0.0500"), line
    heads = page.locator("h2").all_text_contents()
    assert heads.index("Decision") < heads.index("Leaderboard")
    row = page.locator("tr.candidate").first.locator("td")
    assert row.nth(1).text_content() == "non-inferior" and "(recommended)" in row.nth(0).text_content()
    assert row.nth(0).locator("a").get_attribute("href") == f"#/run/{stores['candidate']}"
    assert row.nth(5).text_content() == "200" and row.nth(6).text_content() == "0"
    # the leaderboard leads with the primary metric
    assert page.locator("h3").all_text_contents()[0].startswith("exact_match")
    page.shot("sweep-decision")
    frame = page.frame_locator("iframe.report")
    frame.locator("html[data-ready='true']").wait_for(timeout=30_000)
    assert frame.locator("#decision-line").text_content() == line
    assert frame.locator("main section").first.get_attribute("id") == "decision"
    assert not page.errors, page.errors
