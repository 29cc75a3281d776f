"""Answers a user can trust (issue 30): a gate over runs with nothing in common never passes, and the
leaderboard ranks the same group whatever the order of its arguments. The real console script, in a
subprocess."""

import json

import pytest
from console import console

pytest.importorskip("scipy", reason="paired tests need the 'stats' extra (scipy)")
pytest.importorskip("pyarrow", reason="per-sample tables need the 'ray' extra (pyarrow)")

IDS = [f"q{i:03d}" for i in range(40)]


def _acc(every: int) -> dict:
    return {"acc": {"values": {i: float(k % every != 0) for k, i in enumerate(IDS)}}}


@pytest.fixture
def runs(tmp_path, make_run):
    """a and b on one dataset, other (better and faster) on another."""
    return {
        "a": make_run(tmp_path, "a", _acc(10), perf={"wall_s": 20.0, "latency_p50_s": 2.0}),  # 0.9
        "b": make_run(tmp_path, "b", _acc(2), perf={"wall_s": 30.0, "latency_p50_s": 3.0}),  # 0.5
        "other": make_run(tmp_path, "other", {"acc": {"values": {i: 1.0 for i in IDS}}}, dataset="e" * 64,
                          perf={"wall_s": 5.0, "latency_p50_s": 0.5}),
    }


@pytest.mark.parametrize("gate", [[], ["--fail-under", "acc=0.1"], ["--max-regression", "50%"]],
                         ids=["no-gate", "fail-under", "max-regression"])
def test_a_gate_over_incomparable_runs_never_passes(runs, gate):
    r = console("compare", runs["a"], runs["other"], "--resamples", "50", *gate)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "no metric is comparable between a and other" in r.stderr and "dataset fingerprints differ" in r.stderr
    assert "result: ok" not in r.stdout and "Traceback" not in r.stderr


def test_leaderboard_winner_does_not_depend_on_argument_order(runs):
    boards = []
    for order in (("a", "b", "other"), ("other", "b", "a"), ("b", "other", "a")):
        r = console("leaderboard", *(runs[k] for k in order), "--json", "--resamples", "50")
        assert r.returncode == 0, r.stderr
        boards.append(json.loads(r.stdout))
    for board in boards:
        acc = board["metrics"]["acc"]
        assert acc["winners"] == ["a"]
        assert [e["run"] for e in acc["entries"] if e["rank"] is not None] == ["a", "b"]
        (other,) = [e for e in acc["entries"] if e["run"] == "other"]
        assert other["rank"] is None and "not comparable" in other["excluded"]
        # the Pareto front reads the ranked group only: 'other' is better and faster, but on another dataset
        front = board["pareto"]["acc"]
        assert front["front"] == ["a"] and "other" in front["excluded"]
    # two runs on two datasets: no rule picks one, so the board is refused (same answer both ways)
    for pair in (("a", "other"), ("other", "a")):
        r = console("leaderboard", *(runs[k] for k in pair), "--resamples", "50")
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert "equally large groups" in r.stderr and "a | other" in r.stderr and "--baseline" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    # --baseline names the reference group, whatever the order
    for pair in (("a", "other"), ("other", "a")):
        r = console("leaderboard", *(runs[k] for k in pair), "--baseline", runs["other"], "--json", "--resamples", "50")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["metrics"]["acc"]["winners"] == ["other"]


def test_a_short_fingerprint_or_run_name_names_a_run_wherever_a_run_is_taken(runs, tmp_path):
    from auditkit_ray import experiment_db, load_run

    db = tmp_path / "db.sqlite"
    index = experiment_db(db)
    for path in runs.values():
        index.record(load_run(path), result_uri=str(path))
    env = {"AUDITKIT_RAY_DB": str(db)}
    fa, fb = (load_run(runs[k]).fingerprint[:12] for k in ("a", "b"))
    r = console("compare", fa, "b", "--resamples", "50", "--json", env=env)  # a fingerprint prefix and a run name
    assert r.returncode == 1 and "acc: grade fail" in r.stderr, r.stderr  # b is worse: compared, and graded
    got = json.loads(r.stdout)
    assert (got["baseline"]["label"], got["candidate"]["label"]) == ("a", "b")
    r = console("leaderboard", fa, fb, "--json", "--resamples", "50", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["metrics"]["acc"]["winners"] == ["a"], r.stderr
    # a folder's unique prefix (the sweep directories the commands print are cut to 12 characters)
    r = console("report", str(runs["a"].parent.parent / "oth"), "-f", "json", env=env)
    assert r.returncode == 0, r.stderr
    # what names nothing, or more than one run, is one line naming it
    for ref, why in (("0000dead", "no run matches '0000dead'"), (str(tmp_path / "nothing-here"), "nothing-here")):
        r = console("compare", ref, "b", env=env)
        assert r.returncode == 2 and why in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_samples_table_named_in_the_lmeval_docs_is_importable_from_the_facade(runs):
    from pathlib import Path

    import auditkit_ray
    from auditkit_ray import samples_table

    doc = (Path(__file__).resolve().parents[2] / "docs" / "lmeval.md").read_text()
    assert "samples_table(result)" in doc and "samples_table" in auditkit_ray.__all__
    table = samples_table(runs["a"])
    assert table.num_rows == len(IDS) and {"sample_id", "scores"} <= set(table.column_names)
