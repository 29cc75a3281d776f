"""Every summary line describes this invocation (issue 51): what it reused (stored results, stored outputs
re-scored), what it generated, its own wall time; a figure it does not have is left out, never printed as zero
or copied from the run that did the work. The real console script, in a subprocess."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from console import console
from stored_runs import drop_shards

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")

SIM = {"type": "simulated", "fixed_cost_s": 0.3, "per_token_s": 0.0, "output": "prompt"}
GENERATION_FIGURES = ("samples/s", "latency", "tokens", "of generation", "ETA")


def _data(tmp_path: Path, n: int = 20, answer: str = "x") -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i:02d}", "q": f"q{i}", "a": answer}) + "\n" for i in range(n)))
    return data


def _run_file(tmp_path: Path, shard_size: int = 5, name: str = "wp") -> Path:
    f = tmp_path / f"run-{shard_size}.json"
    f.write_text(json.dumps({
        "name": name, "dataset": {"path": str(tmp_path / "d.jsonl"), "input_field": "q", "target_field": "a"},
        "model": SIM, "metrics": ["exact_match"], "execution": {"shard_size": shard_size, "generation_actors": 1},
        "store": {"path": str(tmp_path / "store")}, "tracking": {"index": False}}))
    return f


def _timed(*args, **kw):
    t0 = time.monotonic()
    r = console(*args, **kw)
    return r, time.monotonic() - t0


def _summary(stdout: str) -> str:
    (line,) = [ln for ln in stdout.splitlines() if re.search(r"\bwall \d", ln)]
    return line


def _wall(line: str) -> float:
    return float(re.search(r"\bwall (\d+\.\d)s", line).group(1))


def test_a_finished_run_run_again_says_it_reused_every_stored_result_with_its_own_wall_time_and_table(tmp_path):
    _data(tmp_path)
    five, ten = _run_file(tmp_path, 5), _run_file(tmp_path, 10)
    first = console("run", five, cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    assert re.match(r"generated 20  wall \d+\.\ds  \d+\.\d samples/s", _summary(first.stdout)), first.stdout
    # the same configuration in shards of 10 (the same fingerprint) stores its result last
    assert console("run", ten, "--quiet", cwd=tmp_path, timeout=300).returncode == 0
    again, took = _timed("run", five, cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    line = _summary(again.stdout)
    assert line.startswith("reused 20 stored results, nothing generated  wall "), line
    assert not any(f in line for f in GENERATION_FIGURES), line
    assert _wall(line) <= took, (line, took)  # this invocation's own time, not the stored run's
    table = next(ln for ln in again.stdout.splitlines() if ln.startswith("per-sample table: "))
    assert table.endswith("/s5"), table  # its own shards, not those of the run in shards of 10
    assert "generated 0" not in again.stdout and "tokens 0+0" not in again.stdout


def test_a_run_whose_target_changed_says_it_re_scored_stored_outputs_and_generated_nothing(tmp_path):
    _data(tmp_path)
    run = _run_file(tmp_path, 5)
    assert console("run", run, "--quiet", cwd=tmp_path, timeout=300).returncode == 0
    _data(tmp_path, answer="y")  # a target the model never sees: its stored outputs are scored again
    again = console("run", run, cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    progress = [ln for ln in again.stderr.splitlines() if ln.startswith("[wp] ")]
    assert progress[0] == "[wp] re-scoring: 4 of 4 shards to do have their outputs stored; nothing to generate", \
        progress
    shards = [ln for ln in progress if ln.startswith("[wp] shards ")]
    assert shards and shards[-1] == "[wp] shards 4/4: 20 stored outputs re-scored, nothing generated", progress
    assert not any(f in ln for ln in shards for f in GENERATION_FIGURES), shards
    line = _summary(again.stdout)
    assert line.startswith("re-scored 20 stored outputs, nothing generated  wall "), line
    assert not any(f in line for f in GENERATION_FIGURES), line


def test_rescore_gives_no_rate_and_no_token_counts_it_does_not_have(tmp_path):
    _data(tmp_path)
    first = console("run", _run_file(tmp_path, 5), "--json", "--quiet", cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    run_dir = Path(json.loads(first.stdout)["samples_path"]).parent
    r = console("rescore", run_dir, "--metric", "token_f1", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    line = _summary(r.stdout)
    assert line.startswith("re-scored 20 stored outputs, nothing generated  wall "), line
    assert not any(f in line for f in GENERATION_FIGURES), line


def _sweep(tmp_path: Path) -> Path:
    _data(tmp_path, n=12)
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "night", "base": {
        "dataset": {"path": str(tmp_path / "d.jsonl"), "input_field": "q", "target_field": "a"},
        "metrics": ["exact_match"], "execution": {"shard_size": 2, "generation_actors": 1},
        "store": {"path": str(tmp_path / "store")}, "tracking": {"index": False}},
        "runs": [{"name": "a", "model": SIM}, {"name": "b", "model": {**SIM, "tokens_per_output": 3}}]}))
    return tmp_path / "sweep.json"


def test_a_sweep_run_again_says_which_cells_are_stored_and_which_resume(tmp_path):
    sweep = _sweep(tmp_path)
    assert console("sweep", sweep, "--quiet", cwd=tmp_path, timeout=300).returncode == 0
    drop_shards(tmp_path / "store", "a", [4, 5])  # cell a loses two shards: a rerun does those two again
    again = console("sweep", sweep, cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    lines = again.stderr.splitlines()
    assert "[a] resuming: 4 of 6 shards stored, loading" in lines, again.stderr
    assert "[b] stored: 6 of 6 shards, nothing to run" in lines, again.stderr
    assert "[b] loading" not in lines, again.stderr
