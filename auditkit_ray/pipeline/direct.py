"""The direct pipeline: a small run's shards go straight from the driver to the generation actors and are
scored in the driver, without Ray Data.

A Ray Data pipeline starts processes of its own for every run (its forwarding actor, each scoring pool's
actors, its helper actors) and the driver imports Ray Data (about a second on two cores); for a run of a few
hundred samples on a model that is already loaded (``cluster.residents``) that is most of the wall time. Here
the driver keeps the same stages and the same code: the forwarding stage (``actors.forward``, with its handling
of lost actors) runs in the driver's threads, each shard's outputs come back to it, and the scoring stage
(``actors.score``, the one that writes the run shard and tallies it) runs in the driver, one shard at a time.
The outputs, the stored shards and the merged result are those of the Ray Data pipeline to the last bit.

Used (``eligible``) for a run of at most ``DIRECT_MAX_SAMPLES`` pending samples whose metrics all score in the
deterministic checks pool, without retrieval, outside a sweep; ``execution.direct`` forces either way."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Iterator

from ..actors.context import DriverContext
from .plan import Plan

#: the largest run (pending samples) the driver scores by itself when ``execution.direct`` is not set
DIRECT_MAX_SAMPLES = 20_000
#: how long an interrupted or failed run waits for its threads to leave their Ray calls (each leaves within the
#: forwarding stage's WATCH_S; a shard being scored is finished first)
JOIN_S = 30.0


def eligible(plans: list[Plan], pending: list[tuple[Plan, int]], *, in_sweep: bool) -> bool:
    """Whether these runs take the direct pipeline (see the module's docstring)."""
    from ..actors.score import pools_needed

    chosen = {p.spec.execution.direct for p in plans}
    if chosen == {False}:
        return False
    if any(p.spec.retrieval is not None for p in plans) or pools_needed([p.spec for p in plans]) != ["checks"]:
        return False
    if chosen == {True}:
        return True
    n = sum(min(p.n_requests, p.layout.shard_size * sum(1 for q, _ in pending if q is p)) for p in plans)
    return not in_sweep and n <= DIRECT_MAX_SAMPLES


def outcomes(plans: list[Plan], pending: list[tuple[Plan, int]], runs: dict, generation: str, pool: Any,
             driver: DriverContext | None, handle: Any) -> Iterator[Any]:
    """Each pending shard's ``ShardOutcome`` as it is done (in the order they finish). Generation runs in the
    pool's actors, ``2 * shards in flight`` calls per actor at once; scoring in this process, one shard at a
    time. The first error stops the run: raised here, the shards still running are left to finish in the
    actors (their outputs are stored; the run's shards are not)."""
    from ..actors.forward import ToGenerationActors
    from ..actors.score import ScoreStage
    from ..actors.shard import read_outcome, row_batch

    scorer = ScoreStage(runs, pool="checks", final=True, first=True, generation=generation)
    stop = threading.Event()
    forward = (ToGenerationActors(pool.actors, runs, driver, per_actor=2 * pool.k, stop=stop)
               if pool is not None else None)
    width = len(pool.actors) * 2 * pool.k if pool is not None else 1
    todo: queue.Queue = queue.Queue()
    for p, i in pending:
        todo.put(row_batch(p.row(i)))
    for p in plans:
        p.shard_payloads.clear()  # each row is in the queue now
    done: queue.Queue = queue.Queue()
    score_lock = threading.Lock()

    def work() -> None:
        while not stop.is_set():
            try:
                batch = todo.get_nowait()
            except queue.Empty:
                return
            try:
                if forward is not None:
                    batch = forward(batch)
                with score_lock:
                    out = scorer(batch)
                done.put(read_outcome(out["payload"][0]))
            except BaseException as exc:  # noqa: BLE001 - handed to the driver's thread, which raises it
                done.put(exc)
                return

    n = len(pending)
    threads = [threading.Thread(target=work, name=f"auditkit-direct-{k}", daemon=True)
               for k in range(min(width, n))]
    for t in threads:
        t.start()
    try:
        for _ in range(n):
            item = _next(done, handle)
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        # a thread still in a Ray call when the process exits and Ray shuts down under it can crash the process
        # (SIGSEGV; ray-project/ray#31145): each one gives up its wait within WATCH_S, and a shard it is scoring
        # is finished and stored first
        ends = time.monotonic() + JOIN_S
        for t in threads:
            t.join(max(0.0, ends - time.monotonic()))


def _next(done: queue.Queue, handle: Any) -> Any:
    """The next finished shard; an abort (``handle.abort``) ends the wait with its reason."""
    while True:
        if handle.aborted is not None:
            raise handle.aborted
        try:
            return done.get(timeout=0.2)
        except queue.Empty:
            continue
