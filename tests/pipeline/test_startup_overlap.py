"""The start-up path: the generation actors are the driver's own, created as soon as Ray is up, and load
their model while the driver still reads the dataset; a resident engine (kept loaded by an earlier run)
gives the same outputs, sample for sample, as a fresh one, on every backend that runs in a generation actor."""

import threading
import time

import pytest

from auditkit_ray.api import evaluate
from auditkit_ray.pipeline import genpool, plan

pytestmark = pytest.mark.usefixtures("ray_cluster")

#: the planted read lasts until the generation actor reports its model loaded, or this long: on a loaded host
#: the actor's process start can take longer than any fixed delay, and an actor started after the plan (the
#: path before) never loads during the read at all
READ_MAX_S = 120.0


@pytest.fixture
def load_windows(monkeypatch):
    """The generation actors' own record of their model load (wall clock), read from each actor just before
    the pipeline stops it."""
    seen: list[dict] = []
    close = genpool.GenerationPool.close

    def recording_close(self):
        if self.actors:
            seen.extend(self.load_windows())
        close(self)

    monkeypatch.setattr(genpool.GenerationPool, "close", recording_close)
    return seen


def _loaded(pools: list) -> bool:
    """Whether the first generation actor of the first pool has finished loading its model (its ``ready()``)."""
    import ray

    if not pools or not pools[0].actors:
        return False
    return ray.get(pools[0].actors[0].ready.remote(), timeout=READ_MAX_S)["load_ended_at"] is not None


def test_the_generation_actor_loads_its_model_while_a_slow_dataset_is_read(make_spec, monkeypatch, load_windows):
    read: dict[str, float] = {}
    pools: list = []
    load_samples, init = plan.load_samples, genpool.GenerationPool.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        pools.append(self)

    def slow_load_samples(*args, **kwargs):  # a dataset on a slow disk or a far bucket
        read.setdefault("start", time.time())
        deadline = time.monotonic() + READ_MAX_S
        while not _loaded(pools) and time.monotonic() < deadline:
            time.sleep(0.2)
        try:
            return load_samples(*args, **kwargs)
        finally:
            read["end"] = time.time()

    monkeypatch.setattr(genpool.GenerationPool, "__init__", recording_init)
    monkeypatch.setattr(plan, "load_samples", slow_load_samples)
    model = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target", "load_s": 2.0}
    res = evaluate(make_spec("slow-read", model=model, execution={"shard_size": 8, "generation_actors": 1}))
    assert res.metrics["exact_match"].mean == 1.0 and res.metrics["exact_match"].n == 40
    assert len(load_windows) == 1, load_windows
    w = load_windows[0]
    assert w["load_started_at"] is not None and w["load_ended_at"] is not None, w
    # the two intervals overlap: the load began before the read ended, and ended after the read began
    assert w["load_started_at"] < read["end"] and read["start"] < w["load_ended_at"], (w, read)
    assert w["load_ended_at"] <= read["end"], (
        f"the 2 s load should finish while the dataset is read (at most {READ_MAX_S:g} s), not after it: {w}, {read}")


def test_a_run_whose_outputs_are_all_stored_loads_no_model(make_spec, load_windows):
    model = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target", "load_s": 0.0}
    first = evaluate(make_spec("stored", model=model, execution={"shard_size": 8}))
    again = evaluate(make_spec("stored", model=model, execution={"shard_size": 8}, metrics=["exact_match"]))
    assert again.perf.generated == 0 and first.perf.generated == 40
    # the actor started before the plan knew: it was stopped unused, without a shard
    assert all(w["load_ended_at"] is None or w["load_started_at"] is not None for w in load_windows)


def _fresh_and_resident(make_spec, rows, name: str, **over):
    """(rows of a fresh engine's run, rows of a resident engine's run, their results): the fresh one on actors
    started for it and stopped after it; the resident one on the engine an earlier run of the same model (in a
    store of its own) left loaded."""
    from resident_engines import resident_list, residents

    with residents(False):
        fresh = evaluate(make_spec(f"{name}-fresh", **over))
    with residents(True):
        evaluate(make_spec(f"{name}-loads", **over))
        loaded = {r["name"] for r in resident_list()}
        again = evaluate(make_spec(f"{name}-resident", **over))
        served = resident_list()
    assert loaded and {r["name"] for r in served} == loaded, (loaded, served)  # the same actors, not new ones
    assert all(r["uses"] >= 2 for r in served), served
    return rows(fresh), rows(again), fresh, again


def test_a_resident_engines_outputs_are_bit_identical_to_a_fresh_ones_with_simulated(make_spec, rows):
    model = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target", "fail_ids": ["q007"]}
    a, b, before, after = _fresh_and_resident(make_spec, rows, "sim", model=model,
                                              execution={"shard_size": 4, "generation_actors": 2})
    assert a == b and len(a) == 40
    assert before.fingerprint == after.fingerprint


def test_a_resident_engines_outputs_are_bit_identical_to_a_fresh_ones_with_hf(make_spec, rows, tiny_model):
    over = dict(model={"type": "hf", "path": str(tiny_model), "batch_size": 4}, generation={"max_new_tokens": 5},
                execution={"shard_size": 8, "generation_actors": 1})
    a, b, before, after = _fresh_and_resident(make_spec, rows, "hf", **over)
    assert a == b and len(a) == 40
    assert before.perf.generated == after.perf.generated == 40


def test_a_resident_engines_outputs_are_bit_identical_to_a_fresh_ones_with_api(make_spec, rows, tmp_path):
    pytest.importorskip("aiohttp", reason="the api backend needs the 'api' extra (aiohttp)")
    from auditkit_ray.testing import OpenAIServer, ScriptedPolicy

    def tail(body: dict) -> str:
        return body["messages"][-1]["content"][-12:]

    with OpenAIServer(ScriptedPolicy(tail), api_key="sk-startup-test") as server:
        model = {"type": "api", "base_url": server.base_url, "model": "scripted", "api_key": "sk-startup-test",
                 "backoff_s": 0.01}
        a, b, _, _ = _fresh_and_resident(make_spec, rows, "api", model=model, execution={"shard_size": 8})
    assert a == b and len(a) == 40 and all(r[2] for r in a)


def test_an_abort_stops_the_drivers_own_generation_actors(make_spec, ray_cluster):
    """A sweep's abort (``PipelineHandle.abort``) kills the pre-started actors at once, GPUs freed."""
    from auditkit_ray.pipeline.driver import run_pipeline
    from auditkit_ray.pipeline.plan import build_plans

    model = {"type": "simulated", "fixed_cost_s": 0.5, "per_token_s": 0.0, "output": "target"}
    spec = make_spec("aborted", model=model, execution={"shard_size": 2, "generation_actors": 2})
    plans = build_plans([spec])
    handles = []

    def abort_soon(handle):
        handles.append(handle)
        threading.Timer(3.0, handle.abort, args=(RuntimeError("cell over its budget"),)).start()

    with pytest.raises(RuntimeError, match="over its budget"):
        run_pipeline(plans, None, False, on_start=abort_soon)
    deadline = time.time() + 30
    while time.time() < deadline and ray_cluster.available_resources().get("GPU", 0) < 4:
        time.sleep(0.2)
    assert ray_cluster.available_resources().get("GPU", 0) == 4
