"""Which Ray a run uses: the cluster at an address (``--address``, ``RAY_ADDRESS``), the machine's warm local
cluster (``warm``), or a private local cluster of this process's own (``local``)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import ConfigError, require
from . import compat
from .local import int_or_float, log_to_driver, start_local, worker_env

log = logging.getLogger(__name__)


#: whether a run without an address uses the warm local cluster (``warm``) when ``AUDITKIT_RAY_WARM`` is unset:
#: the command line says yes (``prefer_warm_cluster``), the library keeps a private cluster per process
_WARM_BY_DEFAULT = [False]


@dataclass
class Connection:
    """The cluster this process's runs use, once ``init_ray`` has connected: ``kind`` is ``private`` (a local
    cluster this process started and owns), ``warm`` (the machine's shared local cluster, ``warm_base`` its
    state folder), ``address`` (a cluster at an address: ``--address``, ``RAY_ADDRESS``, a Ray job's own), or
    ``existing`` (Ray was initialised by the caller before any run)."""

    kind: str
    warm_base: str | None = None
    warm_cluster_id: str | None = None

    @property
    def local(self) -> bool:
        """Whether the cluster's workers run on this machine, so the driver's folder and variables mean the
        same to them (a run's context travels to them: ``actors.context``)."""
        return self.kind in ("private", "warm")


_CONNECTION: list[Connection] = []


def connection() -> Connection:
    """How this process is connected (``existing`` when Ray was initialised outside ``init_ray``)."""
    return _CONNECTION[-1] if _CONNECTION else Connection("existing")


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
    compat.console_follows_stderr()
    if ray.is_initialized():
        return ray
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": log_to_driver()}
    with _sigterm_kept():
        if warm_first:
            from . import warm

            joined = warm.connect(int_or_float(getattr(execution, "num_cpus", None)),
                                  getattr(execution, "num_gpus", None))
            if joined is not None:
                ray.init(address=joined.address, **kwargs)
                _CONNECTION.append(Connection("warm", str(warm.home()), joined.cluster_id))
                return ray
        if address:
            # a cluster elsewhere: its workers import user code from the job's working directory
            join(ray, address, runtime_env={"env_vars": worker_env()}, **kwargs)
            _CONNECTION.append(Connection("address"))
        else:
            start_local(getattr(execution, "num_cpus", None), getattr(execution, "num_gpus", None),
                        kwargs["log_to_driver"])
            _CONNECTION.append(Connection("private"))
    return ray


def _warm_wanted() -> bool:
    from .warm import wanted

    choice = wanted()
    return _WARM_BY_DEFAULT[0] if choice is None else choice


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




#: how long a cluster at an address has to answer on its port: a head node started a moment before may still be
#: opening it. Past that a run says no cluster is there, where Ray would try 20 times, for up to a minute each.
REACH_S = 10.0


def join(ray: Any, address: str, **kwargs: Any) -> None:
    """``ray.init(address=address)`` for a cluster someone named (``--address``, ``RAY_ADDRESS``): an address where
    nothing answers, or a cluster that refuses to be joined, is a one-line ConfigError naming the address and what
    to do, not a traceback or a wait of many minutes."""
    _check_reachable(address)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError) as exc:
        text = " ".join(_chain_texts(exc))
        if "InvalidAuthToken" in text or "AuthenticationError" in text or "Authentication token" in text:
            raise ConfigError(
                f"the Ray cluster at {address} asks for a token (Ray's token authentication) and this process sent "
                f"none it accepts: set RAY_AUTH_MODE=token, with the cluster's token in ~/.ray/auth_token, "
                f"RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN") from None
        if isinstance(exc, ConnectionError):
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConfigError(f"cannot join the Ray cluster at {address}: {first}") from None
        raise


def _chain_texts(exc: BaseException) -> Iterator[str]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield f"{type(cur).__name__}: {cur}"
        cur = cur.__cause__ or cur.__context__


def host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` or ``ray://host:port`` address; None for the others (``auto``,
    ``local``), which Ray resolves itself."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _check_reachable(address: str, wait_s: float = REACH_S) -> None:
    """A ConfigError when nothing listens at ``address``'s port within ``wait_s``, or its host has no address."""
    import socket
    import time

    target = host_port(address)
    if target is None:
        return
    host, port = target
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.5, min(2.0, deadline - time.monotonic()))):
                return
        except socket.gaierror as exc:
            raise ConfigError(f"no Ray cluster at {address}: the host {host!r} has no address "
                              f"({exc.strerror or exc}); check --address or RAY_ADDRESS") from None
        except OSError as exc:
            if time.monotonic() >= deadline:
                why = exc.strerror or type(exc).__name__
                raise ConfigError(
                    f"no Ray cluster answers at {address} (port {port} of {host}: {why}, for {wait_s:.0f} s): start "
                    f"one there (`ray start --head --port {port}`) or check --address or RAY_ADDRESS") from None
            time.sleep(0.5)
