"""GPU memory comes back after each cell of a sweep, also after a cell that failed (issue 32).

A two-cell sweep of the ``hf`` backend, each cell asking for every GPU of the cluster so that the cells run one
after the other: one that finishes and one whose scoring worker breaks after the model is on the GPU and has
generated. The sweep calls its event listener between cells, before it starts the next, and there a fresh Ray
actor reads the device with ``torch.cuda.mem_get_info``: the free memory is back to what a fresh actor saw
before the sweep, and no generation actor of the cell is alive. In the dry mode (no CUDA) only the second
half can be read: the actor processes that would hold the device memory are gone."""

from __future__ import annotations

import pytest
from gpu_check_support import MEMORY_SLACK, generation_actor_pids, hf_model, run_doc, settled_device

from auditkit_ray import api

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu_cluster")]

MiB = 1024 * 1024


def test_device_memory_returns_to_its_baseline_after_each_sweep_cell_and_after_a_failed_one(
        gpu_mode, gpu_cluster, gpu_model, gpu_data, tmp_path):
    ray = gpu_cluster
    # before the sweep: actors of earlier tests gone, then what a fresh actor sees
    baseline = settled_device(ray, None)
    assert baseline["generation_actors_alive"] == [], "an earlier test's generation actors are still alive"
    if not gpu_mode.dry:
        assert baseline["free"] is not None, "a fresh actor holding a GPU saw no CUDA device"

    base = run_doc("mem", hf_model(gpu_mode, gpu_model, num_gpus=gpu_mode.gpus), gpu_data, tmp_path / "store")
    base["execution"].update({"cell_retries": 0, "max_shard_retries": 0})
    base["dataset"]["limit"] = 8  # two shards a cell: q005, where the broken cell breaks, is in the second
    del base["name"]
    doc = {"name": "gpu-memory", "base": base, "runs": [
        {"name": "done", "model": {**base["model"], "dtype": "bfloat16"}},
        {"name": "broken", "model": {**base["model"], "dtype": "float16"},
         "metrics": ["exact_match", "gpu_check_metrics:BreakOnSample"]},
    ]}
    after: dict[str, dict] = {}

    def between_cells(event: dict) -> None:
        if event["event"] in ("cell_done", "cell_failed"):
            seen = settled_device(ray, baseline)
            seen["event"] = event["event"]
            after[event["cell"]] = seen

    result = api.sweep(doc, on_event=between_cells)

    assert [r.name for r in result.runs] == ["done"]
    (failed,) = result.failed
    assert failed["runs"] == ["broken"] and "CellBreaker" in failed["reason"]
    assert sorted(s["event"] for s in after.values()) == ["cell_done", "cell_failed"], after
    for cell, seen in after.items():
        assert seen["generation_actors_alive"] == [], f"{cell} ({seen['event']}): generation actors still alive"
        if not gpu_mode.dry:
            lost = baseline["free"] - seen["free"]
            assert lost <= MEMORY_SLACK, (
                f"{cell} ({seen['event']}): {lost / MiB:.0f} MiB of device memory not given back "
                f"(free {seen['free'] / MiB:.0f} MiB, before the sweep {baseline['free'] / MiB:.0f} MiB)")
    assert generation_actor_pids() == []
