"""Processes of a Ray cluster started with `ray start` by a test, found by
its temp dir (only this cluster's: `ray stop` would stop every Ray on the
machine, other test sessions' too)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_pids(temp_dir: str) -> set[int]:
    """Processes whose command line names the cluster's temp dir."""
    pids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if temp_dir.encode() in (d / "cmdline").read_bytes():
                    pids.add(int(d.name))
            except OSError:
                continue
    return pids


def process_tree(roots: set[int]) -> set[int]:
    """The roots and every process under them."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    out: set[int] = set()
    todo = list(roots)
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += kids.get(p, [])
    return out


def signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_cluster(temp_dir: str) -> None:
    """SIGTERM, then SIGKILL, every process of the cluster and under it; remove its temp dir."""
    pids = process_tree(cluster_pids(temp_dir))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        signal_all(pids, sig)
        time.sleep(1)
    shutil.rmtree(temp_dir, ignore_errors=True)
