"""CLI: `compare` and `leaderboard` exit codes, reasons and JSON."""

import json
import subprocess
import sys

import pytest

from auditkit_ray.cli import main

pytest.importorskip("scipy")
pytest.importorskip("pyarrow")

IDS = [f"q{i:03d}" for i in range(50)]


@pytest.fixture
def pair(tmp_path, make_run):
    a = make_run(tmp_path, "base", {"acc": {"values": {i: float(k % 5 != 0) for k, i in enumerate(IDS)}},
                                    "len": {"direction": "minimize", "values": {i: 10.0 for i in IDS}}})
    b = make_run(tmp_path, "cand", {"acc": {"values": {i: float(k % 5 > 1) for k, i in enumerate(IDS)}},
                                    "len": {"direction": "minimize", "values": {i: 10.0 for i in IDS}}})
    return a, b


def test_compare_exits_0_on_a_clean_comparison(pair, capsys):
    a, _ = pair
    assert main(["compare", str(a), str(a.parent), "--resamples", "100"]) == 0
    out = capsys.readouterr()
    assert "result: ok" in out.out and out.err == ""
    assert "acc" in out.out and "pass" in out.out


def test_compare_exits_1_when_max_regression_fails_and_prints_the_reason(pair, capsys):
    a, b = pair  # acc 0.8 -> 0.6
    rc = main(
        [
            "compare",
            str(a),
            str(b),
            "--max-regression",
            "0.05",
            "--fail-at",
            "1.0",
            "--warn-at",
            "1.0",
            "--resamples",
            "100",
        ]
    )
    out = capsys.readouterr()
    assert rc == 1
    assert (
        "cand: acc regressed by 0.2000 vs base (0.8000 -> 0.6000, ↑), over the limit 0.05 [--max-regression 0.05]"
        in out.err
    )
    assert "FAIL" in out.out and "result: 1 failure(s)" in out.out
    assert main(["compare", str(a), str(b), "--max-regression", "acc=0.3", "--fail-at", "1.0", "--warn-at", "1.0"]) == 0


def test_compare_exits_1_when_fail_under_fails_and_2_when_it_is_set_against_the_direction(pair, capsys):
    a, b = pair
    rc = main(
        [
            "compare",
            str(a),
            str(b),
            "--fail-under",
            "acc=0.7",
            "--fail-at",
            "1.0",
            "--warn-at",
            "1.0",
            "--resamples",
            "100",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "cand: acc = 0.6000 is under 0.7 [--fail-under acc=0.7]" in err
    rc = main(["compare", str(a), str(b), "--fail-under", "len=20"])
    err = capsys.readouterr().err
    assert rc == 2 and "use --fail-over len=VALUE" in err and "Traceback" not in err
    assert main(["compare", str(a), str(b), "--fail-over", "len=20", "--fail-at", "1.0", "--warn-at", "1.0"]) == 0


def test_compare_exits_1_on_a_failing_grade(pair, capsys):
    a, b = pair  # a 25% relative drop is over the default 5% fail threshold
    assert main(["compare", str(a), str(b), "--resamples", "100"]) == 1
    assert "acc: grade fail (regressed by 0.2000 (25.00% of baseline)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content", [None, "{not json", '{"format": 99, "run_id": "x", "fingerprint": "y"}', '{"format": 1}']
)
def test_compare_exits_2_on_an_unreadable_file_with_one_line_and_no_traceback(pair, tmp_path, content):
    a, _ = pair
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    out = subprocess.run(
        [sys.executable, "-m", "auditkit_ray.cli", "compare", str(a), str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(bad) in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_bad_gate_syntax_is_a_usage_error(pair, capsys):
    a, b = pair
    assert main(["compare", str(a), str(b), "--fail-under", "acc"]) == 2
    assert "expected METRIC=VALUE" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--max-regression", "lots"]) == 2


def test_compare_json_is_machine_readable(pair, capsys):
    a, b = pair
    rc = main(["compare", str(a), str(b), "--json", "--resamples", "100", "--seed", "7"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["ok"] is False and data["seed"] == 7 and data["n_resamples"] == 100
    acc = data["metrics"]["acc"]
    assert acc["grade"] == "fail" and acc["paired"]["test"] == "mcnemar exact" and acc["direction"] == "maximize"
    assert acc["paired"]["diff"]["newly_wrong"][0] == ["q001", 0]
    assert data["thresholds"]["warn_at"] == "1%"


def test_leaderboard_command_text_json_and_gates(pair, tmp_path, capsys):
    a, b = pair
    assert main(["leaderboard", str(a), str(b), "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "acc ↑ (higher is better, mean)" in out and "len ↓ (lower is better, mean)" in out and "pairwise" in out
    assert main(["leaderboard", str(a), str(b), "--json", "--resamples", "100"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [e["run"] for e in data["metrics"]["acc"]["entries"]] == ["base", "cand"]
    assert (
        main(["leaderboard", str(a), str(b), "--baseline", str(a), "--max-regression", "5%", "--resamples", "100"]) == 1
    )
    assert "cand: acc regressed by 25.00%" in capsys.readouterr().err
    assert main(["leaderboard", str(a), "--max-regression", "5%"]) == 2
    assert main(["leaderboard", str(tmp_path / "missing.json")]) == 2


def test_leaderboard_prints_the_pairwise_matrix_only_with_pairwise(pair, capsys):
    a, b = pair
    assert main(["leaderboard", str(a), str(b), "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "pairwise (paired tests" not in out and "the matrix with --pairwise or in --json" in out
    assert "vs best: Holm p" in out and all(len(line) <= 120 for line in out.splitlines())
    assert main(["leaderboard", str(a), str(b), "--resamples", "100", "--pairwise"]) == 0
    out = capsys.readouterr().out
    assert "pairwise (paired tests, Holm-adjusted p; † significant):" in out
    assert main(["leaderboard", str(a), str(b), "--resamples", "100", "--baseline", str(a)]) == 0
    out = capsys.readouterr().out
    assert "vs baseline" in out and "grades against baseline base:" in out
    assert out.rstrip().splitlines()[-1].startswith("result: ok (no gate set")


def test_leaderboard_and_report_lead_with_the_decision_and_require_candidate_exits_1(tmp_path, make_run, capsys):
    """Issue 52's flags on ``leaderboard`` and ``report``: --primary ranks first, --margin decides, and
    --require-candidate exits 1 (naming the closest) when nothing qualifies, 0 when something does."""
    ids = [f"s{i:03d}" for i in range(300)]
    base = {s: float(i % 4 != 0) for i, s in enumerate(ids)}
    same = dict(base) | {ids[1]: 0.0, ids[4]: 1.0}  # one pair worse, one better: non-inferior within 0.05
    worse = {s: float(i % 2 == 0) for i, s in enumerate(ids)}
    runs = [make_run(tmp_path, "base", {"len": {"direction": "minimize", "values": {s: 9.0 for s in ids}},
                                        "acc": {"values": base}}, perf={"model_size_bytes": 4e8}),
            make_run(tmp_path, "small", {"acc": {"values": same}, "len": {"direction": "minimize",
                                                                           "values": {s: 9.0 for s in ids}}},
                     perf={"model_size_bytes": 1e8}),
            make_run(tmp_path, "tiny", {"acc": {"values": worse}, "len": {"direction": "minimize",
                                                                           "values": {s: 9.0 for s in ids}}},
                     perf={"model_size_bytes": 5e7})]
    args = ["leaderboard", *map(str, runs), "--baseline", str(runs[0]), "--primary", "acc", "--resamples", "200"]
    assert main(args + ["--margin", "0.05", "--require-candidate"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("decision: ship small instead of base: non-inferior on acc ↑ within 0.05")
    assert "75% smaller" in out and out.rstrip().splitlines()[-1].startswith("decision: ship small")
    assert out.index("\nacc ↑") < out.index("\nlen ↓")  # the primary metric's board first
    assert main(args + ["--margin", "0.001", "--require-candidate"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --require-candidate: keep base: no candidate is non-inferior on acc ↑ within "
                          "0.001; the closest, small, has a 95% bound of -0.0"), err
    assert main(args + ["--require-candidate"]) == 2
    assert "needs a decision: --primary METRIC --margin X" in capsys.readouterr().err
    assert main(["report", *map(str, runs), "--baseline", "base", "--primary", "acc", "--margin", "0.05",
                 "--resamples", "200", "--format", "json", "--require-candidate"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["primary"] == "acc" and doc["ship_decision"]["recommended"] == "small"
    assert [c["verdict"] for c in doc["ship_decision"]["candidates"]] == ["non-inferior", "inferior"]
