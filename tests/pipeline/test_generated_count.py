"""Perf.generated counts each sample this invocation generated once, also when the actor that generated a
shard was lost after storing it (its retry then reads the generations back from the store). The e2e case is
tests/pipeline/test_node_removal.py, where it depends on when the node dies; here the driver's tally is fed
the outcomes such a run yields, so each case happens every time."""

from types import SimpleNamespace

from auditkit_ray.pipeline.driver import credit_lost_generations
from auditkit_ray.store.layout import RunLayout


class _Store:
    def uri(self, rel: str = "") -> str:
        return f"/store/{rel}"


def _plan(run_fp: str, gen_fp: str = "g", cached: set[int] = frozenset()) -> SimpleNamespace:
    return SimpleNamespace(store=_Store(), layout=RunLayout(run_fp, gen_fp, 2), cached_generations=set(cached))


def _stats(generated: dict[int, int], read_back: dict[int, int]) -> dict:
    return {"generated": sum(generated.values()), "generated_shards": set(generated), "read_back": dict(read_back)}


def test_a_shard_stored_by_a_lost_actor_counts_once_as_generated():
    plan = _plan("r")
    # shard 3's actor stored it and died; the retry read it back
    stats = {"r": _stats({0: 2, 1: 2, 2: 2}, {3: 2})}
    credit_lost_generations([plan], stats)
    assert stats["r"]["generated"] == 8


def test_a_shard_stored_before_the_run_is_not_counted_as_generated():
    plan = _plan("r", cached={3})
    stats = {"r": _stats({0: 2, 1: 2, 2: 2}, {3: 2})}
    credit_lost_generations([plan], stats)
    assert stats["r"]["generated"] == 6


def test_runs_sharing_a_generation_cache_count_a_shard_once_between_them():
    # two cells of one model that differ only in metrics: one generated shard 0, the other read it back;
    # shard 1 was stored by a lost actor and read back by both: it counts once, for the first
    a, b = _plan("a"), _plan("b")
    stats = {"a": _stats({0: 2}, {1: 2}), "b": _stats({}, {0: 2, 1: 2})}
    credit_lost_generations([a, b], stats)
    assert (stats["a"]["generated"], stats["b"]["generated"]) == (4, 0)


def test_runs_with_their_own_generation_caches_are_counted_apart():
    a, b = _plan("a", gen_fp="ga"), _plan("b", gen_fp="gb")
    stats = {"a": _stats({0: 2}, {1: 2}), "b": _stats({1: 2}, {0: 2})}
    credit_lost_generations([a, b], stats)
    assert (stats["a"]["generated"], stats["b"]["generated"]) == (4, 4)
