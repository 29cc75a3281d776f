"""Resident engines (issue 50): one warm cluster that any folder and shell reuses, and models that stay loaded
in it between commands. The real console script, in subprocesses, each with a state folder of the test's own
(``AUDITKIT_RAY_HOME``); the cluster, the registry and the models are real, and what a test asserts about
processes it reads from ``/proc`` (or ``ps``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from console import EXE, console

pytest.importorskip("ray", reason="the warm cluster is a local Ray: the 'ray' extra (make test installs it)")


@pytest.fixture
def warm_env(tmp_path):
    env = {"AUDITKIT_RAY_WARM": "1", "AUDITKIT_RAY_HOME": str(tmp_path / "home"), "AUDITKIT_RAY_IDLE_TIMEOUT": "300"}
    yield env
    console("down", env=env, timeout=90)


def _status(env: dict) -> dict:
    r = console("status", "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _rows(result_json: str) -> list[tuple]:
    import pyarrow.parquet as pq

    res = json.loads(result_json)
    table = pq.read_table(res["samples_path"])
    return sorted(zip(table.column("sample_id").to_pylist(), table.column("text").to_pylist(),
                      table.column("scores").to_pylist()))


# ------------------------------------------------------------------ three folders, one cluster, one model
_METRIC = '''
import os

from auditkit_ray import Direction, Metric, Score


class FromEnv(Metric):
    """Scores every sample with the value of the variable FOLDER_SCORE, as the scoring actor sees it, plus
    this folder's own offset: which folder's module and which command's variables the actor used."""

    name = "from_env"
    direction = Direction.MAXIMIZE
    OFFSET = {offset}

    def score(self, sample, generation, context):
        return Score(name=self.name, value=float(os.environ["FOLDER_SCORE"]) + self.OFFSET)
'''


def _folder(root: Path, name: str, tiny_model: Path, n: int, offset: int) -> Path:
    """A project folder of its own: the model and the data under relative paths, a custom metric module."""
    d = root / name
    (d / "models").mkdir(parents=True)
    (d / "models" / "tiny").symlink_to(tiny_model, target_is_directory=True)
    (d / "data.jsonl").write_text("".join(json.dumps({"id": f"{name}-{i}", "question": f"What is {i} plus 1?",
                                                      "answer": str(i + 1)}) + "\n" for i in range(n)))
    (d / "foldermetric.py").write_text(_METRIC.format(offset=offset))
    (d / "run.yaml").write_text(json.dumps({
        "name": f"folder-{name}",
        "model": {"type": "hf", "path": "${MODEL_DIR:-models/tiny}", "batch_size": 4},
        "dataset": {"path": "data.jsonl", "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"},
        "generation": {"max_new_tokens": 4},
        "metrics": ["exact_match", "foldermetric:FromEnv"],
        "execution": {"shard_size": 4},
        "store": {"path": "results"},
    }))
    return d


def test_three_runs_from_three_folders_with_other_variables_reuse_one_cluster_and_one_resident_model(
        tmp_path, warm_env, tiny_model):
    folders = [_folder(tmp_path, name, tiny_model, n, offset)
               for name, n, offset in (("a", 3, 0), ("b", 5, 100), ("c", 4, 200))]
    seen = []
    for k, d in enumerate(folders):
        env = {**warm_env, "FOLDER_SCORE": str(k + 1), f"ONLY_IN_SHELL_{k}": "x"}
        if k == 2:
            env["MODEL_DIR"] = "models/tiny"  # ${VAR} in the backend's settings: this command's value
        r = console("run", "run.yaml", "--json", "--quiet", cwd=d, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        st = _status(warm_env)
        seen.append({"cluster": st["cluster_id"], "keeper": st["keeper_pid"], "res": res,
                     "residents": [(x["name"], x["pid"], x["uses"]) for x in st["residents"]]})
        # each run read its own folder's data (relative path) and scored with its own folder's metric module
        # and its own command's FOLDER_SCORE
        assert res["metrics"]["from_env"]["n"] == (3, 5, 4)[k]
        assert res["metrics"]["from_env"]["mean"] == (k + 1) + (0, 100, 200)[k], res["metrics"]["from_env"]
        assert Path(res["samples_path"]).resolve().is_relative_to((d / "results").resolve())
    assert len({s["cluster"] for s in seen}) == 1 and len({s["keeper"] for s in seen}) == 1, seen
    # one resident model, one actor process, used by the three runs in turn
    assert [len(s["residents"]) for s in seen] == [1, 1, 1], seen
    assert len({s["residents"][0][:2] for s in seen}) == 1, seen
    assert [s["residents"][0][2] for s in seen] == [1, 2, 3], seen


# ------------------------------------------------------------------ up, status, evict, idle timeout
@pytest.fixture
def sim_run(tmp_path, data_file) -> Path:
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(json.dumps({
        "name": "sim",
        "model": {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target", "load_s": 0.5},
        "dataset": {"path": str(data_file), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"},
        "metrics": ["exact_match"],
        "execution": {"shard_size": 1},
        "store": {"path": str(tmp_path / "store")},
    }))
    return cfg


def test_up_then_run_in_one_shell_use_one_cluster_and_up_again_keeps_it(warm_env, sim_run):
    up = console("up", "--json", env=warm_env, timeout=120)
    assert up.returncode == 0, up.stderr
    first = json.loads(up.stdout)
    assert first["started"] is True
    r = console("run", sim_run, "--quiet", env=warm_env, timeout=240)
    assert r.returncode == 0, r.stderr
    again = console("up", env=warm_env, timeout=120)
    assert again.returncode == 0 and "already up, kept" in again.stdout, again.stdout
    st = _status(warm_env)
    assert (st["cluster_id"], st["keeper_pid"]) == (first["cluster_id"], first["keeper_pid"])


def test_status_lists_a_resident_model_with_its_memory_and_evict_frees_it(warm_env, sim_run):
    r = console("run", sim_run, "--quiet", env=warm_env, timeout=240)
    assert r.returncode == 0, r.stderr
    st = _status(warm_env)
    assert len(st["residents"]) == 1, st
    model = st["residents"][0]
    assert model["model"].startswith("simulated") and model["in_use"] is False
    assert model["rss_bytes"] and model["rss_bytes"] > 10 * 2**20 and _alive(model["pid"]), model
    # the cluster's own processes, each with its memory: the model's actor among them
    assert model["pid"] in {p["pid"] for p in st["processes"]}
    assert st["memory_bytes"] == sum(p["rss_bytes"] for p in st["processes"])
    text = console("status", env=warm_env, timeout=120)
    assert "resident models: 1" in text.stdout and "simulated" in text.stdout, text.stdout
    out = console("evict", "simulated", env=warm_env, timeout=120)
    assert out.returncode == 0 and "evicted" in out.stdout, out.stdout
    deadline = time.monotonic() + 30
    while _alive(model["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(model["pid"]), "evict left the model's process running"
    assert _status(warm_env)["residents"] == []


def test_the_resident_idle_timeout_frees_a_model_and_its_process(warm_env, sim_run):
    env = {**warm_env, "AUDITKIT_RAY_RESIDENT_IDLE_TIMEOUT": "3s"}
    r = console("run", sim_run, "--quiet", env=env, timeout=240)
    assert r.returncode == 0, r.stderr
    st = _status(warm_env)
    assert len(st["residents"]) == 1, st
    pid = st["residents"][0]["pid"]
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(pid), "the idle timeout left the model's process running"
    assert _status(warm_env)["residents"] == []


def test_no_resident_keeps_nothing_loaded_after_the_run(warm_env, sim_run):
    r = console("run", sim_run, "--quiet", "--no-resident", env=warm_env, timeout=240)
    assert r.returncode == 0, r.stderr
    assert _status(warm_env)["residents"] == []


def test_a_resident_model_serving_the_same_run_for_another_command_uses_that_commands_store_and_shards(
        warm_env, sim_run, tmp_path):
    # a run's fingerprint leaves out where its results go and how it is sharded: a later command's run of the same
    # fingerprint, served by the resident actor the first command left, is that command's (it was the first's:
    # its outputs went to the first store, and other shard sizes failed with Arrow's length error)
    first = console("run", sim_run, "--quiet", "--json", env=warm_env, timeout=240)
    assert first.returncode == 0, first.stderr
    (resident,) = _status(warm_env)["residents"]
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*") if p.is_file()}
    doc = json.loads(sim_run.read_text())
    doc["store"]["path"] = str(tmp_path / "other")
    doc["execution"]["shard_size"] = 2
    other = tmp_path / "other.yaml"
    other.write_text(json.dumps(doc))
    second = console("run", other, "--quiet", "--json", env=warm_env, timeout=240)
    assert second.returncode == 0, second.stderr
    assert [r["pid"] for r in _status(warm_env)["residents"]] == [resident["pid"]], "not the same resident actor"
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert a["fingerprint"] == b["fingerprint"]
    assert b["metrics"]["exact_match"] == a["metrics"]["exact_match"]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*") if p.is_file()} == before, \
        "the second command wrote into the first one's store"
    assert _rows(second.stdout) == _rows(first.stdout)


# ------------------------------------------------------------------ a changed checkpoint
def test_a_resident_model_whose_checkpoint_files_changed_is_reloaded_not_served_from_memory(
        tmp_path, warm_env, tiny_model):
    import safetensors.torch as st_torch
    import torch

    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_model, ckpt)
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} plus {i}?", "answer": str(2 * i)})
                            + "\n" for i in range(6)))

    def run(store: str) -> tuple[list, dict]:
        cfg = tmp_path / f"{store}.yaml"
        cfg.write_text(json.dumps({
            "name": store, "model": {"type": "hf", "path": str(ckpt), "batch_size": 6},
            "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
            "prompt": {"template": "{{ question }} Answer:"}, "generation": {"max_new_tokens": 6},
            "metrics": ["exact_match"], "execution": {"shard_size": 6}, "store": {"path": str(tmp_path / store)}}))
        r = console("run", cfg, "--json", "--quiet", env=warm_env, timeout=300)
        assert r.returncode == 0, r.stderr
        return _rows(r.stdout), _status(warm_env)

    before, st1 = run("before")
    old_pid = st1["residents"][0]["pid"]
    weights = ckpt / "model.safetensors"
    tensors = st_torch.load_file(str(weights))
    gen = torch.Generator().manual_seed(7)
    tensors = {k: (v + 0.5 * torch.randn(v.shape, generator=gen, dtype=v.dtype) if v.ndim == 2 else v)
               for k, v in tensors.items()}
    st_torch.save_file(tensors, str(weights), metadata={"format": "pt"})
    after, st2 = run("after")
    assert [t for _, t, _ in after] != [t for _, t, _ in before], "the new weights should change the outputs"
    # the changed checkpoint was loaded by a new actor; the stale one is gone, not kept beside it
    assert [r["pid"] for r in st2["residents"]] != [old_pid] and len(st2["residents"]) == 1, st2["residents"]
    deadline = time.monotonic() + 30
    while _alive(old_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(old_pid)
    # and its outputs are the new weights' own: the same as a fresh engine's on them
    fresh_env = {**warm_env}
    cfg = tmp_path / "fresh.yaml"
    cfg.write_text((tmp_path / "after.yaml").read_text().replace(str(tmp_path / "after"), str(tmp_path / "fresh")))
    r = console("run", cfg, "--json", "--quiet", "--no-resident", env=fresh_env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert _rows(r.stdout) == after


# ------------------------------------------------------------------ down during a run, a killed resident
@pytest.fixture
def slow_run(tmp_path) -> Path:
    data = tmp_path / "slow.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i:02d}", "question": f"q{i}", "answer": f"a{i}"}) + "\n"
                            for i in range(24)))
    cfg = tmp_path / "slow.yaml"
    cfg.write_text(json.dumps({
        "name": "slow",
        "model": {"type": "simulated", "fixed_cost_s": 0.6, "per_token_s": 0.0, "output": "target"},
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }}"},
        "metrics": ["exact_match"],
        "execution": {"shard_size": 1, "generation_actors": 1},
        "store": {"path": str(tmp_path / "slow-store")},
    }))
    return cfg


def _shards(store: Path) -> int:
    return sum(1 for _ in store.glob("runs/*/s1/shard-*.parquet"))


def _background(cfg: Path, env: dict, ignore_sigint: bool = False) -> subprocess.Popen:
    """``run CFG --json`` in the background; ``ignore_sigint``: started as a script's ``cmd &`` starts it, with
    SIGINT ignored (a non-interactive shell does that to its background jobs)."""
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    return subprocess.Popen([EXE, "run", str(cfg), "--json"], env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=ignore)


@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["foreground", "background-job-of-a-script"])
def test_down_during_a_run_stops_it_as_an_interruption_and_running_it_again_resumes(warm_env, slow_run, tmp_path,
                                                                                   ignore_sigint):
    proc = _background(slow_run, warm_env, ignore_sigint)
    store = tmp_path / "slow-store"
    deadline = time.monotonic() + 240
    while _shards(store) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert _shards(store) >= 3, proc.communicate(timeout=30)
    if ignore_sigint:  # a Ctrl-C meant for the script's shell is still ignored; only down's own stops it
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate(timeout=30)
    down = console("down", env=warm_env, timeout=120)
    assert down.returncode == 0, down.stderr
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    line = next((ln for ln in err.splitlines() if ln.startswith("interrupted")), "")
    assert line.startswith("interrupted: slow: the warm local cluster was stopped (auditkit-ray down); "), err
    assert "run the same command again to resume" in line, err
    stored = _shards(store)
    again = console("run", slow_run, "--json", "--quiet", env=warm_env, timeout=300)
    assert again.returncode == 0, again.stderr
    res = json.loads(again.stdout)
    assert res["metrics"]["exact_match"]["n"] == 24 and res["metrics"]["exact_match"]["mean"] == 1.0
    assert res["perf"]["generated"] <= 24 - stored + 1, (res["perf"], stored)  # resumed, not redone


def test_a_killed_resident_actor_mid_run_ends_with_the_uninterrupted_result(warm_env, slow_run, tmp_path):
    fast = tmp_path / "fast.yaml"
    spec = json.loads(slow_run.read_text())
    first = console("run", slow_run, "--json", "--quiet", env=warm_env, timeout=300)  # loads the resident
    assert first.returncode == 0, first.stderr
    reference = _rows(first.stdout)
    pid = _status(warm_env)["residents"][0]["pid"]
    spec["store"]["path"] = str(tmp_path / "again-store")
    fast.write_text(json.dumps(spec))
    proc = _background(fast, warm_env)
    deadline = time.monotonic() + 240
    while _shards(tmp_path / "again-store") < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert _shards(tmp_path / "again-store") >= 3, proc.communicate(timeout=30)
    os.kill(pid, signal.SIGKILL)  # the resident actor serving the run, mid-run
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert _rows(out) == reference
    assert json.loads(out)["metrics"]["exact_match"]["n"] == 24


def test_residents_beyond_the_memory_budget_are_evicted_least_recently_used_first(warm_env, tmp_path, data_file):
    env = dict(warm_env)

    def run(name: str) -> None:
        cfg = tmp_path / f"{name}.json"
        cfg.write_text(json.dumps({
            "name": name, "model": {"type": "simulated", "fixed_cost_s": 0.0, "output": name},
            "dataset": {"path": str(data_file), "input_field": "question", "target_field": "answer"},
            "metrics": ["exact_match"], "store": {"path": str(tmp_path / name)}}))
        r = console("run", cfg, "--quiet", env=env, timeout=240)
        assert r.returncode == 0, r.stderr

    # what one small resident holds on this host, to set a budget with room for one, not two: the registry
    # takes its budget from the command that starts it, so the probe's registry must go first
    run("constant")
    rss = _status(warm_env)["residents"][0]["rss_bytes"]
    assert console("evict", "--all", env=warm_env, timeout=120).returncode == 0
    deadline = time.monotonic() + 90  # an empty registry stops itself after residents.EMPTY_LINGER_S
    while _status(warm_env)["resident_registry"] and time.monotonic() < deadline:
        time.sleep(2)
    env["AUDITKIT_RAY_RESIDENT_MEMORY"] = str(int(rss * 1.5))
    run("target")
    first = _status(warm_env)["residents"]
    assert len(first) == 1 and first[0]["rss_bytes"] < rss * 1.5 < 2 * first[0]["rss_bytes"], (first, rss)
    run("prompt")
    deadline = time.monotonic() + 60  # the registry reads its residents' memory every 10 s
    left = _status(warm_env)["residents"]
    while len(left) > 1 and time.monotonic() < deadline:
        time.sleep(1)
        left = _status(warm_env)["residents"]
    assert len(left) == 1 and left[0]["name"] != first[0]["name"], left  # the older one went
    assert not _alive(first[0]["pid"])
