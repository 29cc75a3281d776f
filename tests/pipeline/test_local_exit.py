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
