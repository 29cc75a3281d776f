"""The driver's side of Ray once connected (which cluster, and how it starts: ``cluster/``): quiet Ray Data,
find our own error inside Ray's wrappers (``unwrap_error``), kill a failed pipeline's actors, and keep a
finished run when a tracking mirror fails (``warn_on_failure``). What needs Ray's private APIs is in
``cluster.compat``."""

from __future__ import annotations

import logging
import re
import warnings
from typing import Any, Callable

from .. import errors
from ..cluster import compat as ray_compat
from ..cluster.connect import init_ray as init_ray  # the driver side connects through here
from ..errors import AuditKitError

log = logging.getLogger(__name__)

kill_actors_on_failure = ray_compat.kill_actors_on_failure


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
    ray_compat.console_follows_stderr()
    # Ray 2.60 takes max_restarts and scheduling_strategy only among its ray_remote_args, which it calls
    # deprecated. One process-wide filter: a catch_warnings block per call is not thread-safe, and a sweep
    # builds its cells' pipelines in threads (one block's exit drops the other's filter).
    warnings.filterwarnings("ignore", message=r"`ray_remote_args` is deprecated")


def stopped_by_down() -> bool:
    """Whether this process's warm cluster is being stopped by ``auditkit-ray down`` (which interrupts the
    commands using it first)."""
    from ..cluster.connect import connection
    from ..cluster.warm import stopped_by_down as stopped

    c = connection()
    return c.kind == "warm" and stopped(c.warm_cluster_id)


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
            cause = getattr(e, "cause", None)
            if not isinstance(cause, AuditKitError):
                return e
            # Ray's error for an actor call that raised ours is of both classes, and reads as its traceback
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
