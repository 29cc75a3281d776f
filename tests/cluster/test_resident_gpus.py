"""Resident engines and GPUs (issue 50): idle residents hold the GPUs their actors asked for, and give them up,
least recently used first, when a new run's actors need them; a resident in use is never taken. On the pipeline
tests' local Ray with 4 logical GPUs."""

import pytest
from resident_engines import resident_list, residents

from auditkit_ray.api import evaluate

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")


def _model(output: str) -> dict:
    return {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": output, "num_gpus": 1.0}


def test_idle_residents_give_their_gpus_to_a_new_runs_actors_least_recently_used_first(make_spec, ray_cluster):
    with residents(True):
        first = evaluate(make_spec("all-gpus", model=_model("target"),
                                   execution={"shard_size": 2, "generation_actors": 4}))
        held = resident_list()
        assert len(held) == 4 and ray_cluster.available_resources().get("GPU", 0) == 0, held
        other = evaluate(make_spec("another-model", model=_model("prompt"),
                                   execution={"shard_size": 2, "generation_actors": 2}))
        after = resident_list()
        assert first.metrics["exact_match"].n == other.metrics["exact_match"].n == 40
        # two of the first model's idle actors made room for the second model's two; the other two stay loaded
        by_model = {}
        for r in after:
            by_model.setdefault(r["key"], []).append(r["name"])
        assert sorted(len(v) for v in by_model.values()) == [2, 2], after
        kept = {r["name"] for r in held} & {r["name"] for r in after}
        assert len(kept) == 2, (held, after)
    assert resident_list() == []


class _Holder:
    """A stand-in engine for the registry: it holds the GPUs it was started with and answers its calls."""

    def ready(self) -> bool:
        return True

    def rest(self) -> None:
        """Nothing to put to sleep."""

    def close(self) -> None:
        """Nothing to release before the registry kills it."""

    def memory(self) -> dict:
        return {}


def test_an_actor_waiting_for_gpus_that_idle_residents_took_after_make_room_gets_them(ray_cluster):
    """The race of two sweep cells: a command's ``make_room`` saw the GPUs free, another command's actors
    became idle residents on them a moment later, and the first command's actor waits for a place. The
    registry sees it waiting and evicts the idle residents it needs (and no more)."""
    import time

    from auditkit_ray.cluster import residents as registry
    from auditkit_ray.cluster.compat import actor_state

    ray = ray_cluster
    reg = registry.registry(ray)
    holder = ray.remote(_Holder)
    try:
        # the other command: two actors of 2 GPUs each, released to stay loaded (idle residents, every GPU)
        idle = [holder.options(num_gpus=2, num_cpus=0).remote() for _ in range(2)]
        ray.get([a.ready.remote() for a in idle])
        ray.get(reg.add.remote("other", "key-other", "other model", [(f"idle-{k}", a) for k, a in enumerate(idle)],
                               2.0))
        ray.get(reg.release.remote("other", True))
        assert ray.available_resources().get("GPU", 0) == 0
        # this command's actor, started after its make_room found nothing to do: Ray cannot place it
        ray.get(reg.acquire.remote("key-new", 1, "new", "test"))
        waiting = holder.options(num_gpus=1, num_cpus=0).remote()
        ray.get(reg.add.remote("new", "key-new", "new model", [("new-0", waiting)], 1.0))
        time.sleep(1.0)
        assert actor_state(waiting) == "PENDING_CREATION"
        assert ray.get(waiting.ready.remote(), timeout=60) is True  # placed once the registry made room
        names = [r["name"] for r in ray.get(reg.status.remote(False))["residents"]]
        assert sorted(names) == ["idle-1", "new-0"], names  # the least recently used idle one went, one only
        ray.get(reg.release.remote("new", True))
    finally:
        registry.evict(ray, None)


class _SlowStart(_Holder):
    """A stand-in engine whose creation takes seconds after Ray placed it (a model load, a slow host)."""

    def __init__(self, seconds: float) -> None:
        import time

        time.sleep(seconds)


def test_an_actor_placed_but_still_being_created_takes_no_idle_residents_gpus(ray_cluster):
    """A command's new actor that Ray has placed (its worker holds its GPUs) is ``PENDING_CREATION`` until its
    ``__init__`` returns. The registry does not take it for one waiting for GPUs: the idle residents on the
    other GPUs stay loaded. (On a loaded CI host such creations outlasted the registry's grace and evicted the
    residents a command had just left room for.)"""
    import time

    from auditkit_ray.cluster import residents as registry
    from auditkit_ray.cluster.compat import actor_state, waiting_for_place

    ray = ray_cluster
    reg = registry.registry(ray)
    try:
        idle = [ray.remote(_Holder).options(num_gpus=1, num_cpus=0).remote() for _ in range(2)]
        ray.get([a.ready.remote() for a in idle])
        ray.get(reg.add.remote("other", "key-other", "other model", [(f"idle-{k}", a) for k, a in enumerate(idle)],
                               1.0))
        ray.get(reg.release.remote("other", True))
        ray.get(reg.acquire.remote("key-new", 1, "new", "test"))
        slow = ray.remote(_SlowStart).options(num_gpus=2, num_cpus=0).remote(registry.PENDING_GRACE_S + 12)
        ray.get(reg.add.remote("new", "key-new", "new model", [("new-0", slow)], 2.0))
        deadline = time.monotonic() + 30
        while waiting_for_place(slow) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert actor_state(slow) == "PENDING_CREATION" and waiting_for_place(slow) is False
        # the registry looks every TICK_S; a look at the residents' memory waits up to 5 s on an actor being created
        time.sleep(registry.PENDING_GRACE_S + 7)
        names = sorted(r["name"] for r in ray.get(reg.status.remote(False))["residents"])
        assert names == ["idle-0", "idle-1", "new-0"], names
        assert ray.get(slow.ready.remote(), timeout=60) is True
        ray.get(reg.release.remote("new", True))
    finally:
        registry.evict(ray, None)
