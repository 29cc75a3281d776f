"""The local cluster a run starts for itself (``cluster/compat.py``, ``quick_local_start``):
Ray's head processes without the ones nobody would use, and without Ray's
one-second waits for its raylet. Each test starts its own fresh cluster in a
subprocess, as the command line does."""

import json
import os
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1] / "support"


def _start(**env_vars: str) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "AUDITKIT_RAY_LOG_TO_DRIVER", "RAY_USAGE_STATS_ENABLED")}
    # with usage statistics on, Ray's API server would report them: to nowhere in these tests
    env.update({"RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/", **env_vars})
    proc = subprocess.run([sys.executable, str(SUPPORT / "local_start.py")], capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = next(line for line in proc.stdout.splitlines() if line.startswith("{"))  # forwarded lines may come first
    return json.loads(report), proc.stdout + proc.stderr


def test_a_local_cluster_skips_rays_api_server_only_while_rays_usage_statistics_are_off():
    # with Ray's dashboard off, its API server only reports usage statistics; it is started (and waited
    # for, ~0.9 s) only when they are on, as Ray would
    off, _ = _start(RAY_USAGE_STATS_ENABLED="0")
    on, _ = _start(RAY_USAGE_STATS_ENABLED="1")
    assert off["task"] == 2 and on["task"] == 2
    assert "dashboard" not in off["processes"]
    assert "dashboard" in on["processes"]
    assert {"gcs_server", "raylet", "monitor"} <= set(off["processes"]) & set(on["processes"])


def test_a_local_cluster_starts_the_log_monitor_only_when_worker_output_is_forwarded_and_then_it_prints():
    quiet, quiet_out = _start(RAY_USAGE_STATS_ENABLED="0")
    loud, loud_out = _start(RAY_USAGE_STATS_ENABLED="0", AUDITKIT_RAY_LOG_TO_DRIVER="1")
    assert "log_monitor" not in quiet["processes"]
    assert "printed by the worker" not in quiet_out
    assert "log_monitor" in loud["processes"]
    assert "printed by the worker" in loud_out  # what the log monitor is for still works


def test_the_local_start_leaves_rays_node_class_as_it_was_and_waits_for_this_nodes_own_raylet():
    out, _ = _start(RAY_USAGE_STATS_ENABLED="0")
    assert out["restored"] is True  # a later ray.init of the caller's own starts as Ray starts it
    assert out["registered"] is True and out["other_registered"] is False
