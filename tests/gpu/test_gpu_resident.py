"""A resident engine on a GPU (issue 50): the ``hf`` backend loaded and warmed up by one run (one short generate
at load, so its first shard carries no CUDA warm-up) serves the next run of the same model with the same
per-sample outputs as a fresh engine; evicted, it gives its device memory back. In the dry mode of
``scripts/gpu-check.sh --cpu`` the same runs go through Ray's logical GPUs with the model on the CPU."""

from __future__ import annotations

import pytest
from gpu_check_support import hf_model, run_doc, settled_device, workers_of
from resident_engines import resident_list, residents

from auditkit_ray.api import evaluate, samples_table

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu_cluster")]


def _rows(result):
    return [(x["sample_id"], x["text"], x["completion_tokens"]) for x in samples_table(result).to_pylist()]


def test_a_resident_engine_on_a_gpu_is_warmed_serves_the_next_run_and_gives_a_fresh_engines_outputs(
        gpu_mode, gpu_cluster, gpu_model, gpu_data, tmp_path):
    model = hf_model(gpu_mode, gpu_model, dtype="bfloat16", num_gpus=1)
    baseline = settled_device(gpu_cluster, None)
    with residents(False):
        fresh = evaluate(run_doc("fresh", model, gpu_data, tmp_path / "fresh"))
    with residents(True):
        first = evaluate(run_doc("first", model, gpu_data, tmp_path / "first"))
        loaded = resident_list()
        second = evaluate(run_doc("second", model, gpu_data, tmp_path / "second"))
        served = resident_list()
    assert len(loaded) == 1 and [r["pid"] for r in served] == [loaded[0]["pid"]] and served[0]["uses"] == 2
    assert {w["pid"] for w in workers_of(second)} == {loaded[0]["pid"]}  # the same process generated both
    assert _rows(first) == _rows(second) == _rows(fresh)
    if not gpu_mode.dry:
        # warmed at load: the framework holds device memory before the next run asks anything of it
        assert loaded[0]["gpu_bytes"] and loaded[0]["gpu_bytes"] > 0, loaded
    # evicted (the block's end): no generation actor left, the device memory back
    after = settled_device(gpu_cluster, baseline)
    assert after["generation_actors_alive"] == [], after
