"""Resident engines: generation actors that outlive the command that loaded them, and serve the next command
whose model is the same at once.

A registry actor (``Registry``, detached, named ``REGISTRY`` in the ``NAMESPACE`` namespace) knows every
resident actor of the cluster: its key (``engine key``: everything that makes a loaded engine different), the
key in words, when it was last used, and whether a command holds it now (a lease). A command's generation pool
asks the registry for actors with its key (``acquire``), registers the ones it had to start (``add``), keeps its
lease alive while it runs (``renew``) and gives the actors back when it is done (``release``): kept, or killed
when the run failed and their state is unknown. A lease not renewed for ``LEASE_TTL_S`` belongs to a command
that died: its actors are killed.

The registry evicts an idle resident (least recently used first) when it has not been used for its idle
timeout (``AUDITKIT_RAY_RESIDENT_IDLE_TIMEOUT``, default the cluster's), when the residents' memory exceeds
the budget (``AUDITKIT_RAY_RESIDENT_MEMORY``: bytes or a share of the host's memory, default 50%; on a GPU the
same share of each device's memory), when a new actor needs the GPUs it holds (``make_room``), and on
``auditkit-ray evict``; ``down`` takes the whole cluster. With no resident left it stops itself, so an idle
cluster holds nothing for it.

This module imports Ray only inside its functions; the registry holds actor handles and calls their methods
by name (``memory``, ``rest``, ``close``), so it needs nothing of the actors' code."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

NAMESPACE = "auditkit-ray"
REGISTRY = "auditkit-ray-residents"
#: resident generation actors are named ``ENGINE_PREFIX<key[:12]>-<random>`` in ``NAMESPACE``
ENGINE_PREFIX = "auditkit-ray-engine-"
#: a command renews its lease this often; a lease older than ``LEASE_TTL_S`` belongs to a command that died
RENEW_S = 5.0
LEASE_TTL_S = 45.0
#: how often the registry looks at idle timeouts, leases and the memory budget
TICK_S = 1.0
#: how often it asks each resident for its memory
MEMORY_EVERY_S = 10.0
#: a command's new actor still waiting for a place after this long, while idle residents hold GPUs, takes theirs.
#: Ray tells the GCS an actor's worker once the worker has started, which took seconds on a loaded two-core host:
#: a shorter wait takes an actor whose worker is starting for one waiting for a place
PENDING_GRACE_S = 5.0
#: how long the registry stays with no resident before it stops itself
EMPTY_LINGER_S = 20.0
DEFAULT_MEMORY_SHARE = 0.5


def idle_timeout_s() -> float:
    """``AUDITKIT_RAY_RESIDENT_IDLE_TIMEOUT`` (a duration), else the warm cluster's idle timeout."""
    from .warm import idle_timeout_s as cluster_idle
    from .warm import parse_duration

    raw = os.environ.get("AUDITKIT_RAY_RESIDENT_IDLE_TIMEOUT")
    if raw:
        with contextlib.suppress(ValueError):
            return parse_duration(raw)
        log.warning("AUDITKIT_RAY_RESIDENT_IDLE_TIMEOUT=%r is not a duration (e.g. 600, 90s, 10m); using the "
                    "cluster's idle timeout", raw)
    return cluster_idle()


def memory_budget(total: int | None = None) -> tuple[int | None, float]:
    """``AUDITKIT_RAY_RESIDENT_MEMORY``: ``(bytes, share)``: a size (``8G``, ``512M``, ``2000000000``) is bytes of
    host memory; a share (``40%``, ``0.4``) is of the host's memory, and of each GPU's."""
    raw = os.environ.get("AUDITKIT_RAY_RESIDENT_MEMORY", "").strip().upper()
    total = total if total is not None else _host_memory()
    share = DEFAULT_MEMORY_SHARE
    if raw:
        try:
            if raw.endswith("%"):
                share = float(raw[:-1]) / 100
            elif raw[-1:] in "KMGT" and raw[:-1]:
                return int(float(raw[:-1]) * 1024 ** ("KMGT".index(raw[-1]) + 1)), DEFAULT_MEMORY_SHARE
            elif float(raw) <= 1:
                share = float(raw)
            else:
                return int(float(raw)), DEFAULT_MEMORY_SHARE
        except ValueError:
            log.warning("AUDITKIT_RAY_RESIDENT_MEMORY=%r is neither a size (8G) nor a share (40%%); using %d%%",
                        raw, int(DEFAULT_MEMORY_SHARE * 100))
    return (int(total * share) if total else None), share


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class Registry:
    """The cluster's resident generation actors (a threaded, detached Ray actor; see the module's docstring)."""

    def __init__(self, idle_s: float, memory_bytes: int | None, gpu_share: float) -> None:
        self.idle_s = idle_s
        self.memory_bytes = memory_bytes
        self.gpu_share = gpu_share
        self.entries: dict[str, dict[str, Any]] = {}  # actor name -> entry
        self.leases: dict[str, dict[str, Any]] = {}  # lease id -> {"names": [...], "renewed": t, "holder": str}
        self.lock = threading.RLock()
        self.started = time.time()
        self.empty_since: float | None = time.monotonic()
        self._stop = False
        self._room_after = 0.0  # when an eviction for a waiting actor was last made, plus PENDING_GRACE_S
        threading.Thread(target=self._loop, name="auditkit-residents", daemon=True).start()

    # ---------------------------------------------------------------- leases
    def acquire(self, key: str, n: int, lease_id: str, holder: str) -> list[tuple[str, Any]]:
        """Up to ``n`` idle residents with ``key``, most recently used first, leased to ``lease_id``."""
        with self.lock:
            idle = [(name, e) for name, e in self.entries.items() if e["key"] == key and e["lease"] is None
                    and not e.get("dropping")]
            idle.sort(key=lambda ne: -ne[1]["last_used"])
            got = idle[:n]
            for name, e in got:
                e["lease"] = lease_id
                e["uses"] += 1
            self.leases[lease_id] = {"names": [name for name, _ in got], "renewed": time.monotonic(),
                                     "holder": holder}
            self.empty_since = None
            return [(name, e["handle"]) for name, e in got]

    def add(self, lease_id: str, key: str, words: str, actors: list[tuple[str, Any]], gpus: float,
            source: str | None = None) -> list[str]:
        """Register actors a command just started (leased to it). A resident of the same source (checkpoint)
        with another key is stale (its files changed): it is evicted once idle. Returns what was evicted."""
        now = time.time()
        evicted = []
        with self.lock:
            lease = self.leases.setdefault(lease_id, {"names": [], "renewed": time.monotonic(), "holder": "?"})
            for name, handle in actors:
                self.entries[name] = {"key": key, "words": words, "handle": handle, "gpus": gpus, "source": source,
                                      "created": now, "last_used": now, "lease": lease_id, "uses": 1,
                                      "memory": None}
                lease["names"].append(name)
            if source:
                for name, e in list(self.entries.items()):
                    if e["source"] == source and e["key"] != key:
                        if e["lease"] is None:
                            evicted.append(self._kill(name, "its checkpoint changed"))
                        else:
                            e["dropping"] = "its checkpoint changed"
            self.empty_since = None
        return evicted

    def renew(self, lease_id: str) -> bool:
        with self.lock:
            lease = self.leases.get(lease_id)
            if lease is None:
                return False
            lease["renewed"] = time.monotonic()
            return True

    def release(self, lease_id: str, keep: bool) -> None:
        """The command is done with its actors: kept for the next (``keep``), or killed."""
        with self.lock:
            lease = self.leases.pop(lease_id, None)
            if lease is None:
                return
            for name in lease["names"]:
                e = self.entries.get(name)
                if e is None:
                    continue
                e["lease"], e["last_used"] = None, time.time()
                if not keep or e.get("dropping"):
                    self._kill(name, e.get("dropping") or "its run failed")
                else:
                    with contextlib.suppress(Exception):
                        e["handle"].rest.remote()
            self._budget()
            if not self.entries:
                self.empty_since = time.monotonic()

    # ---------------------------------------------------------------- eviction
    def evict(self, match: str | None = None) -> list[dict[str, Any]]:
        """Kill the idle residents whose key or words contain ``match`` (all when None); a leased one is
        killed when its command is done. Returns what was (or will be) evicted."""
        out = []
        with self.lock:
            for name, e in list(self.entries.items()):
                if match and match not in e["key"] and match not in e["words"]:
                    continue
                if e["lease"] is None:
                    out.append(self._kill(name, "evicted"))
                else:
                    e["dropping"] = "evicted"
                    out.append({**self._public(name, e), "state": "evicted when its run is done"})
        return out

    def make_room(self, gpus: float, timeout_s: float = 30.0, count_free: bool = True) -> int:
        """Evict idle residents (least recently used first) until ``gpus`` GPUs are free (``count_free``
        false: until they have freed ``gpus``, whatever Ray shows free); returns how many were evicted. Leased
        residents are never taken."""
        import ray

        n, freed = 0, 0.0
        free = ray.available_resources().get("GPU", 0.0) if count_free else 0.0
        # Ray gives a killed actor's GPUs back a moment later: count what each eviction frees rather than
        # asking Ray again, or every idle resident would go before the first one's GPUs show up
        while free + freed + 1e-9 < gpus:
            with self.lock:
                idle = sorted(((e["last_used"], name) for name, e in self.entries.items()
                               if e["lease"] is None and e["gpus"] > 0))
                if not idle:
                    break
                freed += self.entries[idle[0][1]]["gpus"]
                self._kill(idle[0][1], "its GPUs were needed")
                n += 1
        deadline = time.monotonic() + timeout_s
        while n and ray.available_resources().get("GPU", 0.0) + 1e-9 < gpus and time.monotonic() < deadline:
            time.sleep(0.1)  # killed: their GPUs come back when Ray has seen them go
        return n

    def _unblock(self) -> None:
        """Idle residents give their GPUs to a command's new actor that Ray cannot place.

        ``make_room`` runs when a command starts its actors, but what it sees may be about to change: another
        command's actors still leased a moment before their release, or just started and not yet registered, or
        two commands counting the same freed GPUs (sweep cells start together). So the registry also looks:
        a leased actor of its own still waiting for a place after ``PENDING_GRACE_S`` gets the GPUs of idle
        residents, least recently used first, as many as the waiting actors need. An actor whose worker is still
        starting (``compat.waiting_for_place``: its GPUs are its own already) is not waiting: on a loaded host
        counting it made a command's new actors evict the idle residents they had left room for."""
        from .compat import waiting_for_place

        mono = time.monotonic()
        if mono < self._room_after:
            return
        with self.lock:
            waiting = [(name, e) for name, e in self.entries.items()
                       if e["lease"] is not None and e["gpus"] > 0 and not e.get("placed")]
        need = 0.0
        for _, e in waiting:
            unplaced = waiting_for_place(e["handle"])
            if unplaced is None:
                return  # a Ray this registry cannot ask: make_room alone decides
            if unplaced:
                if mono - e.setdefault("waiting_since", mono) >= PENDING_GRACE_S:
                    need += e["gpus"]
                continue
            # placed: its worker holds its GPUs, whether its creation is over or not; never asked about again
            e["placed"] = True
        # what Ray shows free did not fit them (another node's, or promised to another command): not counted
        if need and self.make_room(need, timeout_s=0.0, count_free=False):
            log.info("idle residents evicted for %g GPUs that a command's new actors waited for", need)
            self._room_after = mono + PENDING_GRACE_S

    def _kill(self, name: str, why: str) -> dict[str, Any]:
        import ray

        e = self.entries.pop(name)
        out = {**self._public(name, e), "state": f"evicted: {why}"}
        with contextlib.suppress(Exception):
            ray.wait([e["handle"].close.remote()], timeout=10)
        with contextlib.suppress(Exception):
            ray.kill(e["handle"], no_restart=True)
        log.info("resident %s (%s) evicted: %s", name, e["words"], why)
        if not self.entries:
            self.empty_since = time.monotonic()
        return out

    def _budget(self) -> None:
        """Evict idle residents, least recently used first, while their memory exceeds the budget."""
        with self.lock:
            if self.memory_bytes is None:
                return
            while True:
                held = sum((e["memory"] or {}).get("rss_bytes") or 0 for e in self.entries.values())
                if held <= self.memory_bytes:
                    return
                idle = sorted((e["last_used"], name) for name, e in self.entries.items() if e["lease"] is None)
                if not idle:
                    return
                self._kill(idle[0][1], f"the residents' memory exceeded AUDITKIT_RAY_RESIDENT_MEMORY "
                                       f"({self.memory_bytes / 2**30:.1f} GiB)")

    def _gpu_budget(self, gpu_total: int | None) -> None:
        if not gpu_total:
            return
        with self.lock:
            while True:
                held = sum((e["memory"] or {}).get("gpu_bytes") or 0 for e in self.entries.values())
                idle = sorted((e["last_used"], name) for name, e in self.entries.items()
                              if e["lease"] is None and (e["memory"] or {}).get("gpu_bytes"))
                if held <= gpu_total * self.gpu_share or not idle:
                    return
                self._kill(idle[0][1], "the residents' GPU memory exceeded its budget")

    def _loop(self) -> None:
        import ray

        last_memory = 0.0
        while not self._stop:
            time.sleep(TICK_S)
            now, mono = time.time(), time.monotonic()
            with self.lock:
                for lease_id, lease in list(self.leases.items()):
                    if mono - lease["renewed"] > LEASE_TTL_S:
                        log.warning("lease %s (%s) was not renewed: its command is gone", lease_id, lease["holder"])
                        self.release(lease_id, keep=False)
                for name, e in list(self.entries.items()):
                    if e["lease"] is None and now - e["last_used"] >= self.idle_s:
                        self._kill(name, f"idle for {self.idle_s:g}s")
            try:
                self._unblock()
            except Exception as exc:  # noqa: BLE001 - the registry's loop outlives any one look at Ray
                log.debug("looking for actors waiting for GPUs failed: %s", exc)
            if mono - last_memory >= MEMORY_EVERY_S:
                last_memory = mono
                self._measure(ray)
                self._budget()
            with self.lock:
                if not self.entries and not self.leases and self.empty_since is not None \
                        and mono - self.empty_since >= EMPTY_LINGER_S:
                    self._stop = True
        with contextlib.suppress(Exception):
            ray.actor.exit_actor()

    def _measure(self, ray: Any) -> None:
        with self.lock:
            items = [(name, e["handle"]) for name, e in self.entries.items()]
        refs = {name: h.memory.remote() for name, h in items}
        for name, ref in refs.items():
            try:
                mem = ray.get(ref, timeout=5)
            except Exception:  # noqa: BLE001 - busy or gone: the last figure stands
                continue
            with self.lock:
                if name in self.entries:
                    self.entries[name]["memory"] = mem

    # ---------------------------------------------------------------- what it holds
    def status(self, fresh: bool = True) -> dict[str, Any]:
        """Every resident (key in words, memory, last use, whether a command holds it) and the budget."""
        import ray

        if fresh:
            self._measure(ray)
        with self.lock:
            return {"residents": [self._public(n, e) for n, e in sorted(self.entries.items(),
                                                                          key=lambda ne: -ne[1]["last_used"])],
                    "leases": len(self.leases), "idle_timeout_s": self.idle_s, "memory_budget_bytes": self.memory_bytes,
                    "registry_pid": os.getpid()}

    def count(self) -> int:
        with self.lock:
            return len(self.entries)

    def ping(self) -> bool:
        return not self._stop

    @staticmethod
    def _public(name: str, e: dict[str, Any]) -> dict[str, Any]:
        mem = e.get("memory") or {}
        return {"name": name, "key": e["key"], "model": e["words"], "gpus": e["gpus"], "created": e["created"],
                "last_used": e["last_used"], "in_use": e["lease"] is not None, "uses": e["uses"],
                "pid": mem.get("pid"), "rss_bytes": mem.get("rss_bytes"), "gpu_bytes": mem.get("gpu_bytes"),
                "host": mem.get("host")}


# --------------------------------------------------------------------------- the client side
def registry(ray: Any, create: bool = True) -> Any | None:
    """The cluster's registry actor, answering; started when there is none and ``create`` (else None)."""
    for attempt in range(10):
        handle = existing(ray)
        if handle is None:
            if not create:
                return None
            handle = start(ray)
        try:
            if ray.get(handle.ping.remote(), timeout=60):
                return handle
        except Exception as exc:  # noqa: BLE001 - one that stopped itself just now: its name goes with it
            log.debug("resident registry unavailable (%s); attempt %d", exc, attempt + 1)
        if not create:
            return None
        time.sleep(0.2)
    from ..errors import InfrastructureError

    raise InfrastructureError("the resident engines' registry did not answer (auditkit-ray down stops the cluster; "
                              "execution.resident: false runs without resident engines)")


def existing(ray: Any) -> Any | None:
    """The registry's handle if one is registered (it may be stopping), else None; asks nothing of it."""
    try:
        return ray.get_actor(REGISTRY, namespace=NAMESPACE)
    except ValueError:
        return None


def start(ray: Any) -> Any:
    """A handle to the registry, starting it (calls made on the handle wait for it to be up)."""
    memory_bytes, share = memory_budget()
    # detached: it outlives the command that started it (on a private cluster, that command's end ends the
    # cluster and it with it); get_if_exists: two commands starting it at once get the same one
    return ray.remote(Registry).options(name=REGISTRY, namespace=NAMESPACE, num_cpus=0, max_concurrency=32,
                                        get_if_exists=True, lifetime="detached").remote(
        idle_timeout_s(), memory_bytes, share)


def resident_count(ray: Any) -> int:
    """How many residents the cluster holds (0 when there is no registry)."""
    handle = registry(ray, create=False)
    if handle is None:
        return 0
    try:
        return int(ray.get(handle.count.remote(), timeout=10))
    except Exception:  # noqa: BLE001 - stopping: none
        return 0


def status(ray: Any) -> dict[str, Any] | None:
    """The registry's ``status`` (None when no model is resident)."""
    handle = registry(ray, create=False)
    if handle is None:
        return None
    try:
        return ray.get(handle.status.remote(), timeout=30)
    except Exception:  # noqa: BLE001 - stopped meanwhile
        return None


def evict(ray: Any, match: str | None = None) -> list[dict[str, Any]]:
    handle = registry(ray, create=False)
    if handle is None:
        return []
    return ray.get(handle.evict.remote(match), timeout=60)
