"""The GPU tests of resident engines and device memory (tests/gpu/test_gpu_resident.py, test_gpu_memory.py) in
the dry mode of ``scripts/gpu-check.sh --cpu``, run as the script runs them: a nested ``pytest -m gpu`` with
``AUDITKIT_GPU_CHECK_CPU=1`` (its own Ray with two logical GPUs, the model on the CPU).

Not marked ``gpu``: this runs on CPU CI. The script's own dry run (test_gpu_check_script.py) takes the other GPU
tests. One nested run of all of them took 406 s on a slow host, past the script's 400 s limit for its test step;
in two files they stay well within it and ``--dist loadgroup`` can give them to different workers."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from gpu_check_support import DRY_NESTED_FILES

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_resident_engine_and_device_memory_gpu_tests_pass_in_the_dry_mode(tmp_path, tiny_model):
    pytest.importorskip("ray", reason="the GPU tests need the 'ray' extra")
    pytest.importorskip("torch", reason="the GPU tests' dry mode needs torch (the 'hf' extra)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    # what scripts/gpu-check.sh sets for its test step; the offline settings and the experiment index come from
    # tests/conftest.py, which this session and the nested one both load
    env.update(AUDITKIT_GPU_CHECK_CPU="1", AUDITKIT_GPU_CHECK_MODEL=str(tiny_model),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    junit = tmp_path / "gpu-tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "gpu", *DRY_NESTED_FILES, "-ra", "-v",
           "--junitxml", str(junit)]
    proc = subprocess.run(cmd, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    for name in ("test_device_memory_returns_to_its_baseline_after_each_sweep_cell_and_after_a_failed_one",
                 "test_a_resident_engine_on_a_gpu_is_warmed_serves_the_next_run_and_gives_a_fresh_engines_outputs"):
        case = cases.get(name)
        assert case is not None and not list(case), (name, proc.stdout[-3000:])  # present, no failure or skip
