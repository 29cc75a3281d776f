"""Fixtures shared by the backend tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """A real local Ray on this machine's CPUs for the vLLM pipeline tests (vLLM's CPU engine in-process in
    its actor: VLLM_ENABLE_V1_MULTIPROCESSING=0); shut down after the module unless it was already up."""
    ray = pytest.importorskip("ray", reason="the pipeline needs the 'ray' extra")
    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false"}})
        started = True
    yield ray
    if started:
        ray.shutdown()
