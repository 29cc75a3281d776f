"""Instrumentation for the benchmarks, installed in Ray worker processes with
``runtime_env={"worker_process_setup_hook": "bench_hooks.count_generate_calls"}``
(``benchmarks/`` on ``PYTHONPATH``). Nothing in the package is changed on disk.

``count_generate_calls`` wraps ``SimulatedBackend.generate`` so that every
call appends a line ``start<TAB>pid<TAB>requests<TAB>first sample id`` when
it begins and one with ``end`` when it returns, to the file named by
``AUDITKIT_BENCH_CALLS`` (O_APPEND writes of one short line are atomic, so
several actors can share the file). A call begun but never ended was cut off
by an interruption: its work is lost.
"""

from __future__ import annotations

import os


def count_generate_calls() -> None:
    path = os.environ.get("AUDITKIT_BENCH_CALLS")
    if not path:
        return
    from auditkit_ray.backends.simulated import SimulatedBackend

    if getattr(SimulatedBackend.generate, "_bench_counted", False):
        return
    inner = SimulatedBackend.generate

    def log(event: str, requests) -> None:
        line = f"{event}\t{os.getpid()}\t{len(requests)}\t{requests[0].sample_id if requests else ''}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def generate(self, requests):
        log("start", requests)
        out = inner(self, requests)
        log("end", requests)
        return out

    generate._bench_counted = True  # type: ignore[attr-defined]
    SimulatedBackend.generate = generate  # type: ignore[method-assign]


def read_calls(path: str) -> list[tuple[str, int, int, str]]:
    """(event, pid, requests, first sample id) per line."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            event, pid, n, sid = line.rstrip("\n").split("\t")
            out.append((event, int(pid), int(n), sid))
    return out
