"""A generator closes its backend (``Backend.close``) once, when its host is done with it (or drops it); the
generation actor's ``close``, which its pool calls at the end of a run, closes it in the actor. On a real local
Ray (2 CPUs)."""

import gc

import numpy as np
import pytest

from auditkit_ray.actors.generate import Generator
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


def test_a_generator_closes_its_backend_once_when_it_is_dropped(make_spec):
    plan, runs = _plan(make_spec)
    stage = Generator(runs)
    stage(_cells(plan.row(0)))
    closed = []
    backend = stage.backend
    backend.close = lambda: closed.append(True)
    stage.close()
    stage.close()
    assert closed == [True] and stage.backend is None
    stage = Generator(runs)
    stage(_cells(plan.row(1)))
    stage.backend.close = lambda: closed.append("dropped")
    del stage
    gc.collect()
    assert closed == [True, "dropped"]


def test_the_generation_actor_closes_its_backend_when_its_pool_is_done(make_spec, tmp_path, ray_cluster):
    from closing_stage import MarkingGenerationActor

    plan, runs = _plan(make_spec)
    marks = tmp_path / "marks"
    marks.mkdir()
    actor = ray_cluster.remote(MarkingGenerationActor).options(num_cpus=0).remote(
        plan.spec.model_dump_json(by_alias=True), str(marks))
    for i in plan.pending:
        ray_cluster.get(actor.run_batch.remote(_cells(plan.row(i)), runs))
    assert not list(marks.iterdir())  # loaded, used, not closed while the run lasts
    ray_cluster.get(actor.close.remote())  # what GenerationPool.close asks of each actor
    closed = list(marks.iterdir())
    assert len(closed) == 1 and closed[0].read_text() == "SimulatedBackend"
    ray_cluster.kill(actor)
