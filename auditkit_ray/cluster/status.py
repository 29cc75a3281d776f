"""What a cluster holds, for ``auditkit-ray status`` and ``evict``: the warm local cluster (its address, how
long it has been up and idle, every process it holds with its memory) and the resident engines of any cluster
(``residents``), asked without taking the warm cluster's lease (looking is not using)."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any

log = logging.getLogger(__name__)


def _join(address: str) -> Any:
    """Ray, joined at ``address`` for a look (no lease, no runtime environment, nothing of Ray's on stderr)."""
    import ray

    if not ray.is_initialized():
        from .connect import join

        join(ray, address, logging_level=logging.ERROR, log_to_driver=False)
    return ray


def describe(address: str | None = None, base: Any = None) -> dict[str, Any] | None:
    """The cluster at ``address``, else the warm local cluster (None when none is up): what it is, its
    processes (local only), and its resident engines."""
    from . import residents, warm

    out: dict[str, Any]
    if address is None:
        st = warm.status(base)
        if st is None:
            return None
        os.environ.setdefault("RAY_AUTH_MODE", "token")  # the warm cluster takes its token from ~/.ray
        procs = warm.processes(st.mark)
        activity = warm.activity(base)
        out = {"kind": "warm", "cluster_id": st.cluster_id, "address": st.address, "keeper_pid": st.keeper_pid,
               "up_for_s": round(time.time() - st.started_at, 1), "idle_timeout_s": st.idle_timeout_s,
               "in_use": activity["in_use"], "idle_for_s": activity["idle_for_s"],
               "num_cpus": st.num_cpus, "num_gpus": st.num_gpus,
               "processes": procs, "memory_bytes": sum(p["rss_bytes"] for p in procs)}
        address = st.address
    else:
        out = {"kind": "address", "address": address}
    ray = _join(address)
    if out["kind"] == "address":
        res = ray.cluster_resources()
        out.update({"nodes": sum(1 for n in ray.nodes() if n.get("Alive")), "num_cpus": res.get("CPU"),
                    "num_gpus": res.get("GPU")})
    reg = residents.status(ray)
    out["residents"] = reg["residents"] if reg else []
    #: whether a registry is up (its budget and timeout are the ones it started with; else this command's)
    out["resident_registry"] = reg is not None
    out["resident_idle_timeout_s"] = reg["idle_timeout_s"] if reg else residents.idle_timeout_s()
    out["resident_memory_budget_bytes"] = reg["memory_budget_bytes"] if reg else residents.memory_budget()[0]
    return out


def evict(match: str | None = None, address: str | None = None, base: Any = None) -> list[dict[str, Any]] | None:
    """Evict the resident engines whose model or key contains ``match`` (all when None) from the cluster at
    ``address``, else the warm local cluster (None when none is up)."""
    from . import residents, warm

    if address is None:
        st = warm.status(base)
        if st is None:
            return None
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        address = st.address
    ray = _join(address)
    out = residents.evict(ray, match)
    with contextlib.suppress(Exception):
        ray.shutdown()
    return out
