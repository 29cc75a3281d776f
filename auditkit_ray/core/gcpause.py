"""Pause Python's cyclic garbage collector over bulk work.

A shard's payload is tens of thousands of small dicts and lists that live
until the shard is done. Each allocation-triggered collection walks all of
them, so per-sample work gets slower the bigger the shard (by more than half
on large RAG shards; see benchmarks/RESULTS.md). What a shard allocates is
freed by reference counting; the few cycles wait for the next collection
after the pause ends."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
