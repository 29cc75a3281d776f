"""The one module that touches Ray's private APIs, and the Ray releases it
was written for.

What it uses, and why:

- ``ray._private.node.Node``: three of its methods are replaced while
  ``ray.init`` starts the local cluster a run starts for itself
  (``quick_local_start``), and its processes are read at exit
  (``stop_local_monitor``) through ``ray._private.worker._global_node``;
- ``ray._private.ray_constants``, ``ray._common.usage.usage_lib``: the
  raylet's process type, and whether Ray's usage statistics are on;
- ``ray.data._internal.execution.execution_callback.ExecutionCallback``:
  a failed pipeline kills its actors at once (``kill_actors_on_failure``);
- ``ray._private.state.actors``: whether a resident engine's new neighbour
  is still waiting for a place, or an actor about to be killed is still
  being created (``actor_state``, ``kill_actors``; the public state API
  goes through the dashboard, which a warm cluster does not start);
- the names of two of Ray's loggers, whose notices about Ray's own defaults
  are dropped (``dropped``, ``drop_progress_notice``);
- ``ray._private.log.PlainRayHandler``, Ray's console handler, made to write
  to ``sys.stderr`` as it is at each record (``console_follows_stderr``).

Each is a start-up, shutdown or noise tweak: without it Ray works as it
always does. So with a Ray outside ``RAY_WRITTEN_FOR`` (``written_for()``
false) none is applied, and Ray starts and stops as it would; with a Ray
inside it, a private name that is missing raises ``RayCompatError``, naming
Ray's version and what is missing, rather than an AttributeError deep in a
run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from typing import Any, Callable, Iterator, TypeVar

from ..core.stderr import FollowsStderr
from ..errors import RunError

log = logging.getLogger(__name__)

#: the lowest and highest Ray release (major, minor) whose private APIs this module was read from and tested on
RAY_WRITTEN_FOR = ((2, 60), (2, 60))

T = TypeVar("T")


class RayCompatError(RunError):
    """A private Ray API this module relies on is not where it was."""


def ray_version() -> str:
    import ray

    return str(ray.__version__)


def _major_minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


@functools.lru_cache(maxsize=1)
def written_for() -> bool:
    """Whether the installed Ray is one this module was written for; outside that range the tweaks are off."""
    version = ray_version()
    mm = _major_minor(version)
    lo, hi = RAY_WRITTEN_FOR
    ok = mm is not None and lo <= mm <= hi
    if not ok:
        log.info("Ray %s is outside the releases auditkit-ray's Ray adapter was written for (%s); its start-up "
                 "and shutdown tweaks are off and Ray runs as it always does", version, _range())
    return ok


def _range() -> str:
    (a, b), (c, d) = RAY_WRITTEN_FOR
    return f"{a}.{b}" if (a, b) == (c, d) else f"{a}.{b} to {c}.{d}"


def _attr(module: str, name: str) -> Any:
    """``module.name``, imported, or a RayCompatError naming Ray's version and what is missing."""
    import importlib

    return _private(f"{module}.{name}", lambda: getattr(importlib.import_module(module), name))


def _private(what: str, get: Callable[[], T]) -> T:
    """``get()``, or a RayCompatError naming Ray's version and ``what`` is missing."""
    try:
        return get()
    except (ImportError, AttributeError) as exc:
        raise RayCompatError(f"Ray {ray_version()} has no {what} ({type(exc).__name__}: {exc}); auditkit-ray's Ray "
                             f"adapter (cluster/compat.py) was written for Ray {_range()}") from None


def _actor_info(handle: Any) -> dict | None:
    """The GCS's actor table entry of an actor; None where the installed Ray is not one this module was written
    for, or the actor is unknown."""
    if not written_for():
        return None
    actors = _attr("ray._private.state", "actors")
    actor_id = _private("ActorHandle._actor_id", lambda: handle._actor_id.hex())
    info = actors(actor_id=actor_id)
    return info if isinstance(info, dict) else None


def actor_state(handle: Any) -> str | None:
    """Ray's state of an actor (``PENDING_CREATION``, ``ALIVE``, ``RESTARTING``, ``DEAD``...) from the GCS's actor
    table; None where the installed Ray is not one this module was written for, or the actor is unknown."""
    info = _actor_info(handle)
    return info.get("State") if info else None


def waiting_for_place(handle: Any) -> bool | None:
    """Whether an actor waits for a place: ``PENDING_CREATION`` with no worker leased to it yet. One that has its
    worker (the GCS knows its pid) is ``PENDING_CREATION`` too while its worker starts and its ``__init__`` runs,
    holding its resources already: on a loaded host that lasts seconds. None where Ray cannot be asked (as for
    ``actor_state``)."""
    info = _actor_info(handle)
    if not info:
        return None
    return info.get("State") == "PENDING_CREATION" and not info.get("Pid")


#: how long ``kill_actors`` lets actors still being created finish their creation before killing them
CREATION_WAIT_S = 10.0
#: the actor states in which a kill loses nothing: created, or gone
SETTLED = ("ALIVE", "DEAD")


def kill_actors(ray: Any, handles: list[Any], wait_s: float = CREATION_WAIT_S) -> None:
    """Kill actors (no restart), each one still being created only once its creation is over, or after ``wait_s``.

    Ray 2.60 loses an actor killed at the moment its worker is leased: the GCS cancels the creation, the worker
    ignores the kill (it holds no actor yet, "Mismatched ActorID" in the GCS log) and keeps its lease, with the
    actor's GPUs, until the driver's job ends. A run that fails on bad input kills the generation actors it
    started a moment before, so the next run of that process found a GPU gone for good. An actor in
    that is not yet ``ALIVE`` (or ``DEAD``) is therefore waited for (a generation actor's ``__init__`` loads
    nothing, so this is its process start): one still being registered (the GCS does not know it yet), waiting
    for its arguments, being placed or restarting alike, since each of them may get its worker at any moment.
    One that cannot be placed is killed after ``wait_s``, with no worker to lose. With a Ray outside
    ``RAY_WRITTEN_FOR`` the actors are killed at once."""
    pending = []
    if written_for():
        for h in handles:
            try:
                state = actor_state(h)
            except Exception:  # noqa: BLE001 - a state that cannot be read is waited for like an unknown one
                state = None
            if state not in SETTLED:
                pending.append(h)
    if pending:
        with contextlib.suppress(Exception):
            ray.wait([h.__ray_ready__.remote() for h in pending], num_returns=len(pending), timeout=wait_s)
    for h in handles:
        with contextlib.suppress(Exception):
            ray.kill(h, no_restart=True)


# --------------------------------------------------------------------------- Ray's notices about its own defaults
# Notices Ray prints on every run about its own defaults, which say nothing to our user: that a local cluster
# (ours, started for this process and stopped with it) uses token authentication, Ray's default since 2.60, and
# that Ray Data's progress bars are off (the driver reports its own progress). Only these two messages are dropped;
# their loggers' other records (e.g. Ray's warning that a cluster runs *without* authentication) still print.
TOKEN_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
TOKEN_AUTH_ENABLED = "Token authentication is enabled for this Ray cluster"
PROGRESS_LOGGER = "ray.data._internal.progress"
PROGRESS_OFF = "Progress bars disabled"


class DropMessage(logging.Filter):
    """Drops the records whose message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


_PROGRESS_FILTER = DropMessage(PROGRESS_OFF)


@contextlib.contextmanager
def dropped(logger: str, prefix: str) -> Iterator[None]:
    """Drop one message of ``logger`` for the duration of the block."""
    f = DropMessage(prefix)
    target = logging.getLogger(logger)
    target.addFilter(f)
    try:
        yield
    finally:
        target.removeFilter(f)


def drop_progress_notice() -> None:
    """Drop Ray Data's notice that its progress bars are off, for good (logging adds a filter once)."""
    logging.getLogger(PROGRESS_LOGGER).addFilter(_PROGRESS_FILTER)


# --------------------------------------------------------------------------- Ray's console handler
# Ray's console handler (``ray._private.log.PlainRayHandler``, on the "ray" and "ray.data" loggers) says it writes to
# whatever sys.stderr is when a record comes, but it calls StreamHandler.emit, which writes to the stream it was made
# with: sys.stderr as it was when Ray, or Ray Data, was imported. A process that imported Ray while its stderr was
# redirected (a test's capsys, a notebook cell's capture, contextlib.redirect_stderr) and closed that stream later
# printed "--- Logging error --- ValueError: I/O operation on closed file" with a traceback for every record of
# Ray's, such as Ray Data's notice that a run's pipeline aborts, instead of the record.
CONSOLE_HANDLER = ("ray._private.log", "PlainRayHandler")


@functools.lru_cache(maxsize=1)
def _console_following_stderr() -> tuple[type, type]:
    plain = _attr(*CONSOLE_HANDLER)
    return plain, type("PlainRayHandlerFollowingStderr", (FollowsStderr, plain), {})


def console_follows_stderr() -> None:
    """Ray's console handlers made so far write to ``sys.stderr`` as it is at each record, as Ray means them to.
    Called as a command connects to Ray and as each pipeline starts (Ray Data makes its handlers when it is
    imported)."""
    if not written_for():
        return
    plain, following = _console_following_stderr()
    loggers = [logging.getLogger()] + [lg for lg in list(logging.root.manager.loggerDict.values())
                                       if isinstance(lg, logging.Logger)]
    for lg in loggers:
        for handler in list(lg.handlers):
            if type(handler) is plain:
                handler.__class__ = following


# --------------------------------------------------------------------------- the local cluster's processes
def global_node() -> Any | None:
    """The node this process started or joined (``ray._private.worker._global_node``), None when there is none."""
    if not written_for():
        return None
    return _attr("ray._private.worker", "_global_node")


def stop_local_monitor() -> None:
    """At exit, kill the autoscaler monitor of the local cluster this
    process started, before ``ray.shutdown`` does: Ray asks it to stop and
    waits a full second for it (serially, before the rest), and a local
    cluster has nothing for it to scale. Ray's own shutdown does the rest
    (also when this fails: it then only costs that second). Runs at exit:
    logs what went wrong instead of raising."""
    try:
        node = global_node()
        if node is None:
            return
        processes = _private("Node.all_processes", lambda: node.all_processes) or {}
        for info in processes.get("monitor", []):
            if info.process.poll() is None:
                info.process.kill()
                info.process.wait(timeout=5)
    except RayCompatError as exc:
        log.warning("%s", exc)
    except Exception as exc:  # noqa: BLE001 - at exit; Ray's own shutdown stops the monitor anyway
        log.debug("stopping the local autoscaler monitor failed: %s", exc)


# --------------------------------------------------------------------------- a faster local start
# ``ray.init(address="local")`` starts its head node serially, and on a small machine most of its time is waiting:
# - the API server process (the dashboard's head; with ``include_dashboard=False`` it loads one module, the one
#   that reports Ray's usage statistics) is started and waited for before the raylet is started at all;
# - the driver then asks the GCS for its raylet, and when the raylet has not registered yet (it waits for its two
#   agent processes to start), Ray's own lookup sleeps a whole second before asking again;
# - a log monitor process is started to forward worker output to drivers that asked for it.
# For the local clusters auditkit-ray starts (a command's private one, or the warm one its keeper holds)
# ``quick_local_start`` changes four things while ``ray.init`` runs, and nothing after it:
# 1. the API server is not started when Ray's usage statistics are off (``RAY_USAGE_STATS_ENABLED=0`` or
#    ``ray disable-usage-stats``): reporting them is all it would do. With them on, it starts as Ray starts it;
# 2. after starting the raylet, the driver polls the GCS every 20 ms until the raylet has registered, so Ray's
#    own lookup finds it at once;
# 3. the log monitor is not started when workers' output is not forwarded to the driver
#    (``AUDITKIT_RAY_LOG_TO_DRIVER`` unset): no one would read it;
# 4. the dashboard agent starts in its minimal mode (as under Ray's minimal install): with no dashboard there is
#    no one to serve its HTTP endpoints and metrics to, and it holds half the memory of the full agent.
# A cluster at an address (``ray job submit``, KubeRay) is never started here, so none of this applies to it.

#: the methods of Ray's ``Node`` that ``quick_local_start`` replaces while ``ray.init`` runs
PATCHED_METHODS = ("start_api_server", "start_ray_processes", "start_log_monitor")
#: the function whose answer makes Ray start the dashboard agent in its minimal mode (``ray._private.utils``)
MINIMAL_AGENT = ("ray._private.utils", "get_dashboard_dependency_error")
_POLL_S = 0.02
_REGISTER_TIMEOUT_S = 30.0  # Ray's own wait for its raylet, after which it raises


def _usage_stats_enabled() -> bool:
    enabled = _attr("ray._common.usage.usage_lib", "usage_stats_enabled")
    try:
        return bool(enabled())
    except ValueError:  # a malformed setting: let Ray report it as it would
        return True


def raylet_registered(gcs: Any, node_id: str) -> bool:
    """Whether the GCS lists the node ``node_id`` (hex), i.e. its raylet has registered."""
    return any(k.hex() == node_id for k in gcs.get_all_node_info(timeout=5))


def _await_raylet(node: Any, raylet_type: str) -> None:
    """Return once this node's raylet has registered with the GCS, its
    process has exited (Ray's own wait then reports it), or Ray's own time
    limit has passed. Any failure to ask leaves the wait to Ray."""
    with contextlib.suppress(Exception):
        gcs = node.get_gcs_client()
        raylet = node.all_processes.get(raylet_type, [None])[0]
        deadline = time.monotonic() + _REGISTER_TIMEOUT_S
        while time.monotonic() < deadline:
            if raylet_registered(gcs, node._node_id):
                return
            if raylet is not None and raylet.process.poll() is not None:
                return
            time.sleep(_POLL_S)


@contextlib.contextmanager
def quick_local_start(log_to_driver: bool) -> Iterator[None]:
    """Patch Ray's ``Node`` for one local ``ray.init`` (see above); with a Ray this was not written for, nothing."""
    if not written_for():
        yield
        return
    node_cls = _attr("ray._private.node", "Node")
    raylet_type = _attr("ray._private.ray_constants", "PROCESS_TYPE_RAYLET")
    saved = {n: node_cls.__dict__.get(n) for n in PATCHED_METHODS}
    missing = [n for n, v in saved.items() if not callable(v)] + (
        [] if callable(getattr(node_cls, "get_gcs_client", None)) else ["get_gcs_client"])
    if missing:
        raise RayCompatError(f"Ray {ray_version()}'s ray._private.node.Node has no {', '.join(missing)}; "
                             f"auditkit-ray's Ray adapter (cluster/compat.py) was written for Ray {_range()}")
    skip_api = not _usage_stats_enabled()

    def start_ray_processes(self: Any) -> None:
        saved["start_ray_processes"](self)
        _await_raylet(self, raylet_type)

    def skipped(self: Any, **_: Any) -> None:
        return None

    import importlib

    utils = importlib.import_module(MINIMAL_AGENT[0])
    dependency_error = _attr(*MINIMAL_AGENT)

    def no_dashboard(*args: Any, **kwargs: Any) -> ImportError:
        return ImportError("auditkit-ray starts no dashboard")

    node_cls.start_ray_processes = start_ray_processes
    utils.get_dashboard_dependency_error = no_dashboard
    if skip_api:
        node_cls.start_api_server = skipped
    if not log_to_driver:
        node_cls.start_log_monitor = skipped
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(node_cls, n, v)
        utils.get_dashboard_dependency_error = dependency_error


def start_head_node(num_cpus: Any, num_gpus: Any) -> Any:
    """A head node started as ``ray start --head`` starts one (``ray._private.node.Node``): its processes outlive
    this one, which is not a driver of it; ``quick_local_start`` applies, and its autoscaler monitor (nothing to
    scale on one machine) is stopped once it is up. Returns the node (``gcs_address``, ``node_id``)."""
    params_cls = _attr("ray._private.parameter", "RayParams")
    node_cls = _attr("ray._private.node", "Node")
    auth = "ray._private.authentication.authentication_token_setup"
    with dropped(TOKEN_AUTH_LOGGER, TOKEN_AUTH_ENABLED), quick_local_start(False):
        # token authentication, as ``ray.init`` sets it up for a cluster it starts (its token in ~/.ray)
        _attr(auth, "enable_token_auth_by_default")()
        _attr(auth, "ensure_token_if_auth_enabled")(None, create_token_if_missing=True)
        params = params_cls(num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False)
        node = node_cls(ray_params=params, head=True, shutdown_at_exit=False, spawn_reaper=False,
                        ray_init_cluster=True)
    for info in (_private("Node.all_processes", lambda: node.all_processes) or {}).get("monitor", []):
        with contextlib.suppress(Exception):
            info.process.kill()
            info.process.wait(timeout=5)
    return node


# --------------------------------------------------------------------------- Ray Data
#: the namespaces of the detached helper actors a Ray Data pipeline starts and leaves in the cluster (its
#: statistics, its autoscaling coordinator and requester, where its actors are, its usage report): each is
#: fetched with ``get_if_exists`` by the next pipeline, so stopping them between pipelines is safe
RAY_DATA_HELPER_NAMESPACES = ("_dataset_stats_actor", "_dataset_stats_summary_actor", "AutoscalingCoordinator",
                              "AutoscalingRequester", "ActorLocationTracker", "DataUsageCollectionActor")


def stop_ray_data_helpers(ray: Any) -> int:
    """Kill Ray Data's detached helper actors (``RAY_DATA_HELPER_NAMESPACES``) while no pipeline runs; returns how
    many were up."""
    n = 0
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry.get("namespace") in RAY_DATA_HELPER_NAMESPACES:
            with contextlib.suppress(Exception):
                ray.kill(ray.get_actor(entry["name"], namespace=entry["namespace"]), no_restart=True)
                n += 1
    return n


class PipelineHandle:
    """The executor of one pipeline, once it starts: ``abort(exc)`` shuts it down from another thread, killing
    its actors (a sweep cell past its time budget)."""

    def __init__(self) -> None:
        self.executor: Any = None
        self.aborted: BaseException | None = None
        #: what else an abort stops at once (the driver's own generation actors)
        self.on_abort: list[Callable[[], None]] = []

    def __getstate__(self) -> dict[str, Any]:
        # Ray Data ships its DataContext, whose callback class closes over this handle, to its workers: what
        # the handle holds (the executor, the driver's generation pool) stays with the driver
        return {"executor": None, "aborted": None, "on_abort": []}

    def abort(self, exc: BaseException) -> bool:
        self.aborted = exc
        for fn in self.on_abort:
            with contextlib.suppress(Exception):
                fn()
        if self.executor is None:
            return False
        self.executor.shutdown(True, exc)
        return True


def kill_actors_on_failure(ds: Any) -> PipelineHandle:
    """A failed pipeline kills its actors at once. Ray Data's own shutdown
    only drops its handles and leaves the actors to reference counting, and
    an actor that still owns objects lingers, idle, holding its GPU, while a
    long-lived caller (a notebook, a sweep's other cells) waits for it."""
    handle = PipelineHandle()
    if not written_for():
        return handle
    base = _attr("ray.data._internal.execution.execution_callback", "ExecutionCallback")

    class KillActorsOnFailure(base):  # type: ignore[misc, valid-type]
        def before_execution_starts(self, executor: Any) -> None:
            shutdown = executor.shutdown

            def forced_on_failure(force: bool = False, exception: BaseException | None = None, **kw: Any) -> Any:
                return shutdown(force or exception is not None, exception, **kw)

            executor.shutdown = forced_on_failure
            handle.executor = executor
            if handle.aborted is not None:
                forced_on_failure(True, handle.aborted)

    classes = _private("DataContext.custom_execution_callback_classes",
                       lambda: ds.context.custom_execution_callback_classes)
    ds.context.custom_execution_callback_classes = [c for c in classes if c.__name__ != "KillActorsOnFailure"] + [
        KillActorsOnFailure]
    return handle
