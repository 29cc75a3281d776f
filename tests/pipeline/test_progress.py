"""``pipeline.progress.ShardRate`` on a clock the test sets: no figure before this invocation's first shard,
the rate over the time since generation began (start-up left out), a resumed run's stored shards adding
nothing, and the ETA the shards left at that rate."""

from __future__ import annotations

import pytest

from auditkit_ray.pipeline.progress import ShardRate


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nothing_is_estimated_before_the_first_shard_is_done():
    clock = Clock()
    rate = ShardRate(10, clock=clock)
    clock.now += 30  # Ray starts, the model loads
    assert rate.samples_per_s is None and rate.eta_s() is None and rate.elapsed_s is None
    assert rate.figures() == "0 samples"


def test_the_rate_counts_from_when_generation_began_not_from_the_start_up():
    clock = Clock()
    rate = ShardRate(10, clock=clock)
    clock.now += 30  # start-up
    clock.now += 2  # the first shard's generation
    rate.add(4, busy_s=2.0)
    assert rate.elapsed_s == pytest.approx(2.0) and rate.samples_per_s == pytest.approx(2.0)
    assert rate.eta_s() == pytest.approx(9 * 4 / 2.0)
    clock.now += 2
    rate.add(4, busy_s=2.0)
    assert rate.samples_per_s == pytest.approx(8 / 4.0) and rate.eta_s() == pytest.approx(8 * 4 / 2.0)
    assert rate.figures() == "8 samples in 4.0s of generation, 2.0 samples/s, ETA 16s"


def test_shards_done_side_by_side_count_once_in_the_window():
    clock = Clock()
    rate = ShardRate(8, clock=clock)
    clock.now += 5
    for _ in range(4):  # four actors finish their first shard of 3 s together
        rate.add(2, busy_s=3.0)
    assert rate.samples_per_s == pytest.approx(8 / 3.0)


def test_a_resumed_run_counts_only_the_shards_it_does_now():
    clock = Clock()
    rate = ShardRate(10, done_shards=6, clock=clock)
    clock.now += 1
    rate.add(5, busy_s=1.0)
    assert rate.samples == 5 and rate.done == 7 and rate.samples_per_s == pytest.approx(5.0)
    assert rate.eta_s() == pytest.approx(3 * 5 / 5.0)


def test_cached_outputs_count_from_the_pipeline_s_start_and_the_last_shard_leaves_no_eta():
    clock = Clock()
    rate = ShardRate(2, clock=clock)
    clock.now += 1
    rate.add(3)  # outputs read from the cache: no generation time reported
    assert rate.elapsed_s == pytest.approx(1.0) and rate.samples_per_s == pytest.approx(3.0)
    clock.now += 1
    rate.add(3)
    assert rate.eta_s() == 0.0 and "ETA" not in rate.figures()
