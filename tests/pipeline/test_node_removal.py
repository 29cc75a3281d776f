"""A Ray worker node removed mid-run from a real multi-node cluster.

Two `ray start` on 127.0.0.1 make a head node (1 CPU, 1 logical GPU) and a
worker node (1 CPU, 2 logical GPUs); with two generation actors of one GPU
each, at least one of them must live on the worker node. The driver runs as
`auditkit-ray run --address` on the head. Halfway through, the worker node is
killed (its raylet and every process under it, as when a machine or a pod
disappears); the surviving head finishes the work, or a replacement node
joins as KubeRay starts a new pod for a lost one. Either way the run must
finish with the RunResult of an uninterrupted run: no sample lost, none
counted twice, and `--json` prints that RunResult alone on stdout."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from local_cluster import cluster_pids, free_port, process_tree, signal_all, stop_cluster  # tests/support

from auditkit_ray.api import evaluate
from auditkit_ray.core.result import RunResult

BIN = Path(sys.executable).parent
RAY = shutil.which("ray", path=str(BIN)) or str(BIN / "ray")
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _start_worker(head: str, temp_dir: str) -> set[int]:
    """`ray start` a worker node; returns the processes it added."""
    before = cluster_pids(temp_dir)
    out = subprocess.run(
        [
            RAY,
            "start",
            "--address",
            head,
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            "1",
            "--num-gpus",
            "2",
            "--disable-usage-stats",
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return cluster_pids(temp_dir) - before


@pytest.fixture
def two_node_cluster():
    temp_dir = tempfile.mkdtemp(prefix="aknode-", dir="/tmp")  # short: Ray's socket paths have a length limit
    port = free_port()
    head = f"127.0.0.1:{port}"
    try:
        out = subprocess.run(
            [
                RAY,
                "start",
                "--head",
                "--node-ip-address",
                "127.0.0.1",
                "--port",
                str(port),
                "--num-cpus",
                "1",
                "--num-gpus",
                "1",
                "--include-dashboard",
                "false",
                "--disable-usage-stats",
                "--temp-dir",
                temp_dir,
            ],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=180,
        )
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        worker = _start_worker(head, temp_dir)
        yield {"address": head, "temp_dir": temp_dir, "worker": worker}
    finally:
        stop_cluster(temp_dir)


@pytest.mark.parametrize("replaced", [False, True], ids=["survivors-only", "replacement-node"])
def test_worker_node_removed_mid_run_ends_with_the_uninterrupted_result(
    two_node_cluster, make_spec, tmp_path, rows, numbers, ray_cluster, replaced
):
    from auditkit_ray.pipeline.identity import generation_fingerprint

    slow = {"type": "simulated", "fixed_cost_s": 1.0, "per_token_s": 0.0, "output": "prompt"}
    execution = {"shard_size": 2, "generation_actors": 2, "scoring_actors": 1}
    spec = make_spec("removed", model=slow, execution=execution)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True)))
    gen_dir = tmp_path / "removed" / "generations" / generation_fingerprint(spec) / "s2"
    n_shards = 20

    def done() -> int:
        return len(list(gen_dir.glob("shard-*.parquet"))) if gen_dir.exists() else 0

    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "auditkit_ray.cli",
            "run",
            str(cfg),
            "--address",
            two_node_cluster["address"],
            "--quiet",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    try:
        deadline = time.time() + 240
        while time.time() < deadline and done() < 4:
            assert driver.poll() is None, driver.stderr.read()[-3000:]
            time.sleep(0.1)
        node = process_tree(two_node_cluster["worker"])
        on_node = [p for p in node if "GenerationActor" in _cmdline(p)]  # ray::GenerationActor, the driver's own actor
        assert on_node, "the worker node should host a generation actor (the head has one GPU for two actors)"
        signal_all(node, signal.SIGKILL)
        removed_at = done()
        assert removed_at < n_shards - 4, (
            f"the node was removed too late to matter ({removed_at} of {n_shards} shards done)"
        )
        time.sleep(5)
        assert driver.poll() is None, (
            "the driver must not give up when a node disappears:\n" + driver.stderr.read()[-3000:]
        )
        if replaced:  # as KubeRay starts a new pod for a lost one; without it the survivors finish the run
            _start_worker(two_node_cluster["address"], two_node_cluster["temp_dir"])
        out, err = driver.communicate(timeout=400)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, err[-3000:]
    res = RunResult.model_validate_json(out)
    assert res.error_count == 0 and res.metrics["exact_match"].n == 40
    ref = evaluate(make_spec("ref", model={**slow, "fixed_cost_s": 0.0}, execution=execution))
    assert numbers(res) == numbers(ref)
    assert rows(res) == rows(ref)  # every sample once, with the uninterrupted text and scores
    assert len({r[0] for r in rows(res)}) == 40 == len(rows(res))
    assert res.perf.generated == 40, "each sample's generation counted once"
