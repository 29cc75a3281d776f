"""The generation stage's dispatch (``actors.forward.ToGenerationActors``) over real Ray actors: shards that
arrive one at a time, each finished before the next comes, spread over every generation actor that is up
instead of all going to the first (the GPU check's two-actor runs rely on it), an actor that dies with a
shard hands it to another, and actors killed while still being created (``cluster.compat.kill_actors``) give
back their GPUs."""

from __future__ import annotations

import os

import pytest

from auditkit_ray.actors.forward import ToGenerationActors

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")


class _Generator:
    """Stands in for a generation actor: answers the probe and returns which process took the shard."""

    def __init__(self, fail_first: bool = False) -> None:
        self.fail_first = fail_first

    def ready(self) -> dict:
        return {"pid": os.getpid()}

    def run_batch(self, batch, runs, driver=None) -> dict:
        if self.fail_first:
            os._exit(1)  # the process dies with its shard
        return {"pid": [os.getpid()], "shard": list(batch["shard"])}


def _actors(ray, n: int, **kw):
    cls = ray.remote(num_cpus=0)(_Generator)
    actors = [cls.remote(**kw) for _ in range(n)]
    return actors, ray.get([a.ready.remote() for a in actors])


def test_shards_one_at_a_time_spread_over_every_actor_up(ray_cluster):
    actors, probes = _actors(ray_cluster, 2)
    stage = ToGenerationActors(actors, runs={})
    took = [stage({"shard": [k]})["pid"][0] for k in range(6)]
    assert sorted(took) == sorted([p["pid"] for p in probes] * 3), took
    assert took[0] != took[1], f"the second shard went to the actor that had the first: {took}"
    for a in actors:
        ray_cluster.kill(a)


def test_a_shard_whose_actor_dies_goes_to_another(ray_cluster):
    doomed, _ = _actors(ray_cluster, 1, fail_first=True)
    alive, probes = _actors(ray_cluster, 1)
    stage = ToGenerationActors(doomed + alive, runs={})
    outs = [stage({"shard": [k]}) for k in range(3)]
    assert [o["shard"] for o in outs] == [[0], [1], [2]]
    assert {o["pid"][0] for o in outs} == {probes[0]["pid"]}
    for a in doomed + alive:
        ray_cluster.kill(a)


class _Light:
    """A GPU actor whose ``__init__`` loads nothing, like a generation actor's."""

    def ready(self) -> int:
        return os.getpid()


def test_actors_killed_while_being_created_give_back_their_gpus(ray_cluster):
    # Ray 2.60 loses the GPU of an actor killed the moment its worker is leased (a run failing on bad input a
    # few milliseconds after starting its generation actors: seen once in a full suite); killed through
    # kill_actors, none is lost. The delays aim at that moment, which is rare, so this loop catches a
    # regression only sometimes (it did once in CI, when kill_actors waited for PENDING_CREATION only: a third
    # of these actors are still DEPENDENCIES_UNREADY when killed), and a GPU lost here fails it.
    import time

    from auditkit_ray.cluster.compat import kill_actors

    cls = ray_cluster.remote(num_cpus=0, num_gpus=1)(_Light)
    total = ray_cluster.cluster_resources()["GPU"]
    for i in range(20):
        actors = [cls.options(max_restarts=-1, max_task_retries=0).remote() for _ in range(2)]
        time.sleep((0.0, 0.001, 0.002, 0.003, 0.005)[i % 5])
        kill_actors(ray_cluster, actors)
        del actors
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and ray_cluster.available_resources().get("GPU", 0) < total:
        time.sleep(0.1)
    assert ray_cluster.available_resources().get("GPU", 0) == total, ray_cluster.available_resources()


class _Marked:
    """A GPU actor whose ``__init__`` leaves a mark: its creation got as far as its worker."""

    def __init__(self, mark: str, _arg: int) -> None:
        with open(mark, "w") as f:
            f.write(str(os.getpid()))


def _later(s: float) -> int:
    import time

    time.sleep(s)
    return 1


def test_an_actor_still_waiting_for_its_arguments_is_created_before_it_is_killed(ray_cluster, tmp_path):
    # Ray's DEPENDENCIES_UNREADY comes before PENDING_CREATION: such an actor gets its worker a moment later,
    # the moment at which a kill loses its GPU, so kill_actors waits for it as for one being placed
    import time

    from auditkit_ray.cluster.compat import actor_state, kill_actors

    mark = tmp_path / "created"
    arg = ray_cluster.remote(num_cpus=0)(_later).remote(1.0)
    actor = ray_cluster.remote(num_cpus=0, num_gpus=1)(_Marked).remote(str(mark), arg)
    deadline = time.monotonic() + 5
    while actor_state(actor) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert actor_state(actor) == "DEPENDENCIES_UNREADY"
    kill_actors(ray_cluster, [actor])
    assert mark.exists(), "the actor was killed before its worker had created it"
    total = ray_cluster.cluster_resources()["GPU"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and ray_cluster.available_resources().get("GPU", 0) < total:
        time.sleep(0.1)
    assert ray_cluster.available_resources().get("GPU", 0) == total, ray_cluster.available_resources()


class _Slow:
    def ready(self) -> int:
        return os.getpid()

    def run_batch(self, batch, runs, driver=None) -> dict:
        import time

        time.sleep(60)
        return {"shard": list(batch["shard"])}


def test_a_driver_that_stops_waiting_gets_its_thread_back_while_the_shard_runs_on(ray_cluster):
    # the direct pipeline, interrupted, sets the stage's stop event: its threads must leave their Ray calls
    # before the process exits, though the shard they wait for takes a minute
    import threading
    import time

    from auditkit_ray.actors.forward import WATCH_S, Stopped

    actor = ray_cluster.remote(num_cpus=0)(_Slow).remote()
    ray_cluster.get(actor.ready.remote())
    stop = threading.Event()
    stage = ToGenerationActors([actor], runs={}, stop=stop)
    raised = []

    def call():
        try:
            stage({"shard": [0]})
        except BaseException as exc:  # noqa: BLE001 - looked at below
            raised.append(exc)

    t = threading.Thread(target=call)
    t.start()
    time.sleep(2 * WATCH_S)
    assert t.is_alive(), raised  # waiting for the slow shard
    stop.set()
    t.join(10 * WATCH_S)
    assert not t.is_alive(), "the call still waits for its shard after the stop"
    assert len(raised) == 1 and isinstance(raised[0], Stopped), raised
    ray_cluster.kill(actor)
