"""A generation actor with several shards in flight (threads of one actor),
driven in-process: which backend calls may overlap."""

import threading
import time

import numpy as np
import pytest

from auditkit_ray.actors.generate import Generator
from auditkit_ray.backends.base import create_backend
from auditkit_ray.pipeline.plan import build_plan
from auditkit_ray.store.base import open_store

pytestmark = pytest.mark.usefixtures("ray_cluster")  # worker_info() asks Ray for the GPU ids


def _run_shards_in_threads(make_spec, thread_safe: bool) -> list[tuple[float, float]]:
    spec = make_spec(execution={"shard_size": 5, "generation_shards_in_flight": 4})
    plan = build_plan(spec, open_store(spec.store))
    stage = Generator({plan.layout.run_fp: (spec.model_dump_json(by_alias=True), plan.store, plan.layout)})
    backend = create_backend(spec.model, spec.generation, spec.seed)
    backend.load()
    backend.thread_safe = thread_safe
    calls, lock, inner = [], threading.Lock(), backend.run

    def run(requests):
        t0 = time.perf_counter()
        time.sleep(0.2)
        out = inner(requests)
        with lock:
            calls.append((t0, time.perf_counter()))
        return out

    backend.run = run
    stage.backend = backend
    rows = [plan.row(i) for i in sorted(plan.shard_payloads)][:4]
    threads = [threading.Thread(target=stage, args=({k: _cell(v) for k, v in row.items()},)) for row in rows]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(calls) == 4
    return sorted(calls)


def _cell(value: bytes) -> np.ndarray:
    arr = np.empty(1, dtype=object)
    arr[0] = value
    return arr


def _overlaps(calls: list[tuple[float, float]]) -> int:
    return sum(1 for (_, end), (start, _) in zip(calls, calls[1:]) if start < end)


def test_a_backend_that_is_not_thread_safe_gets_one_call_at_a_time_with_shards_in_flight(make_spec):
    assert _overlaps(_run_shards_in_threads(make_spec, thread_safe=False)) == 0


def test_a_thread_safe_backends_calls_overlap_with_shards_in_flight(make_spec):
    # the contrast that shows the check above can see an overlap
    assert _overlaps(_run_shards_in_threads(make_spec, thread_safe=True)) >= 1


def _stage_and_rows(make_spec, **model):
    spec = make_spec(model={"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target", **model},
                     execution={"shard_size": 20})
    plan = build_plan(spec, open_store(spec.store))
    stage = Generator({plan.layout.run_fp: (spec.model_dump_json(by_alias=True), plan.store, plan.layout)})
    return stage, [{k: _cell(v) for k, v in plan.row(i).items()} for i in sorted(plan.shard_payloads)]


def test_the_generation_actor_loads_its_model_while_the_pipeline_starts(make_spec):
    # a backend that can load in another thread starts loading in the actor's constructor, so the
    # load overlaps the start of the other actors and the first shard's journey to this one
    t0 = time.perf_counter()
    stage, rows = _stage_and_rows(make_spec, load_s=1.5)
    built = time.perf_counter() - t0
    assert built < 1.0, f"the constructor waited for the load ({built:.2f} s)"
    time.sleep(1.6)  # the rest of the pipeline starting
    t1 = time.perf_counter()
    stage(rows[0])
    first = time.perf_counter() - t1
    assert first < 1.0, f"the first shard waited {first:.2f} s for a load that should be done"
    assert stage.backend is not None and stage._preload is None


def test_a_model_load_that_fails_in_the_background_is_tried_once_more_then_fails_the_run(make_spec, monkeypatch):
    from auditkit_ray.backends import simulated
    from auditkit_ray.errors import ModelLoadError

    calls = []

    def load(self):
        calls.append(threading.current_thread().name)
        if len(calls) in (1, 3, 4):
            raise OSError("disk hiccup")

    monkeypatch.setattr(simulated.SimulatedBackend, "load", load)
    stage, rows = _stage_and_rows(make_spec)
    stage(rows[0])  # the background load failed once: the first shard loads again, in the calling thread
    assert calls == ["auditkit-model-load", threading.current_thread().name]
    assert stage.backend is not None
    # a load that fails twice fails the run (a ModelLoadError), never the shard's samples one by one
    again, rows = _stage_and_rows(make_spec)
    with pytest.raises(ModelLoadError, match="model load failed: OSError: disk hiccup"):
        again(rows[1])  # shard 0 is in the generation cache now
    assert len(calls) == 4
