"""A sweep survives its failing cells (issue 37): a corrupt checkpoint, a hung load and a crashing engine each
fail their own cell; the rest finish; the same command afterwards redoes only the failed cells. On the shared
local Ray (4 logical GPUs), with the real hf backend for the corrupt checkpoint and the simulated backend for
the hang and the crash."""

import json
import shutil
import time
import xml.etree.ElementTree as ET
from collections import Counter
from html import escape

import pytest

from auditkit_ray import api
from auditkit_ray.cli import main
from auditkit_ray.pipeline.sweep import _pick

pytestmark = pytest.mark.usefixtures("ray_cluster")

GOOD = 9  # simulated cells that always work


def _data(path):
    with open(path, "w") as f:
        for i in range(8):
            f.write(json.dumps({"id": f"q{i}", "question": f"What is {i} plus 1?", "answer": str(i + 1)}) + "\n")
    return path


def _sweep_file(path, data, store, model_dir, *, broken: bool):
    sim = {"type": "simulated", "fixed_cost_s": 0.05, "per_token_s": 0.0}
    runs = [{"name": f"good{i}", "model": {**sim, "tokens_per_output": i + 1}} for i in range(GOOD)]
    runs.append({"name": "ckpt", "model": {"type": "hf", "path": str(model_dir), "batch_size": 8}})
    runs.append({"name": "hang", "model": {**sim, "tokens_per_output": 50, "load_s": 120.0 if broken else 0.0},
                 "execution": {"shard_size": 4, "load_timeout_s": 5}})
    runs.append({"name": "crash", "model": {**sim, "tokens_per_output": 51, "exit_ids": ["q1"] if broken else []},
                 "execution": {"shard_size": 4, "max_shard_retries": 0}})
    doc = {"name": "night", "base": {
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "generation": {"max_new_tokens": 4},
        "metrics": ["exact_match"],
        "execution": {"shard_size": 4, "cell_retries": 1},
        "store": {"path": str(store)},
        "tracking": {"index": True, "db": str(store.parent / "experiments.sqlite")},
    }, "runs": runs}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _board(result):
    lb = api.leaderboard(result.runs)
    return {m: sorted((e.run, e.mean, e.n, e.rank) for e in board.entries) for m, board in lb.metrics.items()}


def _wait_gpus_free(ray, want=4):
    deadline = time.time() + 30
    while time.time() < deadline and ray.available_resources().get("GPU", 0) < want:
        time.sleep(0.2)
    return ray.available_resources().get("GPU", 0)


@pytest.fixture(scope="module")
def clean_sweep(tmp_path_factory, tiny_model):
    """The same 12 cells in a sweep that never failed, with its events."""
    root = tmp_path_factory.mktemp("clean")
    f = _sweep_file(root / "sweep.yaml", _data(root / "d.jsonl"), root / "store", tiny_model, broken=False)
    events = root / "events.jsonl"
    result = api.sweep(str(f), events=str(events))
    return result, [json.loads(line) for line in events.read_text().splitlines()]


def test_failing_cells_fail_alone_and_a_rerun_redoes_only_them(tmp_path, tiny_model, clean_sweep, capsys,
                                                                ray_cluster):
    corrupt = tmp_path / "corrupt-ckpt"
    shutil.copytree(tiny_model, corrupt)
    weights = corrupt / "model.safetensors"
    good_bytes = weights.read_bytes()
    weights.write_bytes(good_bytes[:100])  # truncated: the header cannot be deserialized
    store = tmp_path / "store"
    f = _sweep_file(tmp_path / "sweep.yaml", _data(tmp_path / "d.jsonl"), store, corrupt, broken=True)

    code, out, err = _cli(capsys, "sweep", str(f), "--json", "--events", str(tmp_path / "ev1.jsonl"))
    assert code == 1
    doc = json.loads(out)
    assert doc["result"] == "failed"
    failed = {c["cell"]: c for c in doc["failed"]}
    assert len(failed) == 3 and len(doc["runs"]) == GOOD
    by_run = {c["runs"][0]: c for c in doc["failed"]}
    assert "model load failed" in by_run["ckpt"]["reason"] and by_run["ckpt"]["attempts"] == 1
    assert "load_timeout_s=5" in by_run["hang"]["reason"] and by_run["hang"]["attempts"] == 1
    assert "ActorDiedError" in by_run["crash"]["reason"] and by_run["crash"]["attempts"] == 2  # retried once
    # the terminal's status lines name each failure with its reason
    for c in doc["failed"]:
        assert f"[{c['cell']}] failed: {c['reason']}" in err
    # the manifest (what the reports render from)
    manifest = json.loads((store / "sweeps" / doc["fingerprint"] / "manifest.json").read_text())
    assert manifest["state"] == "failed"
    states = Counter(c["state"] for c in manifest["cells"])
    assert states == {"done": GOOD, "failed": 3}
    for c in manifest["cells"]:
        assert set(c) >= {"name", "state", "reason", "attempts", "fingerprints", "runs"}
        assert (c["reason"] is not None) == (c["state"] == "failed")
    assert {r["name"]: r["state"] for r in manifest["runs"] if r["state"] == "failed"} == {
        "ckpt": "failed", "hang": "failed", "crash": "failed"}
    # the ExperimentDB has the failed runs, with their reason
    db = api.experiment_db(store.parent / "experiments.sqlite")
    for name in ("ckpt", "hang", "crash"):
        row = db.get(manifest_fp(manifest, name))
        assert row["status"] == "failed"
    # the HTML and JUnit reports of the sweep name each failed cell with its reason
    report = api.build_report([store / "sweeps" / doc["fingerprint"]])
    html = api.render_report(report, "html")
    junit = ET.fromstring(api.render_report(report, "junit"))
    errors = {case.get("name"): case.find("error").get("message")
              for case in junit.iter("testcase") if case.find("error") is not None}
    for c in doc["failed"]:
        reason = " ".join(c["reason"].split())
        assert f'<tr data-cell="{escape(c["cell"])}">' in html and escape(reason) in html
        assert errors[c["cell"]] == reason
    assert len(errors) == 3 and int(junit.get("errors")) >= 3
    # no logical GPU stays held (the hung load's actor was killed)
    assert _wait_gpus_free(ray_cluster) == 4

    # fix the checkpoint, the hang and the crash; the same command redoes only the failed cells
    weights.write_bytes(good_bytes)
    _sweep_file(f, tmp_path / "d.jsonl", store, corrupt, broken=False)
    shards = {p: p.stat().st_ino for p in store.rglob("shard-*.parquet")}
    code, out, err = _cli(capsys, "sweep", str(f), "--json", "--events", str(tmp_path / "ev2.jsonl"))
    assert code == 0, err
    again = json.loads(out)
    assert again["result"] == "ok" and not again["failed"]
    events = [json.loads(line) for line in (tmp_path / "ev2.jsonl").read_text().splitlines()]
    redone = {e["run"] for e in events if e["event"] == "shard_done"}
    assert redone == {"ckpt", "hang", "crash"}
    assert all(p.stat().st_ino == ino for p, ino in shards.items() if p.exists())  # nothing finished rewritten
    rerun = api.sweep(str(f))  # everything stored now: the stored results, as the leaderboard reads them
    assert _board(rerun) == _board(clean_sweep[0])
    assert _wait_gpus_free(ray_cluster) == 4


def manifest_fp(manifest, run_name):
    return next(r["fingerprint"] for r in manifest["runs"] if r["name"] == run_name)


def test_events_account_for_every_cell_and_shard_once(clean_sweep):
    result, events = clean_sweep
    kinds = Counter(e["event"] for e in events)
    assert kinds["sweep_done"] == 1 and events[-1]["event"] == "sweep_done"
    assert kinds["sweep_started"] == 1 and events[0]["event"] == "sweep_started"
    cells = {c["name"]: c for c in result.cells}
    assert len(cells) == 12
    assert Counter(e["cell"] for e in events if e["event"] == "cell_started") == Counter(list(cells))
    assert Counter(e["cell"] for e in events if e["event"] == "cell_done") == Counter(list(cells))
    assert kinds["cell_failed"] == 0
    shards = Counter((e["run"], e["shard"]) for e in events if e["event"] == "shard_done")
    expected = {(r.name, i) for r in result.runs for i in range(2)}  # 8 samples in shards of 4
    assert set(shards) == expected and set(shards.values()) == {1}
    done = events[-1]
    assert done["done"] == 12 and done["failed"] == 0 and 0 < done["gpu_occupancy"] <= 1


def test_packing_backfills_small_cells_but_never_starves_a_large_one():
    class C:
        def __init__(self, gpus):
            self.gpus, self.bypassed = gpus, 0

    big, smalls = C(4), [C(1) for _ in range(20)]
    # 3 of 4 GPUs busy: the 4-GPU cell waits, one small cell backfills the free GPU
    running = {object(): C(3)}
    assert _pick([big, *smalls], 3, 4, running, pack=True) == [smalls[0]]
    # fifo keeps the order: nothing jumps the waiting large cell
    assert _pick([big, *smalls], 3, 4, running, pack=False) == []
    # after 2 x GPUs passes, the free GPUs are held for the large cell
    for _ in range(10):
        _pick([big, *smalls], 3, 4, running, pack=True)
    assert big.bypassed == 8 and _pick([big, *smalls], 3, 4, running, pack=True) == []
    assert _pick([big, *smalls], 0, 4, {}, pack=True)[0] is big


def test_a_sweep_whose_every_cell_fails_exits_1_with_each_reason(tmp_path, capsys, ray_cluster):
    pytest.importorskip("mlflow", reason="the MLflow mirror needs the 'mlflow' extra (make test installs it)")
    data = _data(tmp_path / "d.jsonl")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    hung = {"type": "simulated", "fixed_cost_s": 0.0, "load_s": 60.0}
    doc = {"name": "allfail", "base": {
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "metrics": ["exact_match"], "execution": {"shard_size": 8, "load_timeout_s": 2},
        "store": {"path": str(tmp_path / "store")},
        "tracking": {"index": True, "db": str(tmp_path / "index.sqlite"), "mlflow_uri": uri,
                     "mlflow_experiment": "night", "mlflow_artifact_location": str(tmp_path / "artifacts")},
    }, "runs": [{"name": "a", "model": {**hung, "constant": "a"}}, {"name": "b", "model": {**hung, "constant": "b"}}]}
    f = tmp_path / "sweep.yaml"
    f.write_text(json.dumps(doc), encoding="utf-8")
    code, out, err = _cli(capsys, "sweep", str(f))
    assert code == 1
    assert "Traceback" not in out + err, err[-6000:]  # whole: the diff pytest prints cuts the traceback short
    assert "2 of 2 cells failed" in out
    assert out.count("load_timeout_s=2s") == 2
    assert _wait_gpus_free(ray_cluster) == 4
    # the ExperimentDB records both runs as failed, with the reason
    rows = {r["name"]: r for r in api.experiment_db(tmp_path / "index.sqlite").query()}
    assert {n: r["status"] for n, r in rows.items()} == {"a": "failed", "b": "failed"}
    # MLflow: a child run marked FAILED per failed run, under the sweep's run (FAILED too)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("night")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("auditkit.kind") == "sweep")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "FAILED"
    assert sorted(r.info.run_name for r in children) == ["a", "b"]
    assert all(r.info.status == "FAILED" and "load_timeout_s=2s" in r.data.tags["auditkit.failure"] for r in children)


def test_an_unknown_failure_policy_option_is_a_config_error_naming_the_field(tmp_path, capsys):
    data = _data(tmp_path / "d.jsonl")
    doc = {"name": "typo", "base": {"model": {"type": "simulated"}, "dataset": {"path": str(data)},
                                    "metrics": ["exact_match"], "execution": {"cell_retrys": 2}}}
    f = tmp_path / "sweep.yaml"
    f.write_text(json.dumps(doc), encoding="utf-8")
    code, out, err = _cli(capsys, "sweep", str(f), "--dry-run")
    assert code == 2
    assert "cell_retrys" in err and "Traceback" not in err


def test_a_cell_past_its_budget_fails_and_keeps_its_finished_shards(tmp_path, capsys, ray_cluster):
    data = _data(tmp_path / "d.jsonl")  # 8 samples, shards of 2: q6 (the last shard) hangs its engine
    model = {"type": "simulated", "fixed_cost_s": 0.0, "hang_ids": ["q6"]}
    doc = {"name": "budget", "base": {
        "model": model, "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "metrics": ["exact_match"], "execution": {"shard_size": 2, "max_cell_s": 40},
        "store": {"path": str(tmp_path / "store")}, "tracking": {"index": False},
    }}
    f = tmp_path / "sweep.yaml"
    f.write_text(json.dumps(doc), encoding="utf-8")
    code, out, err = _cli(capsys, "sweep", str(f), "--json", "--events", str(tmp_path / "ev1.jsonl"))
    assert code == 1
    (cell,) = json.loads(out)["failed"]
    assert "max_cell_s=40" in cell["reason"] and cell["attempts"] == 1  # a budget is not retried
    assert _wait_gpus_free(ray_cluster) == 4
    reported = {e["shard"] for e in map(json.loads, (tmp_path / "ev1.jsonl").read_text().splitlines())
                if e["event"] == "shard_done"}
    # a shard is stored before the driver reads its row: the store, not the events, says what was finished
    first = {int(p.stem.split("-")[1]) for p in (tmp_path / "store" / "runs").rglob("shard-*.parquet")}
    assert reported <= first and 3 not in first
    doc["base"]["model"]["hang_ids"] = []  # the engine fixed (not part of the run's identity)
    f.write_text(json.dumps(doc), encoding="utf-8")
    code, out, err = _cli(capsys, "sweep", str(f), "--json", "--events", str(tmp_path / "ev2.jsonl"))
    assert code == 0, err
    second = [e["shard"] for e in map(json.loads, (tmp_path / "ev2.jsonl").read_text().splitlines())
              if e["event"] == "shard_done"]
    # the shards the first attempt finished (0 to 2 unless the machine is slower than the budget) were kept
    assert sorted(second) == sorted({0, 1, 2, 3} - first)


class _Stream:
    def __init__(self, tty):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def _events():
    yield {"event": "sweep_started", "sweep": "s", "cells": ["a", "b", "c"], "cluster_gpus": 4.0}
    yield {"event": "cell_started", "cell": "a", "attempt": 1, "gpus": 1.0}
    yield {"event": "cell_started", "cell": "b", "attempt": 1, "gpus": 1.0}
    yield {"event": "shard_done", "cell": "a", "shards_done": 1, "shards_total": 3, "eta_s": 12.0}
    yield {"event": "shard_done", "cell": "a", "shards_done": 2, "shards_total": 3, "eta_s": 7.0}
    yield {"event": "shard_done", "cell": "a", "shards_done": 3, "shards_total": 3, "eta_s": 3.0}
    yield {"event": "cell_done", "cell": "a", "attempts": 1}
    yield {"event": "cell_failed", "cell": "b", "attempts": 1, "reason": "model load failed: X", "retry": False}
    yield {"event": "sweep_done", "sweep": "s", "cells": 3, "done": 1, "failed": 1, "gpu_occupancy": 0.5,
           "wall_s": 20.0}


def test_sweep_status_redraws_in_place_on_a_terminal_and_prints_plain_lines_elsewhere():
    from auditkit_ray.cli.output import SweepStatus

    tty = _Stream(True)
    status = SweepStatus(stream=tty)
    for e in _events():
        status(e)
    assert tty.text.count("\x1b[") >= 5  # each change redraws the block in place
    last = tty.text.rsplit("\x1b[J", 1)[-1].splitlines()
    assert [line.split()[0] for line in last[:3]] == ["a", "b", "c"]
    assert "done" in last[0] and "failed: model load failed: X" in last[1] and "queued" in last[2]
    assert "1 of 3 cells done, 1 failed, GPU occupancy 50%" in last[3]
    plain = _Stream(False)
    status = SweepStatus(stream=plain, every_s=3600)
    for e in _events():
        status(e)
    assert "\x1b" not in plain.text
    assert plain.text.splitlines() == [
        # a's first shard (its first ETA) and its last are printed; the one between comes within every_s: not
        "sweep s: 3 cells queued on 4 GPUs", "[a] loading", "[b] loading",
        "[a] running 1 of 3 shards  (sweep ETA 12s)", "[a] running 3 of 3 shards  (sweep ETA 3s)",
        "[a] done", "[b] failed: model load failed: X",
        "sweep s: 1 of 3 cells done, 1 failed, GPU occupancy 50%, 20s"]
