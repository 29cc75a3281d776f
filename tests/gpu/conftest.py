"""The GPU tests' set-up: where they run, their one Ray cluster, their model and data.

The tests in this folder marked ``gpu`` need a CUDA device. ``pyproject.toml``
deselects them in the default run (``-m 'not gpu'``); ``pytest -m gpu`` selects
them, and each is then skipped with the reason when ``torch.cuda.is_available()``
is false. ``AUDITKIT_GPU_CHECK_CPU=1`` is the dry mode of ``scripts/gpu-check.sh
--cpu``: the same tests run on the CPU against a Ray cluster with two logical
GPUs (``ray.init(num_gpus=2)``), so Ray's GPU bookkeeping (actor placement,
``CUDA_VISIBLE_DEVICES``, fractional GPUs, release after a cell) is exercised
for real and only the CUDA kernels and the device memory readings are not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from gpu_check_support import DRY_ENV, DRY_GPUS, MODEL_ENV, NO_CUDA, GpuMode, dry_mode  # tests/gpu: pytest's pythonpath

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(scope="session")
def gpu_mode() -> GpuMode:
    """The session's GPU mode; skips the test (with the reason) where it cannot run."""
    if dry_mode():
        pytest.importorskip("torch", reason=f"{DRY_ENV}=1 needs torch (the 'hf' extra)")
        return GpuMode(dry=True, device="cpu", gpus=DRY_GPUS, name="cpu (dry mode, logical GPUs)")
    try:
        import torch
    except ImportError:
        pytest.skip("no CUDA device: torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip(NO_CUDA)
    return GpuMode(dry=False, device="cuda", gpus=torch.cuda.device_count(), name=torch.cuda.get_device_name(0))


@pytest.fixture(scope="session")
def gpu_cluster(gpu_mode):
    """One local Ray for the GPU tests with the machine's GPUs (the dry mode: two logical ones). Workers find
    this folder's user metric module through PYTHONPATH, which they inherit from the driver's environment."""
    ray = pytest.importorskip("ray", reason="the GPU tests need the 'ray' extra")
    if ray.is_initialized():
        ray.shutdown()
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), str(ROOT), saved) if p)
    try:
        ray.init(address="local", num_gpus=gpu_mode.gpus, num_cpus=2 if gpu_mode.dry else None,
                 include_dashboard=False, log_to_driver=False)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def gpu_model(request) -> Path:
    """The repo's tiny Llama checkpoint: the one ``scripts/gpu-check.sh`` built (``AUDITKIT_GPU_CHECK_MODEL``),
    else the session's own (``tiny_model``)."""
    given = os.environ.get(MODEL_ENV)
    if given:
        path = Path(given)
        assert (path / "config.json").is_file(), f"{MODEL_ENV}={given}: no checkpoint there"
        return path
    return request.getfixturevalue("tiny_model")


@pytest.fixture(scope="session")
def gpu_data(tmp_path_factory) -> Path:
    """24 arithmetic questions (6 shards of 4 in these runs: work for two actors)."""
    p = tmp_path_factory.mktemp("gpu-data") / "arith.jsonl"
    with open(p, "w", encoding="utf-8") as f:
        for i in range(24):
            a, b = i % 7, (i * 3) % 11
            f.write(json.dumps({"id": f"q{i:03d}", "question": f"What is {a} plus {b}?", "answer": str(a + b)}) + "\n")
    return p
