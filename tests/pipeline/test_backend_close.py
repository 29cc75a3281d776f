"""A generation actor closes its backend (``Backend.close``) when it is done:
Ray Data drops the stage of an actor that exits at the end of its pipeline,
and the stage closes the backend it loaded. On a real local Ray (2 CPUs)."""

import gc
import time

import numpy as np
import pytest

from auditkit_ray.actors.generate import GenerateStage
from auditkit_ray.pipeline.plan import build_plan
from auditkit_ray.store.base import open_store

pytestmark = pytest.mark.usefixtures("ray_cluster")  # worker_info() asks Ray for the GPU ids


def _plan(make_spec):
    spec = make_spec(execution={"shard_size": 10})
    plan = build_plan(spec, open_store(spec.store))
    return plan, {plan.layout.run_fp: (spec.model_dump_json(by_alias=True), plan.store, plan.layout)}


def _cells(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        out[k] = np.empty(1, dtype=object)
        out[k][0] = v
    return out


def test_a_generation_stage_closes_its_backend_once_when_it_is_dropped(make_spec):
    plan, runs = _plan(make_spec)
    stage = GenerateStage(runs)
    stage(_cells(plan.row(0)))
    closed = []
    backend = stage.backend
    backend.close = lambda: closed.append(True)
    stage.close()
    stage.close()
    assert closed == [True] and stage.backend is None
    stage = GenerateStage(runs)
    stage(_cells(plan.row(1)))
    stage.backend.close = lambda: closed.append("dropped")
    del stage
    gc.collect()
    assert closed == [True, "dropped"]


def test_the_generation_actor_closes_its_backend_when_its_pipeline_ends(make_spec, tmp_path, ray_cluster):
    from closing_stage import MarkingGenerateStage
    from ray.data import ActorPoolStrategy

    plan, runs = _plan(make_spec)
    marks = tmp_path / "marks"
    marks.mkdir()
    ds = ray_cluster.data.from_items([plan.row(i) for i in plan.pending], override_num_blocks=len(plan.pending))
    ds = ds.map_batches(MarkingGenerateStage, fn_constructor_kwargs={"runs": runs, "marker_dir": str(marks)},
                        batch_size=1, batch_format="numpy", compute=ActorPoolStrategy(size=1), num_cpus=0)
    assert len(ds.take_all()) == len(plan.pending) == 4
    deadline = time.monotonic() + 60
    while not list(marks.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    closed = list(marks.iterdir())
    assert len(closed) == 1 and closed[0].read_text() == "SimulatedBackend"
