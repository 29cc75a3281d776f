"""Progress figures that can be trusted (issue 45), through the real console script: a run and a sweep's
cells show samples/s and an ETA only once they have finished a shard; the rate is the samples finished over the time
since generation began, the ETA the shards left at that rate, and a resumed cell counts only the shards it
does now. Figures are checked against one another, never against a speed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from console import console
from stored_runs import drop_shards

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")

SHARDS = 6  # per cell: 12 samples in shards of 2


def _sweep(tmp_path: Path) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i:02d}", "q": f"q{i}", "a": "x"}) + "\n" for i in range(12)))
    sim = {"type": "simulated", "fixed_cost_s": 0.2, "per_token_s": 0.0}
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "night", "base": {
        "dataset": {"path": str(data), "input_field": "q", "target_field": "a"}, "metrics": ["exact_match"],
        "execution": {"shard_size": 2, "generation_actors": 1}, "store": {"path": str(tmp_path / "store")},
        "tracking": {"index": False}},
        "runs": [{"name": "a", "model": sim}, {"name": "b", "model": {**sim, "tokens_per_output": 3}}]}))
    return tmp_path / "sweep.json"


def _events(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def _check_figures(shard: dict, per_shard: float = 2.0) -> None:
    """One shard_done event's figures agree with one another: the rate is samples over elapsed generation
    time, the ETA the shards left at that rate."""
    assert shard["samples"] > 0 and shard["elapsed_s"] > 0, shard
    assert abs(shard["samples_per_s"] - shard["samples"] / shard["elapsed_s"]) <= 0.02 * shard["samples_per_s"] + 0.01
    left = shard["shards_total"] - shard["shards_done"]
    if left:
        expected = left * per_shard / shard["samples_per_s"]
        assert abs(shard["cell_eta_s"] - expected) <= 0.05 * expected + 0.1, (shard, expected)
    else:
        assert not shard["cell_eta_s"], shard


def test_a_sweep_shows_each_cell_s_rate_and_eta_once_it_has_finished_a_shard(tmp_path):
    sweep = _sweep(tmp_path)
    r = console("sweep", sweep, "--events", tmp_path / "ev.jsonl", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    events = _events(tmp_path / "ev.jsonl")
    for cell in ("a", "b"):
        mine = [e for e in events if e.get("cell") == cell]
        shards = [e for e in mine if e["event"] == "shard_done"]
        assert [e["shards_done"] for e in shards] == list(range(1, SHARDS + 1)), shards
        assert [e["samples"] for e in shards] == [2 * k for k in range(1, SHARDS + 1)]
        for e in shards:
            _check_figures(e)
            # the generation window lies inside the cell's time (its start-up is not in it)
            started = next(x for x in mine if x["event"] == "cell_started")
            assert e["elapsed_s"] <= e["t"] - started["t"] + 0.05, (e, started)
        assert shards[0]["eta_s"] is not None  # the sweep's, from the first shard on
    first = next(e for e in events if e["event"] == "shard_done")
    assert all("eta_s" not in e for e in events[: events.index(first)]), "an ETA before the first shard was done"
    # off a terminal: the state changes and, for a running cell, the first and last shards' figures
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("[a] ")]
    assert lines[0] == "[a] loading", lines
    running = [ln for ln in lines if ln.startswith("[a] running")]
    assert re.fullmatch(r"\[a\] running 1 of 6 shards, \d+\.\d samples/s, ETA \d+s  \(sweep ETA \d+s\)",
                        running[0]), running
    assert re.fullmatch(r"\[a\] running 6 of 6 shards, \d+\.\d samples/s(  \(sweep ETA \d+s\))?", running[-1]), running
    assert "ETA" not in "".join(ln for ln in r.stderr.splitlines()[: r.stderr.splitlines().index(running[0])])


def test_a_resumed_sweep_cell_counts_only_the_shards_it_does_now(tmp_path):
    sweep = _sweep(tmp_path)
    assert console("sweep", sweep, "--quiet", cwd=tmp_path, timeout=300).returncode == 0
    # cell a loses its last three shards (outputs and rows) and its result: a rerun does those three again
    drop_shards(tmp_path / "store", "a", [3, 4, 5])
    events = tmp_path / "ev.jsonl"
    again = console("sweep", sweep, "--events", events, cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    evs = _events(events)
    started = next(e for e in evs if e["event"] == "cell_started" and e["cell"] == "a")
    assert started["shards_done"] == 3 and "eta_s" not in started, started
    shards = [e for e in evs if e["event"] == "shard_done" and e["cell"] == "a"]
    # this invocation's samples only: 2, 4, 6 (not 8, 10, 12 with the stored ones)
    assert [(e["shards_done"], e["samples"]) for e in shards] == [(4, 2), (5, 4), (6, 6)], shards
    for e in shards:
        _check_figures(e)


_LINE = re.compile(r"\[long\] shards (\d+)/12: (\d+) samples in (\d+\.\d)s of generation, (\d+\.\d) samples/s"
                   r"(?:, ETA (\d+)s)?")


def _run_file(tmp_path: Path) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i:02d}", "q": f"q{i}", "a": "x"}) + "\n" for i in range(24)))
    (tmp_path / "run.json").write_text(json.dumps({
        "name": "long", "dataset": {"path": str(data), "input_field": "q", "target_field": "a"},
        "model": {"type": "simulated", "fixed_cost_s": 0.2, "per_token_s": 0.0}, "metrics": ["exact_match"],
        "execution": {"shard_size": 2, "generation_actors": 1}, "store": {"path": str(tmp_path / "store")},
        "tracking": {"index": False}}))
    return tmp_path / "run.json"


def _progress(stderr: str) -> list[tuple[int, int, float, float, int | None]]:
    out = []
    for ln in stderr.splitlines():
        if ln.startswith("[long] shards "):
            m = _LINE.fullmatch(ln)
            assert m, ln
            done, samples, elapsed, rate, eta = m.groups()
            out.append((int(done), int(samples), float(elapsed), float(rate), int(eta) if eta else None))
    return out


def _consistent(done: int, samples: int, elapsed: float, rate: float, eta: int | None) -> None:
    """A progress line's figures agree, to the digits printed: the rate is the samples over the elapsed
    generation time, the ETA the shards left (2 samples each) at that rate."""
    assert abs(rate * elapsed - samples) <= 0.05 * (rate + elapsed) + 0.01, (samples, elapsed, rate)
    if done < 12:
        left = (12 - done) * 2
        assert eta is not None, done
        assert left / (rate + 0.05) - 1 <= eta <= left / max(rate - 0.05, 1e-3) + 1, (done, rate, eta)


def test_a_run_s_progress_gives_its_rate_over_generation_time_and_an_eta_from_it(tmp_path):
    run = _run_file(tmp_path)
    r = console("run", run, "--json", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = _progress(r.stderr)
    assert lines[0][:2] == (1, 2) and lines[-1][:2] == (12, 24), lines
    first_line = next(ln for ln in r.stderr.splitlines() if ln.startswith("[long] shards "))
    assert "ETA" not in r.stderr[: r.stderr.index(first_line)], "an ETA before the first shard was done"
    for line in lines:
        _consistent(*line)
    assert lines[-1][4] is None  # nothing left
    # the window is generation's: Ray's start and the model load, in the run's wall time, are not in it
    assert lines[-1][2] <= json.loads(r.stdout)["perf"]["wall_s"], (lines[-1], r.stdout[:200])


def test_a_resumed_run_s_progress_counts_only_the_shards_it_does_now(tmp_path):
    run = _run_file(tmp_path)
    assert console("run", run, "--quiet", cwd=tmp_path, timeout=300).returncode == 0
    store = tmp_path / "store"
    (result,) = store.glob("runs/*/result.json")
    gen_fp = json.loads(result.read_text())["generation_fingerprint"]
    for k in range(6, 12):
        for pattern in (f"runs/*/*/shard-{k:05d}.parquet", f"generations/{gen_fp}/*/shard-{k:05d}.parquet"):
            (stored,) = store.glob(pattern)
            stored.unlink()
    result.unlink()
    again = console("run", run, cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "[long] resuming: 6 of 12 shards are stored and reused" in again.stderr, again.stderr
    lines = _progress(again.stderr)
    # this invocation's samples only: 2 after its first shard (not 14 with the stored ones)
    assert lines[0][:2] == (7, 2) and lines[-1][:2] == (12, 12), lines
    for line in lines:
        _consistent(*line)
