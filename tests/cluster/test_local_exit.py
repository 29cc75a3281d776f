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


def _release(log_to_driver: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "AUDITKIT_RAY_LOG_TO_DRIVER")}
    if log_to_driver:
        env["AUDITKIT_RAY_LOG_TO_DRIVER"] = "1"
    proc = subprocess.run([sys.executable, str(SUPPORT / "local_release.py")], capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_exit_hook_stops_the_local_cluster_itself_unless_worker_logs_are_forwarded():
    # Ray's own exit hook sleeps half a second first so that forwarded worker logs can print; ours stops the
    # cluster before it when nothing is forwarded, and leaves it to Ray's hook (and its sleep) when logs are
    quiet = _release(log_to_driver=False)
    assert quiet["task"] == 2 and quiet["processes"] >= 3  # GCS, raylet, monitor (local_start.py skips the rest)
    assert quiet["connected"] is False and quiet["left"] == []
    forwarded = _release(log_to_driver=True)
    assert forwarded["task"] == 2 and forwarded["connected"] is True and len(forwarded["left"]) >= 3


FROZEN_AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count(), file=sys.stderr))  # runs last
sys.argv = ["auditkit-ray", "--version"]
from auditkit_ray.cli import entrypoint
entrypoint()
"""


def test_the_command_lines_exit_leaves_its_objects_out_of_the_interpreters_last_garbage_collection():
    # the last collection at interpreter exit walked every object a run left (~0.4 s); the command freezes them
    proc = subprocess.run([sys.executable, "-c", FROZEN_AT_EXIT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from auditkit_ray import __version__

    assert __version__ in proc.stdout
    count = int(proc.stderr.split("frozen at exit:")[1].split()[0])
    assert count > 10_000  # the modules' objects and everything else alive at the end


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


def test_a_local_run_prints_none_of_rays_notices_about_its_own_defaults(tmp_path):
    # Ray prints, on every local run, that token authentication is on (its default) and that Ray
    # Data's progress bars are off (we print our own); the run's own output is all that should show.
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    proc = subprocess.run([sys.executable, "-m", "auditkit_ray.cli", "run", "examples/echo.yaml",
                           "--store", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "exact_match" in proc.stdout and "[echo-check] shards 3/3" in proc.stderr  # the run and its progress
    assert "Token authentication is enabled" not in proc.stderr, proc.stderr
    assert "Progress bars disabled" not in proc.stderr, proc.stderr


def test_only_the_notice_about_rays_default_is_dropped_not_its_warning_of_a_cluster_without_authentication():
    import logging

    from ray._private.authentication import authentication_token_setup as auth

    from auditkit_ray.cluster.compat import TOKEN_AUTH_ENABLED as _TOKEN_AUTH_ENABLED
    from auditkit_ray.cluster.compat import TOKEN_AUTH_LOGGER as _TOKEN_AUTH_LOGGER
    from auditkit_ray.cluster.compat import dropped as _dropped

    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(_TOKEN_AUTH_LOGGER)
    assert logger is logging.getLogger(auth.__name__)
    logger.addHandler(handler)
    try:
        with _dropped(_TOKEN_AUTH_LOGGER, _TOKEN_AUTH_ENABLED):
            auth._warn_token_auth_enabled()  # Ray's own calls, so a changed message fails here
            auth._warn_token_auth_disabled()
        auth._warn_token_auth_enabled()  # after the block: printed again
    finally:
        logger.removeHandler(handler)
    assert len(seen) == 2, seen
    assert seen[0].startswith("Token authentication is disabled") and seen[1].startswith(_TOKEN_AUTH_ENABLED)
