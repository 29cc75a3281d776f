"""A pipeline's progress figures: samples per second and the time left, from the shards this invocation finished.

What the figures promise (``ShardRate``):

- nothing before the first shard of this invocation is done: no rate and no ETA while Ray starts and the
  model loads (an estimate made of start-up alone would be a guess);
- the rate is the samples finished over the elapsed generation time: from the moment the first shard's
  generation began (its arrival less the generation time it reports; a shard that generated nothing, its
  outputs read from the cache, began no earlier than the pipeline) to now, so Ray's start, planning and
  the model load are not in it;
- a resumed run counts only this invocation's work: the stored shards it reuses add neither samples nor
  time;
- the ETA is the shards left, at the samples per shard seen so far, over that rate;
- a shard whose outputs were stored (a changed metric or target re-scores them) is counted as re-scored, not
  as generated: a run that generates nothing says so, and gives no generation rate or ETA.

The run's final summary reports throughput over the whole wall time (start-up included); the progress line
names its window ("in 3.1s of generation") so that the two figures are not mistaken for one another.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Callable


class ShardRate:
    """Samples per second and ETA over the shards finished since it was made (see the module's docstring)."""

    def __init__(self, total_shards: int, done_shards: int = 0, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.done, self.reused = total_shards, done_shards, done_shards
        self.samples = 0
        #: samples of shards whose stored outputs were scored again (no generation)
        self.rescored = 0
        self.clock = clock
        self.created = clock()
        #: when generation began, as the shards so far tell (None until the first one is done)
        self.began: float | None = None

    def add(self, n: int, busy_s: float = 0.0, generated: bool = True) -> None:
        """A shard of ``n`` samples is done; ``busy_s``: the time its generation took (0: none, or not known);
        ``generated``: False for a shard whose stored outputs were re-scored (it adds no samples to the rate)."""
        now = self.clock()
        self.done += 1
        if not generated:
            self.rescored += n
            return
        self.samples += n
        start = max(self.created, now - busy_s) if busy_s > 0 else self.created
        self.began = start if self.began is None else min(self.began, start)

    @property
    def elapsed_s(self) -> float | None:
        """Seconds of generation so far (None before the first shard of this invocation)."""
        return None if self.began is None else self.clock() - self.began

    @property
    def samples_per_s(self) -> float | None:
        elapsed = self.elapsed_s
        return self.samples / elapsed if elapsed and elapsed > 0 and self.samples else None

    @property
    def left_shards(self) -> int:
        return max(0, self.total - self.done)

    def eta_s(self) -> float | None:
        """Seconds left (0 when every shard is done; None before the first shard of this invocation)."""
        if not self.left_shards:
            return 0.0
        rate, finished = self.samples_per_s, self.done - self.reused
        if rate is None or finished <= 0:
            return None
        return self.left_shards * ((self.samples + self.rescored) / finished) / rate

    def figures(self) -> str:
        """``12 samples in 1.5s of generation, 8.0 samples/s, ETA 3s`` (the parts known so far), with
        ``8 stored outputs re-scored`` for shards that generated nothing."""
        elapsed, rate, eta = self.elapsed_s, self.samples_per_s, self.eta_s()
        parts = []
        if self.samples or not self.rescored:
            parts.append(f"{self.samples} samples" + (f" in {elapsed:.1f}s of generation" if elapsed is not None
                                                      else ""))
        if self.rescored:
            parts.append(f"{self.rescored} stored outputs re-scored" + ("" if self.samples else ", nothing generated"))
        if rate is not None:
            parts.append(f"{rate:.1f} samples/s")
        if eta:
            parts.append(f"ETA {eta:.0f}s")
        return ", ".join(parts)


class ShardProgress:
    """A run's progress lines on ``log``: a line per shard on a terminal; elsewhere (a log file, CI) one every
    ``every_s`` seconds and the last. Each gives the shards done and ``ShardRate``'s figures; a resumed run
    first says how many stored shards it reuses."""

    def __init__(self, name: str, total_shards: int, done_shards: int, enabled: bool, log: logging.Logger,
                 *, every_s: float = 10.0, rescoring: int = 0) -> None:
        self.name, self.enabled, self.log, self.every_s = name, enabled, log, every_s
        self.rate = ShardRate(total_shards, done_shards)
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        if enabled and done_shards:
            log.info("[%s] resuming: %d of %d shards are stored and reused", name, done_shards, total_shards)
        if enabled and rescoring:
            left = total_shards - done_shards
            log.info("[%s] re-scoring: %d of %d shards to do have their outputs stored%s", name, rescoring, left,
                     "; nothing to generate" if rescoring == left else "")

    @property
    def done(self) -> int:
        return self.rate.done

    @property
    def total(self) -> int:
        return self.rate.total

    def update(self, n: int, busy_s: float = 0.0, generated: bool = True) -> None:
        """A shard of ``n`` samples is done (``busy_s``: its generation time, ``ShardOutcome.generation_s``;
        ``generated``: False when its stored outputs were re-scored)."""
        self.rate.add(n, busy_s, generated)
        if not self.enabled:
            return
        now = time.monotonic()
        last = self.rate.done >= self.rate.total
        if not self.tty and not last and not self.rate.samples:
            return  # off a terminal the first line waits for a generated shard: it can give the rate and an ETA
        if self.tty or now - self.last > self.every_s or last:
            self.log.info("[%s] shards %d/%d: %s", self.name, self.rate.done, self.rate.total, self.rate.figures())
            self.last = now

