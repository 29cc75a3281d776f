"""The generation clock of a generation actor that works on several shards at once."""


def test_overlapping_shards_split_the_generation_clock_so_their_times_add_up_to_the_busy_time():
    import threading
    import time

    from auditkit_ray.actors.generate import _SharedClock

    clock, shares = _SharedClock(), []
    lock = threading.Lock()

    def shard(delay: float, hold: float) -> None:
        time.sleep(delay)
        t = clock.start()
        time.sleep(hold)
        s = clock.stop(t)
        with lock:
            shares.append(s)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=shard, args=(d, h)) for d, h in ((0.0, 0.4), (0.1, 0.4), (0.2, 0.1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    busy = time.perf_counter() - t0  # one busy stretch: 0.0 to ~0.5 s
    assert abs(sum(shares) - busy) < 0.05, (shares, busy)
    assert sum(shares) < 0.4 + 0.4 + 0.1 - 0.3  # not the sum of the overlapping wall times
