"""Finding runs: run directories, result.json files, sweep directories, a store root."""

import json
import shutil

import pytest

from auditkit_ray.errors import ConfigError
from auditkit_ray.report.loader import expand_inputs, read_samples


def test_a_sweep_directory_expands_to_its_runs_in_sweep_order(sweep_dir, sweep_runs, kit):
    inputs = expand_inputs([sweep_dir])
    assert [r.result.fingerprint for r in inputs.runs] == [p.name for p in sweep_runs]
    assert [r.result.name for r in inputs.runs] == [f"tiny/path={g[0]}/quantization={g[2]}" for g in kit.GRID]
    assert inputs.sweeps[0].name == "pruning-grid" and inputs.notes == []


def test_run_directories_result_files_and_a_store_root_are_accepted(sweep_dir, sweep_runs, kit):
    a = expand_inputs([sweep_runs[0], sweep_runs[1] / "result.json"])
    assert [r.result.fingerprint for r in a.runs] == [sweep_runs[0].name, sweep_runs[1].name]
    root = expand_inputs([sweep_dir.parent.parent])
    assert len(root.runs) == len(kit.GRID)


def test_a_sweep_with_an_unfinished_run_reports_the_others_and_says_which_is_missing(tmp_path, sweep_dir, kit):
    store = tmp_path / "store"
    shutil.copytree(sweep_dir.parent.parent, store)
    sdir = store / "sweeps" / sweep_dir.name
    (sdir / "sweep.json").unlink()  # an unfinished sweep has only its manifest
    doc = json.loads((sdir / "manifest.json").read_text())
    missing = doc["runs"][2]
    shutil.rmtree(store / "runs" / missing["fingerprint"])
    inputs = expand_inputs([sdir])
    assert len(inputs.runs) == len(kit.GRID) - 1
    assert any(missing["name"] in n and "no result.json" in n for n in inputs.notes)


@pytest.mark.parametrize("make", ["missing", "empty-dir", "s3"])
def test_a_path_that_is_no_run_nor_sweep_is_a_config_error(tmp_path, make):
    path = {"missing": tmp_path / "nope", "empty-dir": tmp_path, "s3": "s3://bucket/runs/x"}[make]
    with pytest.raises(ConfigError):
        expand_inputs([path])


def test_per_sample_rows_keep_raw_and_extracted_answers_and_scores(tmp_path, kit):
    run = kit.write_run(tmp_path, "r", accuracy=0.5, seed=1, errors=("q003",))
    [loaded] = expand_inputs([run]).runs
    rows, why = read_samples(loaded)
    assert why is None and len(rows) == kit.N
    assert rows[-1].sample_id == kit.HOSTILE_ID  # sample order kept across shards
    r3 = next(r for r in rows if r.sample_id == "q003")
    assert r3.status("exact_match") == "error" and r3.value("exact_match") is None and r3.error
    r0 = rows[0]
    assert r0.annotations == {"number": r0.raw_text.rstrip(".").split()[-1]}
    assert r0.value("exact_match") in (0.0, 1.0) and r0.target == "0"


def test_an_unreadable_per_sample_table_is_a_reason_not_a_crash(tmp_path, kit):
    run = kit.write_run(tmp_path, "r", accuracy=0.5, seed=1)
    shutil.rmtree(run / "s8")
    [loaded] = expand_inputs([run]).runs
    rows, why = read_samples(loaded)
    assert rows is None and "does not exist" in why
