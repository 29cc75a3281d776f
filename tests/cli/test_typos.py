"""Typos get help (issue 30): the nearest names, not a list of every name; a gate or a query naming an
unknown metric is a usage error (exit 2); a misspelled grid key is reported at its own line. The real
console script, in a subprocess."""

from __future__ import annotations

import pytest
from console import console

from auditkit_ray.testing.runs import build_run


@pytest.fixture(scope="module")
def starter(tmp_path_factory):
    d = tmp_path_factory.mktemp("starter")
    assert console("init", d).returncode == 0
    return d


def _one_line(r) -> str:
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("typo, fix, want", [
    ("  - token_f1", "  - exact_mtach", "unknown metric 'exact_mtach' (did you mean 'exact_match'"),
    ("  input_field: question", "  input_feild: question", "dataset.input_feild: unknown field (did you mean "
                                                            "'input_field'"),
    ("  type: echo", "  type: ehco", "model.type: unknown type 'ehco' (did you mean 'echo'?)"),
], ids=["metric", "field", "backend"])
def test_a_typo_in_a_run_file_gets_the_nearest_names_not_a_list_of_every_name(starter, tmp_path, typo, fix, want):
    text = (starter / "run.yaml").read_text()
    assert typo in text
    bad = tmp_path / "run.yaml"
    bad.write_text(text.replace(typo, fix, 1))
    (tmp_path / "data").symlink_to(starter / "data")
    line = _one_line(console("validate", bad, cwd=tmp_path))
    assert want in line and len(line) < 400, line
    number = next(i for i, ln in enumerate(bad.read_text().splitlines(), 1) if ln.startswith(fix))
    assert f"run.yaml:{number}:" in line, line


def test_a_misspelled_grid_key_is_reported_at_its_own_line(starter, tmp_path):
    text = (starter / "sweep.yaml").read_text().replace("  model.field:", "  model.feild:")
    bad = tmp_path / "sweep.yaml"
    bad.write_text(text)
    (tmp_path / "data").symlink_to(starter / "data")
    line = _one_line(console("validate", bad, cwd=tmp_path))
    number = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("  model.feild:"))
    assert f"):{number}: " in line and "did you mean 'field'" in line, line


def test_a_gate_or_a_query_naming_an_unknown_metric_is_a_usage_error_with_the_nearest_name(tmp_path):
    from auditkit_ray import experiment_db, load_run

    ids = [f"q{i}" for i in range(10)]
    runs = [build_run(tmp_path, n, {"exact_match": {"values": {i: 1.0 for i in ids}}}) for n in ("a", "b")]
    for gate in (["--fail-under", "exact_mach=0.5"], ["--max-regression", "exact_mach=1%"]):
        line = _one_line(console("compare", *runs, *gate))
        assert "exact_mach" in line and "did you mean 'exact_match'" in line, line
    db = tmp_path / "db.sqlite"
    for r in runs:
        experiment_db(db).record(load_run(r), result_uri=str(r))
    env = {"AUDITKIT_RAY_DB": str(db)}
    assert "a" in console("runs", "query", "--metric", "exact_match>=0.5", env=env).stdout
    line = _one_line(console("runs", "query", "--metric", "exact_mach>=0.5", env=env))
    assert "did you mean 'exact_match'" in line, line


def test_a_run_setting_at_the_top_of_a_sweep_is_sent_under_base_not_suggested_as_itself(starter, tmp_path):
    text = (starter / "sweep.yaml").read_text()
    bad = tmp_path / "sweep.yaml"
    bad.write_text(text + "store: {path: elsewhere}\n")
    (tmp_path / "data").symlink_to(starter / "data")
    line = _one_line(console("validate", bad, cwd=tmp_path))
    number = len(bad.read_text().splitlines())
    assert f"sweep.yaml:{number}: store: " in line and "go under base (base.store)" in line, line
    assert "did you mean 'store'" not in line, line
