"""``scripts/gpu-check.sh`` (issue 32): the one prepared command a GPU machine runs, checked here in its dry mode.

Not marked ``gpu``: this runs on CPU CI. ``--cpu`` runs the GPU tests (with ``AUDITKIT_GPU_CHECK_CPU=1``: Ray's
logical GPUs, the model on the CPU) and the benchmark (a tiny model on the CPU) for real, as subprocesses, and
the tests read what the script wrote: its JSON of figures and its log. The session's tiny model is handed to
the script (``AUDITKIT_GPU_CHECK_MODEL``) rather than built again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_check_support import DRY_NESTED_FILES

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"

pytestmark = pytest.mark.slow


def _run(out: Path, *args: str, timeout: int = 540, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("AUDITKIT_GPU_CHECK_CPU", "PYTEST_ADDOPTS")}
    full["PYTHON"] = sys.executable
    full.update(env)
    return subprocess.run(["bash", str(SCRIPT), str(out), *args], cwd=str(ROOT), env=full, capture_output=True,
                          text=True, timeout=timeout)


def test_dry_mode_runs_the_gpu_tests_and_the_benchmark_and_writes_the_json_and_the_log(tmp_path, tiny_model):
    pytest.importorskip("ray", reason="the GPU check needs the 'ray' extra")
    out = tmp_path / "check"
    # the resident-engine and device-memory GPU tests run in test_gpu_dry_mode.py's nested run (see there why)
    rest = " ".join(f"--ignore={f}" for f in DRY_NESTED_FILES)
    proc = _run(out, "--cpu", AUDITKIT_GPU_CHECK_MODEL=str(tiny_model), PYTEST_ADDOPTS=rest)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = json.loads((out / "gpu-check.json").read_text())
    assert doc["mode"] == "cpu-dry" and doc["ok"] is True and doc["missing"] == []
    assert doc["steps"]["gpu_tests"]["rc"] == 0 and doc["steps"]["bench_gpu"]["rc"] == 0
    cases = {c["test"]: c for c in doc["tests"]["cases"]}
    assert doc["tests"]["failed"] == doc["tests"]["error"] == 0
    for name in ("test_hf_generates_in_bfloat16_on_a_gpu_of_ray", "test_hf_generates_in_float16_on_a_gpu_of_ray",
                 "test_each_generation_actor_sees_its_own_cuda_visible_devices",
                 "test_two_actors_share_one_gpu_with_num_gpus_half",
                 "test_one_and_two_actors_give_the_same_per_sample_outputs"):
        assert cases[name]["state"] == "passed", cases.get(name)
    vllm = cases["test_vllm_generates_on_a_gpu_with_the_pipeline"]
    assert vllm["state"] == "skipped" and "dry mode" in vllm["reason"]
    figures = doc["bench"]["figures"]
    assert doc["bench"]["settings"]["device"] == "cpu"
    assert figures["gpu.fixed_length_held"] is True and figures["gpu.same_batches"] is True
    for k in ("gpu.plain.prompts_per_s", "gpu.auditkit.prompts_per_s", "gpu.plain.tokens_per_s",
              "gpu.auditkit.tokens_per_s", "gpu.ratio.auditkit_vs_plain", "gpu.bytes_per_decode_step.weights"):
        assert isinstance(figures[k], (int, float)) and figures[k] > 0, (k, figures.get(k))
    log = (out / "gpu-check.log").read_text()
    assert "test_one_and_two_actors_give_the_same_per_sample_outputs PASSED" in log
    assert not any(c.startswith(("test_device_memory", "test_a_resident_engine")) for c in cases), cases
    assert "gpu.ratio.auditkit_vs_plain:" in log and "gpu-check: OK" in log
    assert log.strip().endswith(f"{out / 'gpu-check.log'}"), "the log ends with the summary"


def test_a_failing_step_fails_the_check_and_the_json_names_it(tmp_path, tiny_model):
    out = tmp_path / "check"
    # no test selected (pytest exits 5) and arguments the benchmark refuses (exit 2): both steps fail, fast
    proc = _run(out, "--cpu", AUDITKIT_GPU_CHECK_MODEL=str(tiny_model), PYTEST_ADDOPTS="-k no_such_test",
                GPU_CHECK_BENCH_ARGS="--new-tokens 1", timeout=240)
    assert proc.returncode == 1, proc.stdout[-3000:]
    doc = json.loads((out / "gpu-check.json").read_text())
    assert doc["ok"] is False
    assert doc["steps"]["gpu_tests"]["rc"] == 5 and doc["steps"]["bench_gpu"]["rc"] == 2
    log = (out / "gpu-check.log").read_text()
    assert "gpu-check: FAILED" in log and "== bench_gpu: exit 2" in log


def test_missing_prerequisites_are_named_in_the_log_and_the_json_and_exit_3(tmp_path):
    # this machine has no GPU: without --cpu the check names the missing CUDA device and runs nothing
    out = tmp_path / "no-gpu"
    proc = _run(out, timeout=120)
    pytest.importorskip("torch", reason="the check of a CUDA device needs torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert proc.returncode == 3, proc.stdout[-3000:]
    doc = json.loads((out / "gpu-check.json").read_text())
    assert doc["ok"] is False and any(m.startswith("a CUDA device for torch") for m in doc["missing"])
    assert doc["steps"]["gpu_tests"] == {"rc": None, "skipped": "prerequisites missing (see above)"}
    assert "MISSING: a CUDA device for torch" in (out / "gpu-check.log").read_text()
    # a Python with nothing installed (a bare venv): each missing package by name
    bare = tmp_path / "bare"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(bare)],
                   check=True)
    out = tmp_path / "bare-check"
    proc = _run(out, "--cpu", PYTHON=str(bare / "bin" / "python"), timeout=60)
    assert proc.returncode == 3, proc.stdout[-3000:]
    missing = json.loads((out / "gpu-check.json").read_text())["missing"]
    for dist in ("pydantic", "torch", "transformers", "ray", "pytest"):
        assert any(m.startswith(f"{dist} ") for m in missing), (dist, missing)
    assert "MISSING: ray (python module ray)" in (out / "gpu-check.log").read_text()
