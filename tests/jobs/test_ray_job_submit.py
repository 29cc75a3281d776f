"""A real Ray cluster (`ray start --head` on 127.0.0.1) and real `ray job
submit`: the pruning/quantization grid runs as a Ray job, is stopped midway,
is submitted again, and finishes with the results of an uninterrupted sweep."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytest.importorskip("ray", reason="needs the 'ray' extra (make test installs it)")

from local_cluster import free_port, stop_cluster  # noqa: E402  (tests/support)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray = shutil.which("ray", path=str(BIN)) or str(BIN / "ray")
    # the job agent's own port too: Ray's default (52365) is taken by whichever local cluster on the machine
    # started first (another xdist worker's session cluster), and jobs are then refused as "no available agent"
    gcs, dash, agent = free_port(), free_port(), free_port()
    import tempfile

    temp_dir = tempfile.mkdtemp(prefix="akjob-", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "HF_HUB_OFFLINE": "1"}
    start = subprocess.run(
        [
            ray,
            "start",
            "--head",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(gcs),
            "--num-cpus",
            "2",
            "--num-gpus",
            "2",
            "--include-dashboard",
            "true",
            "--dashboard-host",
            "127.0.0.1",
            "--dashboard-port",
            str(dash),
            "--dashboard-agent-listen-port",
            str(agent),
            "--disable-usage-stats",
            "--temp-dir",
            temp_dir,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert start.returncode == 0, start.stdout + start.stderr
    address = f"http://127.0.0.1:{dash}"
    client_env = {**env, "RAY_AUTH_MODE": "token", "RAY_ADDRESS": address}
    deadline = time.time() + 60
    while time.time() < deadline:
        if (
            subprocess.run([ray, "job", "list", "--address", address], capture_output=True, env=client_env).returncode
            == 0
        ):
            break
        time.sleep(1)
    yield {"ray": ray, "address": address, "env": client_env, "gcs": f"127.0.0.1:{gcs}"}
    stop_cluster(temp_dir)


def _submit(
    cluster, workdir: Path, sweep: Path, submission_id: str, wait: bool
) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = (
        [
            cluster["ray"],
            "job",
            "submit",
            "--address",
            cluster["address"],
            "--submission-id",
            submission_id,
            "--working-dir",
            str(workdir),
        ]
        + ([] if wait else ["--no-wait"])
        + ["--", sys.executable, "jobs/run_sweep.py", "--config", sweep.name]
    )
    deadline = time.time() + 120
    while True:
        out = subprocess.run(cmd, capture_output=True, text=True, env=cluster["env"], timeout=900)
        # the job agent can lag the dashboard on a loaded machine: Ray says "try again later"
        if out.returncode == 0 or "try again later" not in out.stderr + out.stdout or time.time() > deadline:
            return out
        time.sleep(2)


def _status(cluster, sid: str) -> str:
    out = subprocess.run(
        [cluster["ray"], "job", "status", "--address", cluster["address"], sid],
        capture_output=True,
        text=True,
        env=cluster["env"],
    )
    for state in ("SUCCEEDED", "FAILED", "STOPPED", "RUNNING", "PENDING"):
        if re.search(rf"\b{state}\b", out.stdout + out.stderr, re.IGNORECASE):
            return state
    return "UNKNOWN: " + (out.stdout + out.stderr)[-500:]


def test_grid_through_ray_job_submit_stopped_and_resubmitted_matches_uninterrupted(
    cluster, tiny_grid, tmp_path, make_grid_sweep
):
    data = tmp_path / "arith.jsonl"
    shutil.copy(ROOT / "examples/data/arith.jsonl", data)
    store = tmp_path / "store"
    workdir = tmp_path / "wd"
    (workdir / "jobs").mkdir(parents=True)
    shutil.copy(ROOT / "jobs/run_sweep.py", workdir / "jobs/run_sweep.py")
    sweep_doc = make_grid_sweep(tiny_grid, data, store)
    sweep = workdir / "grid.yaml"
    sweep.write_text(yaml.safe_dump(sweep_doc))

    sub = _submit(cluster, workdir, sweep, "grid-1", wait=False)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    deadline = time.time() + 300
    while time.time() < deadline and len(list(store.rglob("runs/*/s8/shard-*.parquet"))) < 6:
        assert _status(cluster, "grid-1") in ("RUNNING", "PENDING"), _status(cluster, "grid-1")
        time.sleep(0.5)
    stop = subprocess.run(
        [cluster["ray"], "job", "stop", "--address", cluster["address"], "grid-1"],
        capture_output=True,
        text=True,
        env=cluster["env"],
        timeout=120,
    )
    assert stop.returncode == 0, stop.stdout + stop.stderr
    done_at_stop = len(list(store.rglob("runs/*/s8/shard-*.parquet")))
    assert 6 <= done_at_stop < 18, f"the stop should land midway ({done_at_stop} of 18 shards)"

    again = _submit(cluster, workdir, sweep, "grid-2", wait=True)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert _status(cluster, "grid-2") == "SUCCEEDED"
    logs = subprocess.run(
        [cluster["ray"], "job", "logs", "--address", cluster["address"], "grid-2"],
        capture_output=True,
        text=True,
        env=cluster["env"],
    ).stdout
    assert "6 runs" in logs and "exact_match" in logs, logs[-3000:]  # one leaderboard over the grid

    # the same sweep uninterrupted, in another store, in this process (its own local Ray)
    ref_doc = make_grid_sweep(tiny_grid, data, tmp_path / "ref")
    ref_file = tmp_path / "ref.yaml"
    ref_file.write_text(yaml.safe_dump(ref_doc))
    ref = subprocess.run(
        [
            sys.executable,
            "-m",
            "auditkit_ray.cli",
            "sweep",
            str(ref_file),
            "--json",
            "--quiet",
            "--address",
            cluster["gcs"],
        ],
        capture_output=True,
        text=True,
        env={**cluster["env"], "RAY_ADDRESS": ""},
        timeout=600,
    )
    assert ref.returncode == 0, ref.stderr[-3000:]
    ref_runs = {r["name"]: r for r in json.loads(ref.stdout)["runs"]}
    assert len(ref_runs) == 6
    for name, r in ref_runs.items():
        got = json.loads((store / "runs" / r["fingerprint"] / "result.json").read_text())
        assert {k: (m["mean"], m["n"], m["counts"]) for k, m in got["metrics"].items()} == \
               {k: (m["mean"], m["n"], m["counts"]) for k, m in r["metrics"].items()}, name
        import pyarrow.dataset as pads

        a = pads.dataset(got["samples_path"]).to_table().sort_by([("shard", "ascending"), ("index", "ascending")])
        b = pads.dataset(r["samples_path"]).to_table().sort_by([("shard", "ascending"), ("index", "ascending")])
        assert a.column("text").to_pylist() == b.column("text").to_pylist()
        assert a.column("scores").to_pylist() == b.column("scores").to_pylist()


def test_resident_engines_at_an_address_are_opt_in_and_serve_the_next_command(cluster, tmp_path, data_file):
    """On a cluster at an address a model stays loaded only when a run asks (``--resident``); then the next
    command with the same model uses it, ``status --address`` lists it and ``evict --address`` frees it."""
    from console import console

    env = {**cluster["env"], "AUDITKIT_RAY_WARM": "0"}
    env.pop("RAY_ADDRESS", None)

    def run(store: str, *flags: str) -> dict:
        cfg = tmp_path / f"{store}.json"
        cfg.write_text(json.dumps({
            "name": store, "model": {"type": "simulated", "fixed_cost_s": 0.0, "output": "target", "load_s": 0.5},
            "dataset": {"path": str(data_file), "input_field": "question", "target_field": "answer"},
            "metrics": ["exact_match"], "store": {"path": str(tmp_path / store)}, "tracking": {"index": False}}))
        r = console("run", cfg, "--address", cluster["gcs"], "--json", "--quiet", *flags, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def residents() -> list[dict]:
        r = console("status", "--address", cluster["gcs"], "--json", env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["residents"]

    assert run("plain")["metrics"]["exact_match"]["mean"] == 1.0
    assert residents() == []  # opt-in at an address: nothing kept
    run("kept", "--resident")
    run("kept-again", "--resident")
    kept = residents()
    assert len(kept) == 1 and kept[0]["uses"] == 2 and kept[0]["model"].startswith("simulated"), kept
    out = console("evict", "--all", "--address", cluster["gcs"], env=env, timeout=120)
    assert out.returncode == 0 and "evicted" in out.stdout, out.stdout
    assert residents() == []


def test_joining_a_token_cluster_without_its_token_is_one_line_saying_how_to_send_it(cluster, tmp_path, data_file):
    """A cluster `ray start` made asks for a token (Ray 2.60's default); a command that joins it without
    ``RAY_AUTH_MODE=token`` gets one line naming the address and the settings, not Ray's traceback."""
    from console import console

    env = {**cluster["env"], "AUDITKIT_RAY_WARM": "0", "RAY_AUTH_MODE": ""}
    env.pop("RAY_ADDRESS", None)
    cfg = tmp_path / "run.json"
    cfg.write_text(json.dumps({
        "name": "tok", "model": {"type": "simulated", "fixed_cost_s": 0.0, "output": "target"},
        "dataset": {"path": str(data_file), "input_field": "question", "target_field": "answer"},
        "metrics": ["exact_match"], "store": {"path": str(tmp_path / "store")}, "tracking": {"index": False}}))
    r = console("run", cfg, "--address", cluster["gcs"], env=env, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("(Ray and library log lines")]
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr)
    assert lines[0].startswith(f"error: the Ray cluster at {cluster['gcs']} asks for a token"), lines
    assert "RAY_AUTH_MODE=token" in lines[0], lines
    assert not (tmp_path / "store" / "runs").exists()
