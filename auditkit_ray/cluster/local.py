"""A local Ray cluster this process starts and owns: started quickly (``compat.quick_local_start``), stopped
at this process's exit, and reaped when the process is killed (a process of its own that outlives it and kills
what carries its mark)."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
from typing import Any, Iterator

from . import compat

log = logging.getLogger(__name__)


def worker_env() -> dict[str, str]:
    """What the workers of a cluster this process starts (or joins at an address) need of its environment: user
    code imports relative to its working directory."""
    cwd = os.getcwd()
    pythonpath = os.pathsep.join(p for p in [cwd, os.environ.get("PYTHONPATH", "")] if p)
    return {"PYTHONPATH": pythonpath, "AUDITKIT_RAY_WORKDIR": cwd}


def log_to_driver() -> bool:
    """Whether workers' output is forwarded to the driver (``AUDITKIT_RAY_LOG_TO_DRIVER=1``)."""
    return os.environ.get("AUDITKIT_RAY_LOG_TO_DRIVER", "0") == "1"


def int_or_float(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


def start_local(num_cpus: Any, num_gpus: Any, log_to_driver: bool, env: dict[str, str] | None = None) -> Any:
    """A fresh local cluster owned by this process (stopped at its exit, and by the reaper if it is killed)."""
    import ray

    # address="local": always a fresh in-process cluster, never a stray one that `ray start` left on
    # this machine. Its processes inherit this one's environment, so its workers get worker_env from
    # there rather than from a job runtime_env: Ray starts every worker of a job that has one through
    # an extra setup process, which costs most of a second per start.
    # quick_local_start: Ray's head node without the processes no one would use and without its
    # one-second waits for the raylet (ray_compat)
    # every process of the local cluster inherits this mark (Ray's agents rename themselves, so their
    # command line does not say whose they are): the reaper finds them by it
    mark = f"{os.getpid()}:{os.urandom(6).hex()}"
    with (environ({**(worker_env() if env is None else env), REAPER_MARK: mark}),
          compat.dropped(compat.TOKEN_AUTH_LOGGER, compat.TOKEN_AUTH_ENABLED),
          compat.quick_local_start(log_to_driver)):
        ray.init(address="local", num_cpus=int_or_float(num_cpus), num_gpus=num_gpus, include_dashboard=False,
                 logging_level=logging.WARNING, log_to_driver=log_to_driver)
    atexit.register(release_local_cluster)  # runs before Ray's own exit hook (atexit is last in, first out)
    start_reaper(mark)
    _MARKS.append(mark)
    return ray


_MARKS: list[str] = []


def current_mark() -> str | None:
    """The mark the processes of the local cluster this process started carry (``REAPER_MARK``), if it did."""
    return _MARKS[-1] if _MARKS else None


#: the environment variable that marks the processes of the local cluster this driver started
REAPER_MARK = "AUDITKIT_RAY_DRIVER"

#: runs in a process of its own: waits for the driver's end of its stdin to close (the driver exited, however
#: it died), then kills what is left of the local cluster the driver started: the processes carrying its mark
_REAPER = r"""
import os, signal, sys, time
mark, me = b"\0" + sys.argv[1].encode() + b"\0", os.getpid()
signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.stdin.buffer.read()
time.sleep(0.5)
found, parents = set(), {}
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == me:
        continue
    try:
        with open(f"/proc/{pid}/stat") as f:
            parents[int(pid)] = int(f.read().rsplit(")", 1)[-1].split()[1])
        with open(f"/proc/{pid}/environ", "rb") as f:
            if mark in b"\0" + f.read() + b"\0":
                found.add(int(pid))
    except (OSError, ValueError, IndexError):
        continue
more = True
while more:  # and their descendants: Ray's agents retitle themselves over their environment's start
    more = {p for p, pp in parents.items() if pp in found and p not in found}
    found |= more
for pid in found:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""


def marked(mark: str) -> list[int]:
    """The processes of a local cluster: those that carry ``mark`` in their environment (``REAPER_MARK``), and
    their descendants (Ray's agents retitle themselves over the start of their environment). Linux."""
    needle = f"\0{REAPER_MARK}={mark}\0".encode()
    found, parents = set(), {}
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                parents[int(pid)] = int(f.read().rsplit(")", 1)[-1].split()[1])
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in b"\0" + f.read() + b"\0":
                    found.add(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    grew = True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in found and pid not in found}
        found |= more
        grew = bool(more)
    return sorted(found)


def stop_marked(mark: str, grace_s: float = 3.0) -> None:
    """Stop a local cluster that no driver owns (the warm one): SIGTERM to each of its processes, then SIGKILL
    to what is left after ``grace_s``."""
    import signal
    import time

    for pid in marked(mark):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and marked(mark):
        time.sleep(0.1)
    for pid in marked(mark):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def start_reaper(mark: str) -> None:
    """Make the local cluster go away with the driver, also when the driver is killed (SIGKILL runs no exit
    hook, and Ray's agents outlive their raylet for a minute and more). Linux: it reads ``/proc``."""
    import subprocess
    import sys

    if not os.path.isdir("/proc"):
        return
    try:
        proc = subprocess.Popen([sys.executable, "-c", _REAPER, f"{REAPER_MARK}={mark}"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:  # no reaper: the exit hook still stops the cluster on a normal exit
        log.debug("no reaper for the local cluster: %s", exc)
        return
    _REAPERS.append(proc)  # its stdin stays open, and so the reaper waits, as long as this process lives


_REAPERS: list[Any] = []


@contextlib.contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the block, then put back what was there."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def release_local_cluster() -> None:
    """At the exit of a process that started its own local cluster, stop it
    before Ray's own exit hook does: that hook first sleeps half a second so
    that forwarded worker logs can print, and none are forwarded unless
    ``AUDITKIT_RAY_LOG_TO_DRIVER=1``. The autoscaler monitor goes first
    (``compat.stop_local_monitor``). Ray's hook then finds nothing left to do."""
    compat.stop_local_monitor()
    if not log_to_driver():
        try:
            import ray

            ray.shutdown()
        except Exception as exc:  # noqa: BLE001 - at exit: Ray's own hook shuts it down anyway
            log.debug("stopping the local Ray cluster at exit failed: %s", exc)


