"""The warm local cluster (issue 42): consecutive command-line runs on one machine share one local Ray,
started by the first, stopped by ``auditkit-ray down`` or its idle timeout; a killed run or a killed
keeper leaves nothing a later run cannot reuse or replace. The real console script, in subprocesses, with a
state folder of the test's own (``AUDITKIT_RAY_HOME``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from console import EXE, console

pytest.importorskip("ray", reason="the warm cluster is a local Ray: the 'ray' extra (make test installs it)")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def warm_env(tmp_path):
    env = {"AUDITKIT_RAY_WARM": "1", "AUDITKIT_RAY_HOME": str(tmp_path / "home"), "AUDITKIT_RAY_IDLE_TIMEOUT": "120"}
    yield env
    console("down", env=env, timeout=60)


@pytest.fixture
def run_file(tmp_path, data_file) -> Path:
    cfg = tmp_path / "run.yaml"
    cfg.write_text(json.dumps({
        "name": "warm",
        "model": {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target"},
        "dataset": {"path": str(data_file), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"},
        "metrics": ["exact_match"],
        "execution": {"shard_size": 2},
        "store": {"path": str(tmp_path / "store")},
    }))
    return cfg


def _state(env: dict) -> dict | None:
    p = Path(env["AUDITKIT_RAY_HOME"]) / "local-cluster" / "state.json"
    return json.loads(p.read_text()) if p.exists() else None


def _drivers(env: dict) -> list[dict]:
    p = Path(env["AUDITKIT_RAY_HOME"]) / "local-cluster" / "drivers.log"
    return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def _marked(mark_of_keeper: int) -> list[int]:
    """Live processes (from ``ps``) of the cluster the keeper started: they carry its reaper mark."""
    out = subprocess.run(["ps", "-eo", "pid=,stat="], capture_output=True, text=True, check=True).stdout
    needle = f"AUDITKIT_RAY_DRIVER={mark_of_keeper}:".encode()
    pids = []
    for line in out.splitlines():
        pid, stat = line.split()[:2]
        if stat.startswith("Z"):
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in env:
            pids.append(int(pid))
    return pids


def _wait_gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def _timed_run(run_file: Path, env: dict, store: Path) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    r = console("run", run_file, "--store", store, "--json", "--quiet", env=env, timeout=240)
    return r, time.perf_counter() - t0


def test_a_second_run_reuses_the_warm_cluster_and_down_leaves_no_ray_process(run_file, warm_env, tmp_path):
    first, t_first = _timed_run(run_file, warm_env, tmp_path / "s1")
    assert first.returncode == 0, first.stderr
    st = _state(warm_env)
    assert st is not None, "the first run started the warm cluster"
    assert _marked(st["keeper_pid"]), "the cluster's processes carry the keeper's mark"
    second, t_second = _timed_run(run_file, warm_env, tmp_path / "s2")
    assert second.returncode == 0, second.stderr
    assert _state(warm_env)["cluster_id"] == st["cluster_id"] and _state(warm_env)["keeper_pid"] == st["keeper_pid"]
    drivers = _drivers(warm_env)
    assert len(drivers) == 2 and {d["cluster_id"] for d in drivers} == {st["cluster_id"]}
    assert json.loads(first.stdout)["metrics"] == json.loads(second.stdout)["metrics"]
    print(f"first run (starts the cluster) {t_first:.2f}s, second (reuses it) {t_second:.2f}s")
    assert t_second < t_first, "the second run skips Ray's start"
    up = console("up", "--json", env=warm_env)
    assert up.returncode == 0 and json.loads(up.stdout)["started"] is False
    assert json.loads(up.stdout)["cluster_id"] == st["cluster_id"]
    down = console("down", env=warm_env, timeout=60)
    assert down.returncode == 0 and st["cluster_id"] in down.stdout
    assert _wait_gone(st["keeper_pid"])
    deadline = time.time() + 30
    while _marked(st["keeper_pid"]) and time.time() < deadline:
        time.sleep(0.2)
    assert not _marked(st["keeper_pid"]), "down leaves no process of the cluster"
    assert _state(warm_env) is None
    again = console("down", env=warm_env)
    assert again.returncode == 0 and "no warm local Ray cluster" in again.stdout


def test_a_killed_run_leaves_a_cluster_the_next_run_reuses(run_file, warm_env, tmp_path, write):
    slow = tmp_path / "slow.yaml"
    cfg = json.loads(run_file.read_text())
    cfg["model"]["fixed_cost_s"] = 2.0
    slow.write_text(json.dumps(cfg))
    p = subprocess.Popen([EXE, "run", str(slow), "--store", str(tmp_path / "killed"), "--quiet"],
                         env={**os.environ, **warm_env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and len(_drivers(warm_env)) < 1:
        time.sleep(0.1)
    time.sleep(1.0)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    st = _state(warm_env)
    assert st is not None and p.returncode == -signal.SIGKILL
    r, _ = _timed_run(run_file, warm_env, tmp_path / "after-kill")
    assert r.returncode == 0, r.stderr
    assert _state(warm_env)["cluster_id"] == st["cluster_id"], "the killed run's cluster is reused"


def test_a_killed_keeper_takes_its_cluster_and_the_next_run_replaces_it(run_file, warm_env, tmp_path):
    up = console("up", "--json", env=warm_env, timeout=120)
    assert up.returncode == 0, up.stderr
    st = json.loads(up.stdout)
    assert st["started"] is True and _marked(st["keeper_pid"])
    os.kill(st["keeper_pid"], signal.SIGKILL)
    assert _wait_gone(st["keeper_pid"])
    deadline = time.time() + 60
    while _marked(st["keeper_pid"]) and time.time() < deadline:
        time.sleep(0.2)
    assert not _marked(st["keeper_pid"]), "the keeper's reaper killed its cluster"
    r, _ = _timed_run(run_file, warm_env, tmp_path / "replaced")
    assert r.returncode == 0, r.stderr
    new = _state(warm_env)
    assert new is not None and new["keeper_pid"] != st["keeper_pid"] and new["cluster_id"] != st["cluster_id"]


def test_the_idle_timeout_stops_the_cluster(warm_env):
    up = console("up", "--idle-timeout", "2s", "--json", env=warm_env, timeout=120)
    assert up.returncode == 0, up.stderr
    st = json.loads(up.stdout)
    assert st["idle_timeout_s"] == 2.0
    assert _wait_gone(st["keeper_pid"], timeout=60), "the keeper stops itself once idle"
    deadline = time.time() + 30
    while _marked(st["keeper_pid"]) and time.time() < deadline:
        time.sleep(0.2)
    assert not _marked(st["keeper_pid"]) and _state(warm_env) is None


def test_a_bad_idle_timeout_is_a_usage_error(warm_env):
    r = console("up", "--idle-timeout", "soon", env=warm_env)
    assert r.returncode == 2 and "not a duration: 'soon'" in r.stderr
