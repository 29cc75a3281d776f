"""The driver's Ray runtime: start Ray (``init_ray``), quiet Ray Data, find
our own error inside Ray's wrappers (``unwrap_error``), kill a failed
pipeline's actors, stop the local cluster at exit, and keep a finished run
when a tracking mirror fails (``warn_on_failure``). What needs Ray's private
APIs is in ``ray_compat``."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import sys
import warnings
from typing import Any, Callable, Iterator

from .. import errors
from ..errors import AuditKitError, require
from . import ray_compat
from .warm import worker_env

log = logging.getLogger(__name__)

kill_actors_on_failure = ray_compat.kill_actors_on_failure


def log_to_driver() -> bool:
    """Whether workers' output is forwarded to the driver (``AUDITKIT_RAY_LOG_TO_DRIVER=1``)."""
    return os.environ.get("AUDITKIT_RAY_LOG_TO_DRIVER", "0") == "1"


#: whether a run without an address uses the warm local cluster (``warm``) when ``AUDITKIT_RAY_WARM`` is unset:
#: the command line says yes (``prefer_warm_cluster``), the library keeps a private cluster per process
_WARM_BY_DEFAULT = [False]


def prefer_warm_cluster(on: bool = True) -> None:
    """Runs of this process without an address share the machine's warm local cluster (``warm``)."""
    _WARM_BY_DEFAULT[0] = on


def init_ray(address: str | None, execution: Any) -> Any:
    """Ray, started (or joined at ``address`` / ``RAY_ADDRESS``) unless it is already; without an address, the
    warm local cluster when this process prefers it (``prefer_warm_cluster``, ``AUDITKIT_RAY_WARM``)."""
    address = address or os.environ.get("RAY_ADDRESS")
    warm_first = not address and _warm_wanted() and "ray" not in sys.modules
    if warm_first:
        # the warm cluster, like every cluster Ray starts, takes token authentication (its token is in ~/.ray);
        # Ray reads the mode when it is imported, so a driver that joins it says so before that
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    ray = require("ray", "ray")
    if ray.is_initialized():
        return ray
    env = worker_env()
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": log_to_driver()}
    with _sigterm_kept():
        if warm_first:
            from . import warm

            warm_address = warm.connect_address(_int(getattr(execution, "num_cpus", None)),
                                                getattr(execution, "num_gpus", None), env)
            if warm_address:
                ray.init(address=warm_address, **kwargs)
                return ray
        _start(ray, address, execution, env, kwargs)
    return ray


def _warm_wanted() -> bool:
    from .warm import wanted

    choice = wanted()
    return _WARM_BY_DEFAULT[0] if choice is None else choice


def _int(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


@contextlib.contextmanager
def _sigterm_kept() -> Iterator[None]:
    """``ray.init`` replaces the process's SIGTERM handler with ``sys.exit(15)`` (a stack dump, exit 15); keep
    the caller's handler (the CLI's: stop cleanly, exit 143)."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and callable(before):
            signal.signal(signal.SIGTERM, before)


def _start(ray: Any, address: str | None, execution: Any, worker_env: dict[str, str], kwargs: dict[str, Any]) -> None:
    if address:
        ray.init(address=address, runtime_env={"env_vars": worker_env}, **kwargs)
    else:
        start_local(getattr(execution, "num_cpus", None), getattr(execution, "num_gpus", None),
                    kwargs["log_to_driver"], worker_env)


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
          ray_compat.dropped(ray_compat.TOKEN_AUTH_LOGGER, ray_compat.TOKEN_AUTH_ENABLED),
          ray_compat.quick_local_start(log_to_driver)):
        ray.init(address="local", num_cpus=_int(num_cpus), num_gpus=num_gpus, include_dashboard=False,
                 logging_level=logging.WARNING, log_to_driver=log_to_driver)
    atexit.register(release_local_cluster)  # runs before Ray's own exit hook (atexit is last in, first out)
    start_reaper(mark)
    return ray


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
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == me:
        continue
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = b"\0" + f.read()
    except OSError:
        continue
    if mark in env:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
"""


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
    (``ray_compat.stop_local_monitor``). Ray's hook then finds nothing left to do."""
    ray_compat.stop_local_monitor()
    if not log_to_driver():
        try:
            import ray

            ray.shutdown()
        except Exception as exc:  # noqa: BLE001 - at exit: Ray's own hook shuts it down anyway
            log.debug("stopping the local Ray cluster at exit failed: %s", exc)


def quiet_ray_data() -> None:
    """Ray Data without its progress bars, start-up banner and per-run statistics: the driver reports progress."""
    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.verbose_stats_logs = False
    # the pipeline's input rows hold object references, which Arrow cannot hold: kept as Python objects, as
    # Ray Data does by default, said once here rather than warned about on every run
    ctx.enable_fallback_to_arrow_object_ext_type = True
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    ray_compat.drop_progress_notice()
    # Ray 2.60 takes max_restarts and scheduling_strategy only among its ray_remote_args, which it calls
    # deprecated. One process-wide filter: a catch_warnings block per call is not thread-safe, and a sweep
    # builds its cells' pipelines in threads (one block's exit drops the other's filter).
    warnings.filterwarnings("ignore", message=r"`ray_remote_args` is deprecated")


def unwrap_error(exc: BaseException) -> BaseException:
    """Find our own typed error inside Ray's wrappers (RayTaskError,
    UserCodeException); across processes the chain may survive only as text."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, AuditKitError):
            return e
        for nxt in (getattr(e, "cause", None), e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    m = re.search(r"auditkit_ray\.errors\.(\w+): (.+)", str(exc))
    cls = getattr(errors, m.group(1), None) if m else None
    if m and isinstance(cls, type) and issubclass(cls, AuditKitError):
        return cls(m.group(2).strip())
    return exc


def warn_on_failure(what: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or None with a warning when it fails: tracking mirrors must not lose a finished run."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - see the docstring
        from ..core.secrets import scrub_text

        log.warning("%s: %s", what, scrub_text(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
        return None
