"""A sweep's verdict (issue 45): a missing checkpoint is a failed cell like a corrupt one (the others run,
exit 1), and its message gives both readings of an id-shaped path; ``validate`` says so before the sweep
runs; ``--fail-fast`` exits 1 and names the cells it skipped. The real console script, in a subprocess, on
the simulated backend (no model to load) beside the missing checkpoint."""

from __future__ import annotations

import json

import pytest
from console import console

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")

SIM = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0}


def _sweep(tmp_path, runs, **execution):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "q": f"q{i}", "a": "x"}) + "\n" for i in range(4)))
    doc = {"name": "night", "base": {
        "dataset": {"path": str(data), "input_field": "q", "target_field": "a"}, "metrics": ["exact_match"],
        "execution": {"shard_size": 2, "cell_order": "fifo", **execution}, "store": {"path": str(tmp_path / "store")},
        "tracking": {"index": False}}, "runs": runs}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_missing_checkpoint_fails_its_cell_the_others_run_and_validate_says_so_first(tmp_path):
    # "ckpts/pruned-50" (no ./, not on disk) reads as a local path or as a Hub id: the message names both
    f = _sweep(tmp_path, [{"name": "pruned", "model": {"type": "hf", "path": "ckpts/pruned-50"}},
                          {"name": "gone", "model": {"type": "hf", "path": "./gone"}},
                          {"name": "sim", "model": SIM}])
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub-cache")}
    v = console("validate", f, cwd=tmp_path, env=env)
    assert v.returncode == 2, v.stderr
    line = v.stderr.strip()
    assert line.count("\n") == 0 and line.startswith(f"error: {f}: 2 of 3 runs have no checkpoint"), line
    assert "not a local directory (no " in line and "not a Hub id in the Hugging Face cache" in line, line
    assert "'./gone': no such directory" in line and "(run pruned)" in line and "(run gone)" in line, line

    r = console("sweep", f, "--json", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["result"] == "failed" and [run["name"] for run in doc["runs"]] == ["sim"], doc["failed"]
    failed = {c["runs"][0]: c["reason"] for c in doc["failed"]}
    assert set(failed) == {"pruned", "gone"}
    assert "not a local directory" in failed["pruned"] and "not a Hub id" in failed["pruned"]
    assert "no such directory" in failed["gone"]
    # the terminal names each failure with its reason, as for a corrupt checkpoint
    for c in doc["failed"]:
        assert f"[{c['cell']}] failed: {c['reason']}" in r.stderr, r.stderr
    manifest = json.loads(open(doc["manifest"]).read())
    assert sorted(c["state"] for c in manifest["cells"]) == ["done", "failed", "failed"]


def test_fail_fast_exits_1_and_names_the_cells_it_skipped(tmp_path):
    # fifo order, one CPU cell at a time: the first fails on its first batch (a fatal out of memory), the
    # other two never start
    f = _sweep(tmp_path, [{"name": "oom", "model": {**SIM, "oom_ids": ["q0"]}},
                          {"name": "later1", "model": {**SIM, "tokens_per_output": 1}},
                          {"name": "later2", "model": {**SIM, "tokens_per_output": 2}}], cell_retries=0)
    r = console("sweep", f, "--fail-fast", cwd=tmp_path, timeout=300)
    assert r.returncode == 1, r.stderr
    assert "out of memory" in r.stdout and "FAILED " in r.stdout, r.stdout
    assert "2 of 3 cells skipped by --fail-fast" in r.stdout, r.stdout
    for name in ("later1", "later2"):
        assert f"  SKIPPED {name} (runs {name})" in r.stdout, r.stdout
        assert f"[{name}] skipped: not started: --fail-fast stopped the sweep after cell oom failed" in r.stderr
    assert not [ln for ln in r.stderr.splitlines() if ln.startswith("error:")], r.stderr
    # the manifest (what reports read) says the same; a run without --fail-fast afterwards runs the skipped cells
    (manifest,) = (tmp_path / "store" / "sweeps").glob("*/manifest.json")
    cells = {c["name"]: c for c in json.loads(manifest.read_text())["cells"]}
    assert [cells[n]["state"] for n in ("oom", "later1", "later2")] == ["failed", "skipped", "skipped"], cells
    again = console("sweep", f, "--json", cwd=tmp_path, timeout=300)
    doc = json.loads(again.stdout)
    assert again.returncode == 1 and sorted(r["name"] for r in doc["runs"]) == ["later1", "later2"], again.stderr
    assert doc["skipped"] == [] and [c["cell"] for c in doc["failed"]] == ["oom"]
