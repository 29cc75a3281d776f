"""The worker's shared local Ray (the ``ray_cluster`` fixture of tests/conftest.py): 2 CPUs and 4 logical GPUs,
started in the test process, and what a fixture that needs a cluster of its own (tests/backends' ``local_ray``:
vLLM's engine needs other environment variables in its workers) does about it.

A test worker runs its files in collection order, and tests/actors comes before tests/backends: the shared
cluster may be up when a file wants its own. That file stops it (``release``) and the next test that asks for
``ray_cluster`` starts it again (``ensure``), which costs one start; a cluster that is already up is never
taken for the shared one by mistake: it is recognised by its address."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: the shared cluster's GCS address while it is up in this process (None: not started, or released)
_UP: dict[str, str | None] = {"address": None}


def _address(ray: Any) -> str | None:
    return ray.get_runtime_context().gcs_address if ray.is_initialized() else None


def ensure(caches: dict[str, str]) -> Any:
    """The shared cluster, started unless it is up: returns the ``ray`` module connected to it."""
    import ray

    from auditkit_ray.cluster.local import environ

    if _UP["address"] is not None and _address(ray) == _UP["address"]:
        return ray
    if ray.is_initialized():  # another fixture's cluster, or one a test left up
        ray.shutdown()
    # moto's S3 accepts any credentials; the workers inherit these at start
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    # the driver imports these folders' modules through pytest's pythonpath; the workers get them here, from the
    # environment they inherit (set while Ray starts, then put back), not from a job runtime_env: with one, Ray
    # starts every worker through an extra setup process (most of a second each)
    paths = [ROOT / "tests" / "support", ROOT / "examples" / "agents", ROOT]
    pythonpath = os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")])
    with environ({"PYTHONPATH": pythonpath, **caches}):
        ray.init(address="local", num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False)
    _UP["address"] = _address(ray)
    return ray


def is_up(ray: Any) -> bool:
    """Whether the process is connected to the shared cluster now."""
    return _UP["address"] is not None and _address(ray) == _UP["address"]


def release(ray: Any) -> None:
    """Stop the shared cluster if it is what the process is connected to (a fixture about to start its own)."""
    if is_up(ray):
        ray.shutdown()
    _UP["address"] = None


def wait_gpus_free(ray: Any, test: str) -> None:
    """Return once all four GPUs of the shared cluster are free, or fail naming ``test`` as the one whose
    predecessor leaked them. pytest keeps a test's log records (and so the exceptions Ray Data logged, their
    frames and the actor handles in them) until that test's teardown; the collector frees them once they are
    dropped. A test that truly leaks an actor fails the next one here, named."""
    import gc
    import time

    gc.collect()
    deadline = time.time() + 30
    while time.time() < deadline and ray.available_resources().get("GPU", 0) < 4:
        time.sleep(0.2)
    assert ray.available_resources().get("GPU", 0) == 4, (
        f"a test before {test} left actors holding GPUs: {ray.available_resources()}")
