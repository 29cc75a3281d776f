"""A faster start for the local Ray cluster a run starts for itself.

``ray.init(address="local")`` starts its head node serially, and on a small
machine most of its time is waiting (measured on 2 cores, Ray 2.60; see
benchmarks/RESULTS.md, "Performance problems found", 23):

- the API server process (the dashboard's head; with ``include_dashboard=False``
  it loads one module, the one that reports Ray's usage statistics) is started
  and waited for (~0.9 s) before the raylet is started at all;
- the driver then asks the GCS for its raylet, and when the raylet has not
  registered yet (it waits for its two agent processes to start, ~1 s), Ray's
  own lookup sleeps a whole second before asking again, so ``ray.init`` took
  either ~2.5 s or ~3.5 s;
- a log monitor process is started to forward worker output to drivers that
  asked for it.

For the cluster that ``init_ray`` starts (private to this process, stopped
with it) ``quick_local_start`` changes three things while ``ray.init`` runs,
and nothing after it:

1. the API server is not started when Ray's usage statistics are off
   (``RAY_USAGE_STATS_ENABLED=0`` or ``ray disable-usage-stats``): reporting
   them is all it would do. With them on, it starts as Ray starts it;
2. after starting the raylet, the driver polls the GCS every 20 ms until the
   raylet has registered, so Ray's own lookup finds it at once;
3. the log monitor is not started when workers' output is not forwarded to
   the driver (``AUDITKIT_RAY_LOG_TO_DRIVER`` unset): no one would read it.

It patches three methods of Ray's ``Node`` class for the duration of the
block, and only when they are there; with another Ray layout it does nothing
and Ray starts as it always does. A cluster at an address (``ray job
submit``, KubeRay) is never started here, so none of this applies to it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator

# the methods of Ray's ``Node`` that ``quick_local_start`` replaces while ``ray.init`` runs
PATCHED_METHODS = ("start_api_server", "start_ray_processes", "start_log_monitor")
_POLL_S = 0.02
_REGISTER_TIMEOUT_S = 30.0  # Ray's own wait for its raylet, after which it raises


def _usage_stats_enabled() -> bool:
    try:
        from ray._common.usage.usage_lib import usage_stats_enabled
    except ImportError:
        return True  # unknown: start the API server, as Ray would
    try:
        return bool(usage_stats_enabled())
    except ValueError:  # a malformed setting: let Ray report it as it would
        return True


def raylet_registered(gcs: Any, node_id: str) -> bool:
    """Whether the GCS lists the node ``node_id`` (hex), i.e. its raylet has registered."""
    return any(k.hex() == node_id for k in gcs.get_all_node_info(timeout=5))


def _await_raylet(node: Any) -> None:
    """Return once this node's raylet has registered with the GCS, its
    process has exited (Ray's own wait then reports it), or Ray's own time
    limit has passed. Any failure to ask leaves the wait to Ray."""
    with contextlib.suppress(Exception):
        from ray._private import ray_constants

        gcs = node.get_gcs_client()
        raylet = node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET, [None])[0]
        deadline = time.monotonic() + _REGISTER_TIMEOUT_S
        while time.monotonic() < deadline:
            if raylet_registered(gcs, node._node_id):
                return
            if raylet is not None and raylet.process.poll() is not None:
                return
            time.sleep(_POLL_S)


@contextlib.contextmanager
def quick_local_start(log_to_driver: bool) -> Iterator[None]:
    """Patch Ray's ``Node`` for one local ``ray.init``; see the module's doc."""
    try:
        from ray._private.node import Node
    except ImportError:
        yield
        return
    saved = {n: Node.__dict__.get(n) for n in PATCHED_METHODS}
    if any(not callable(v) for v in saved.values()):
        yield
        return
    skip_api = not _usage_stats_enabled()

    def start_ray_processes(self: Any) -> None:
        saved["start_ray_processes"](self)
        _await_raylet(self)

    def skipped(self: Any, **_: Any) -> None:
        return None

    Node.start_ray_processes = start_ray_processes
    if skip_api:
        Node.start_api_server = skipped
    if not log_to_driver:
        Node.start_log_monitor = skipped
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(Node, n, v)
