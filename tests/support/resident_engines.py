"""Resident engines in the tests: run a block with them on (``api.prefer_resident``) and leave no resident
behind it (a resident holds its logical GPUs and memory until evicted, and the next test's cluster is the
same one)."""

import contextlib

from auditkit_ray import api


@contextlib.contextmanager
def residents(on: bool = True):
    """This process's runs keep their generation actors loaded (``on``) for the block; every resident is
    evicted at its end."""
    api.prefer_resident(on)
    try:
        yield
    finally:
        api.prefer_resident(None)
        evict_all()


def evict_all() -> list:
    """Evict every resident engine of the cluster this process is connected to."""
    import ray

    from auditkit_ray.cluster import residents as registry

    if not ray.is_initialized():
        return []
    return registry.evict(ray, None)


def resident_list() -> list[dict]:
    """The registry's residents (model in words, uses, pid, ...); [] when there is none."""
    import ray

    from auditkit_ray.cluster import residents as registry

    st = registry.status(ray)
    return st["residents"] if st else []


def wait_loaded(timeout_s: float = 300) -> int:
    """Wait until every resident engine has its model loaded (a second ``warm()`` queues behind the first, which
    the run that started the engine called); returns how many there are."""
    import ray

    from auditkit_ray.cluster.residents import NAMESPACE

    handles = [ray.get_actor(r["name"], namespace=NAMESPACE) for r in resident_list()]
    ray.get([h.warm.remote() for h in handles], timeout=timeout_s)
    return len(handles)
