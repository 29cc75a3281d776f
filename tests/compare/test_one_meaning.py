"""One report never contradicts itself (issue 30): a run the paired test finds significantly worse than the
best is not also "tied with the best" (bold in Markdown, "best or tied" in JUnit, * in the text); * means best
or tied and † significant, everywhere; and a run's interval is the same in every output. The real console
script, in a subprocess."""

from __future__ import annotations

import re

import pytest
from console import console

pytest.importorskip("scipy", reason="paired tests need the 'stats' extra (scipy)")
pytest.importorskip("pyarrow", reason="per-sample tables need the 'ray' extra (pyarrow)")

IDS = [f"q{i:03d}" for i in range(200)]


@pytest.fixture
def runs(tmp_path, make_run):
    best = {i: float(k % 10 != 0) for k, i in enumerate(IDS)}  # 0.90
    worse = {i: 0.0 if k % 16 == 1 else v for k, (i, v) in enumerate(best.items())}  # 13 more wrong, none right
    f1 = {i: (k % 7) / 7 for k, i in enumerate(IDS)}
    return (make_run(tmp_path, "best", {"acc": {"values": best}, "f1": {"values": f1}}),
            make_run(tmp_path, "worse", {"acc": {"values": worse}, "f1": {"values": f1}}))


def test_a_significantly_worse_run_is_never_marked_tied_with_the_best(runs):
    a, b = (str(x) for x in runs)
    js = console("leaderboard", a, b, "--json", "--resamples", "2000")
    import json

    board = json.loads(js.stdout)["metrics"]["acc"]
    worse = next(e for e in board["entries"] if e["run"] == "worse")
    best = next(e for e in board["entries"] if e["run"] == "best")
    assert worse["ci_low"] <= best["ci_high"], "the intervals overlap: the case where the two rules disagreed"
    cell = board["pairwise"][0]
    assert cell["significant"] and cell["better"] == "best"
    assert board["winners"] == ["best"] and not worse["tied_with_best"]
    md = console("report", a, b, "-f", "md", "--resamples", "2000").stdout
    row = next(ln for ln in md.splitlines() if ln.startswith("| 2 | worse"))  # the leaderboard's row
    acc_cell = row.split("|")[3]
    assert "**" not in acc_cell and "†" in acc_cell, row
    junit = console("report", a, b, "-f", "junit", "--resamples", "2000").stdout
    assert not re.search(r"worse[^<]*rank 2 of 2 \(best or tied", junit), junit
    text = console("leaderboard", a, b, "--resamples", "2000", "--pairwise").stdout
    rank_rows = [ln for ln in text.splitlines() if re.match(r"\s+\d\s+\S", ln)]
    assert any(" worse " in ln and "*" not in ln and "†" in ln for ln in rank_rows), text
    assert "† significant" in text and "* significant" not in text


def test_a_run_shows_one_interval_per_metric_in_every_output(runs):
    import json

    a, b = (str(x) for x in runs)
    stored = json.loads(open(a).read())["metrics"]
    board = json.loads(console("leaderboard", a, b, "--json", "--resamples", "500").stdout)["metrics"]
    for metric in ("acc", "f1"):
        entry = next(e for e in board[metric]["entries"] if e["run"] == "best")
        assert (round(entry["ci_low"], 3), round(entry["ci_high"], 3)) == (
            round(stored[metric]["ci_low"], 3), round(stored[metric]["ci_high"], 3)), metric
        want = f"[{stored[metric]['ci_low']:.3f}, {stored[metric]['ci_high']:.3f}]"
        for fmt in ("text", "md"):
            out = console("report", a, b, "-f", fmt, "--resamples", "500").stdout.replace("\\", "")
            assert want in out, (metric, fmt, want)


def test_a_repeated_runs_summary_interval_is_the_leaderboards_clustered_one():
    # with repeats the run summary (merged from shard tallies) and the leaderboard (from the per-sample
    # table) both use the cluster-robust error with t(G - 1): one interval for the run, in every output
    import random

    from auditkit_ray.actors.tally import ShardTally
    from auditkit_ray.compare import stats as st
    from auditkit_ray.core.aggregate import summarize
    from auditkit_ray.core.types import Score

    rng = random.Random(5)
    rows, values, clusters = [], [], []
    for i in range(30):
        p = rng.random()
        for rep in range(3):
            v = float(rng.random() < p)
            values.append(v)
            clusters.append(f"s{i}")
            rows.append({"sample_id": f"s{i}", "repeat": rep, "error": None, "scores": [Score.scored("acc", v)],
                         "latency_s": None, "latency_scope": None, "prompt_tokens": 0, "completion_tokens": 0,
                         "token_source": None, "gen_metadata": {}})
    halves = [ShardTally.of_rows(rows[:45], {}), ShardTally.of_rows(rows[45:], {})]  # two shards, merged
    summary = summarize(halves[0].stats["acc"].merge(halves[1].stats["acc"]))
    se, g = st.clustered_se(values, clusters)
    mean = sum(values) / len(values)
    t = st.t_value(0.95, g - 1)
    assert summary["ci_method"].startswith("clustered t (30 clusters")
    assert (summary["ci_low"], summary["ci_high"]) == pytest.approx((max(0.0, mean - t * se), min(1.0, mean + t * se)),
                                                                    abs=1e-9)
