"""Fixtures shared by the backend tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """A real local Ray on this machine's CPUs for the vLLM pipeline tests (vLLM's CPU engine in-process in
    its actor: VLLM_ENABLE_V1_MULTIPROCESSING=0); shut down after the module unless it was already up."""
    ray = pytest.importorskip("ray", reason="the pipeline needs the 'ray' extra")
    import shared_cluster

    shared_cluster.release(ray)  # the worker's shared cluster lacks the variables above: the next Ray test restarts it
    started = False
    if not ray.is_initialized():
        # address="local": a fresh cluster of its own, never one that another test's `ray start` left running;
        # the workers inherit the environment set while it starts (a job runtime_env would start each worker
        # through an extra setup process)
        env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false"}
        from auditkit_ray.cluster.local import environ

        with environ(env):
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        started = True
    yield ray
    if started:
        ray.shutdown()
