"""The command line behaves like one (issue 30): a reader that goes away (``| head``) ends the command
quietly with exit 0. The real console script, in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from console import EXE, check_clean_stderr

from auditkit_ray.testing.runs import build_run

ROOT = Path(__file__).resolve().parents[2]


def _reader_gone(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run with stdout a pipe whose only reader is closed before the command writes: its first write
    meets EPIPE (deterministically, unlike `| head`, where a small output may fit the pipe's buffer)."""
    p = subprocess.Popen([EXE, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    return subprocess.CompletedProcess(args, p.wait(timeout=120), "", err)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    ids = [f"q{i}" for i in range(20)]
    return [build_run(root, n, {"acc": {"values": {i: float(k % d != 0) for k, i in enumerate(ids)}}})
            for n, d in (("base", 3), ("cand", 4))]


@pytest.mark.parametrize("command", ["compare", "leaderboard", "schema", "init", "k8s render"])
def test_compare_piped_into_head_exits_zero_without_a_traceback(command, runs, tmp_path):
    args = {
        "compare": ["compare", *map(str, runs), "--resamples", "50"],
        "leaderboard": ["leaderboard", *map(str, runs), "--resamples", "50"],
        "schema": ["schema"],
        "init": ["init", str(tmp_path / "new")],
        "k8s render": ["k8s", "render", str(ROOT / "jobs/examples/leaderboard.yaml"), "--store", "s3://b/p"],
    }[command]
    r = _reader_gone(args, tmp_path)
    assert r.returncode == 0, r.stderr
    check_clean_stderr(r.stderr)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
                         ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_run_cleanly_naming_the_stored_shards_and_running_again_resumes(sig, code, word, tmp_path):
    import json
    import time

    import yaml

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i:02d}", "q": f"q{i}", "a": "x"}) + "\n" for i in range(24)))
    store = tmp_path / "store"
    cfg = {"name": "long", "dataset": {"path": str(data), "input_field": "q", "target_field": "a"},
           "model": {"type": "simulated", "fixed_cost_s": 0.6, "per_token_s": 0.0},
           "metrics": ["exact_match"], "execution": {"shard_size": 2, "generation_actors": 1},
           "store": {"path": str(store)}, "tracking": {"index": False}}
    run = tmp_path / "run.yaml"
    run.write_text(yaml.safe_dump(cfg))
    p = subprocess.Popen([EXE, "run", str(run), "--quiet"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not list(store.glob("runs/*/*/shard-*.parquet")):
        time.sleep(0.1)
    assert p.poll() is None, "the run ended before a shard was stored: " + p.stderr.read()
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == code, err
    # our one line, and at most the note naming the log file that holds Ray's own lines
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert lines and lines[0].startswith(f"{word}: long: ") and "run the same command again" in lines[0], err
    assert all(ln.startswith("(Ray and library log lines of this command: ") for ln in lines[1:]), err
    stored = int(lines[0].split(": ")[2].split(" of ")[0])
    assert 1 <= stored < 12, lines[0]
    assert "Traceback" not in err and "Stack (most recent call first)" not in err, err
    check_clean_stderr(err)
    again = subprocess.run([EXE, "run", str(run), "--json"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["perf"]["samples"] == 24
    check_clean_stderr(again.stderr)
    # the resumed run says what it reuses; off a terminal its progress still gives an ETA
    assert f"[long] resuming: {stored} of 12 shards are stored and reused" in again.stderr, again.stderr
    progress = [ln for ln in again.stderr.splitlines() if "[long] shards " in ln]
    assert progress and "ETA" in progress[0] and progress[-1].startswith("[long] shards 12/12"), again.stderr


def _session_processes(driver_pid: int) -> list[str]:
    """Processes of the local cluster a driver started: they carry its mark (runtime.REAPER_MARK, the driver's
    pid first) in their environment; Ray's agents rename themselves, so the command line cannot tell."""
    out = []
    needle = f"\0AUDITKIT_RAY_DRIVER={driver_pid}:".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in env:
            out.append(f"{pid}: {cmd[:120]}")
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
def test_a_killed_driver_takes_its_local_cluster_with_it(tmp_path):
    import json
    import time

    import yaml

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i:02d}", "q": f"q{i}", "a": "x"}) + "\n" for i in range(24)))
    cfg = {"name": "long", "dataset": {"path": str(data), "input_field": "q", "target_field": "a"},
           "model": {"type": "simulated", "fixed_cost_s": 0.6, "per_token_s": 0.0}, "metrics": ["exact_match"],
           "execution": {"shard_size": 2}, "store": {"path": str(tmp_path / "store")}, "tracking": {"index": False}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    p = subprocess.Popen([EXE, "run", "run.yaml", "--quiet"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not list((tmp_path / "store").glob("runs/*/*/shard-*")):
        time.sleep(0.1)
    assert p.poll() is None and _session_processes(p.pid), "the run never got going"
    p.kill()  # SIGKILL: no exit hook runs
    p.wait()
    deadline = time.time() + 20  # Ray's own agents stay for 45 s and more without the reaper
    while time.time() < deadline and _session_processes(p.pid):
        time.sleep(0.5)
    assert not _session_processes(p.pid), _session_processes(p.pid)


def test_a_failed_run_shows_only_our_message_and_names_the_log_holding_rays_lines(tmp_path, tiny_model):
    import json
    import shutil

    import yaml

    model = tmp_path / "no-weights"
    model.mkdir()
    shutil.copy(tiny_model / "config.json", model / "config.json")  # a folder without a tokenizer: it fails to
    shutil.copy(tiny_model / "model.safetensors", model / "model.safetensors")  # load in the actor, not planning
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i}", "q": "x", "a": "x"}) + "\n" for i in range(4)))
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({
        "name": "nw", "model": {"type": "hf", "path": str(model), "device": "cpu"},
        "dataset": {"path": str(data), "input_field": "q", "target_field": "a"}, "metrics": ["exact_match"],
        "store": {"path": str(tmp_path / "store")}, "tracking": {"index": False},
        # through Ray Data, whose failed actors print their own ERROR lines (a direct pipeline prints none)
        "execution": {"direct": False}}))
    r = subprocess.run([EXE, "run", "run.yaml", "--quiet"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and lines[0].startswith("error: hf backend: cannot load model"), r.stderr
    assert len(lines) == 2 and lines[1].startswith("(Ray and library log lines of this command: "), r.stderr
    check_clean_stderr(r.stderr)
    log = Path(lines[1].split(": ", 1)[1].rstrip(")"))
    assert "ERROR" in log.read_text(), "Ray's own lines went to the log file"
    # --verbose lets them through (shown here on a line of Ray's format, without starting Ray again)
    from auditkit_ray.cli.noise import FOREIGN

    assert FOREIGN.match(next(ln for ln in log.read_text().splitlines() if "ERROR" in ln))
    assert "--verbose" in subprocess.run([EXE, "--help"], capture_output=True, text=True).stdout
