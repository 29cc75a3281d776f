"""The exit of a process that started its own local Ray cluster."""

import json
import os
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1] / "support"


def test_the_exit_hook_stops_the_local_autoscaler_monitor_and_the_cluster_keeps_working():
    # Ray's shutdown asks the monitor to stop and waits a second for it; the hook kills it first.
    # Its own fresh cluster (a subprocess), not the session's shared one.
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, str(SUPPORT / "local_monitor.py")], capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"monitor_alive_before": True, "monitor_alive_after": False, "task": 2}


SHOUTY = '''from auditkit_ray import Direction, Metric, Score


class Shouty(Metric):
    name = "shouty"
    direction = Direction.MAXIMIZE

    def score(self, sample, generation, context):
        return Score.scored(self.name, float(generation.text.isupper()))
'''


def test_a_local_cluster_gives_its_workers_the_working_directory_without_a_job_runtime_env(tmp_path):
    # a job runtime_env makes Ray start every worker through an extra setup process (seconds per run);
    # a cluster this process starts inherits the working directory on PYTHONPATH instead
    (tmp_path / "shouty_metric.py").write_text(SHOUTY)
    rows = [{"question": f"q{i}", "answer": "YES" if i % 2 else "no"} for i in range(6)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "AUDITKIT_RAY_WORKDIR")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # the package, not the working directory
    proc = subprocess.run([sys.executable, str(SUPPORT / "local_workdir.py")], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n"] == 6 and out["mean"] == 0.5  # the metric was imported from the working directory in the actors
    assert out["driver_env_restored"] is True
    assert out["worker"] == {"runtime_env": {}, "workdir": str(tmp_path), "cwd_on_path": True}
