"""Flaky samples: with repeats, a sample whose repeats disagree is counted and named in the run's summary
and in every report format."""

import json
import sys

import pytest

pytestmark = pytest.mark.usefixtures("ray_cluster")

#: the answer is the prompt, except for the chosen samples on repeat 1 (a real program run per request)
ANSWER = ("import os, sys; p = sys.stdin.read().strip(); "
          "bad = os.environ['AUDITKIT_SAMPLE_ID'] in ('s1', 's4') and os.environ['AUDITKIT_REPEAT'] == '1'; "
          "print('wrong' if bad else ('nope' if p == '2' else p))")


def test_repeats_that_disagree_for_chosen_samples_report_exactly_those_as_flaky(make_spec, tmp_path):
    from auditkit_ray.api import build_report, evaluate, render_report

    data = tmp_path / "d.jsonl"
    # s2 is always wrong: consistent, so not flaky
    data.write_text("".join(json.dumps({"id": f"s{i}", "question": str(i), "answer": str(i)}) + "\n"
                            for i in range(6)))
    spec = make_spec(data=data, model={"type": "command", "argv": [sys.executable, "-c", ANSWER], "concurrency": 4},
                     prompt={"template": "{{ question }}"}, repeats=3, metrics=["exact_match", "pass_at_k"])
    res = evaluate(spec)
    em = res.metrics["exact_match"]
    assert (em.flaky, em.flaky_samples) == (2, ["s1", "s4"])
    assert em.total == 18 and sum(em.counts.values()) == 18 and em.n == 18  # statuses still count every repeat
    assert res.metrics["pass_at_k"].flaky == 0  # scored once per sample: no repeats to compare
    # a resumed run tallies the shards it did not score from the stored rows: the same samples
    from auditkit_ray.actors.tally import COLUMNS, ShardTally
    from auditkit_ray.api import samples_table

    stored = samples_table(res).select(COLUMNS).to_pylist()
    assert ShardTally.of_rows(stored, {}, stored=True).flaky["exact_match"] == ["s1", "s4"]

    report = build_report([res])
    text = render_report(report, "text")
    assert "flaky" in text.splitlines()[1] and " 2" in next(ln for ln in text.splitlines() if ln.startswith("exact"))
    md = render_report(report, "md")
    assert "exact\\_match: 2 flaky: s1, s4" in md
    html = render_report(report, "html")
    assert 'id="flaky-table"' in html and html.count('class="flaky-sample"') == 2
    assert '<code class="flaky-sample">s1</code>, <code class="flaky-sample">s4</code>' in html
    assert json.loads(render_report(report, "json"))["runs"][0]["metrics"]["exact_match"]["flaky"] == 2


def test_without_repeats_nothing_is_flaky_and_reports_keep_their_columns(make_spec):
    from auditkit_ray.api import evaluate, format_run

    res = evaluate(make_spec(dataset={"limit": 8}))
    assert all(m.flaky == 0 and m.flaky_samples == [] for m in res.metrics.values())
    assert "flaky" not in format_run(res)
