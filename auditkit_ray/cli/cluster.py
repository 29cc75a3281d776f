"""``up`` / ``down`` / ``status`` / ``evict``: the warm local Ray cluster that the commands on this machine share,
and the models that stay loaded in it (resident engines)."""

from __future__ import annotations

import argparse
import json
import time

from .. import api
from ..errors import EXIT_OK
from .output import emit


def _describe(c: dict, verb: str) -> str:
    gpus = f", {c['num_gpus']:g} GPUs" if c.get("num_gpus") else ""
    cpus = f", {c['num_cpus']:g} CPUs" if c.get("num_cpus") else ""
    return (f"local Ray cluster {c['cluster_id']} {verb} at {c['address']} (keeper pid {c['keeper_pid']}{cpus}{gpus}; "
            f"stops after {c['idle_timeout_s']:g}s without a run, or with `auditkit-ray down`)")


def cmd_up(args: argparse.Namespace) -> int:
    idle = api.parse_duration(args.idle_timeout) if args.idle_timeout else None
    c = api.cluster_up(idle_timeout_s=idle, num_cpus=args.num_cpus, num_gpus=args.num_gpus)
    if args.json:
        emit(json.dumps(c, indent=2))
    else:
        emit(_describe(c, "started" if c["started"] else "already up, kept"))
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    c = api.cluster_down()
    if args.json:
        emit(json.dumps({"stopped": c}, indent=2))
    else:
        emit(f"stopped the local Ray cluster {c['cluster_id']}" if c else "no warm local Ray cluster is up")
    return EXIT_OK


def _mb(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def format_status(c: dict) -> str:
    lines = []
    if c["kind"] == "warm":
        use = "in use" if c["in_use"] else f"idle for {_ago(c['idle_for_s'])}"
        lines.append(f"warm local Ray cluster {c['cluster_id']} at {c['address']}: up {_ago(c['up_for_s'])}, {use} "
                     f"(stops after {_ago(c['idle_timeout_s'])} idle); {len(c['processes'])} processes, "
                     f"{_mb(c['memory_bytes'])} resident")
        for p in c["processes"]:
            lines.append(f"  {p['pid']:>8}  {_mb(p['rss_bytes']):>10}  {p['name']}")
    else:
        lines.append(f"Ray cluster at {c['address']}: {c.get('nodes')} nodes, {c.get('num_cpus') or 0:g} CPUs, "
                     f"{c.get('num_gpus') or 0:g} GPUs")
    res = c["residents"]
    budget = c.get("resident_memory_budget_bytes")
    head = (f"resident models: {len(res)} (each freed after {_ago(c['resident_idle_timeout_s'])} unused"
            f"{f', or beyond {_mb(budget)} in all' if budget else ''}; `auditkit-ray evict` frees them now)")
    lines.append(head if res else "resident models: none")
    now = time.time()
    for r in res:
        state = "in use" if r["in_use"] else f"last used {_ago(now - r['last_used'])} ago"
        gpu = f", GPU {_mb(r['gpu_bytes'])}" if r.get("gpu_bytes") else ""
        lines.append(f"  {r['model']}  {_mb(r.get('rss_bytes'))}{gpu}  {state}, {r['uses']} run"
                     f"{'s' if r['uses'] != 1 else ''}  pid {r.get('pid') or '?'}  key {r['key'][:12]}")
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    c = api.cluster_status(address=args.address)
    if args.json:
        emit(json.dumps(c, indent=2, default=str))
    elif c is None:
        emit("no warm local Ray cluster is up (the next command starts one; `auditkit-ray up` starts it now)")
    else:
        emit(format_status(c))
    return EXIT_OK


def cmd_evict(args: argparse.Namespace) -> int:
    out = api.evict(None if args.all else args.model, address=args.address)
    if args.json:
        emit(json.dumps({"evicted": out}, indent=2, default=str))
    elif out is None:
        emit("no warm local Ray cluster is up")
    elif not out:
        emit("no resident model" + (f" matches {args.model!r}" if args.model and not args.all else ""))
    else:
        for r in out:
            emit(f"{r['model']}  key {r['key'][:12]}: {r['state']}")
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="start the warm local Ray cluster that later commands on this machine reuse",
                       description="Start the local Ray cluster that commands without --address share, from any "
                                   "folder and shell (the first such command starts it by itself). It stops after "
                                   "an idle timeout, or with `auditkit-ray down`; over a cluster that is up, `up` "
                                   "keeps it. AUDITKIT_RAY_WARM=0 gives each command a private cluster.")
    p.add_argument("--idle-timeout", default=None,
                   help="stop after this long without a run: 600, 90s, 10m, 2h (default: AUDITKIT_RAY_IDLE_TIMEOUT, "
                        "else 10m)")
    p.add_argument("--num-cpus", type=float, default=None, help="CPUs of the cluster (default: this machine's)")
    p.add_argument("--num-gpus", type=float, default=None, help="GPUs of the cluster (default: this machine's)")
    p.add_argument("--json", action="store_true", help="print the cluster as JSON")
    p.set_defaults(handler=cmd_up)
    q = sub.add_parser("down", help="stop the warm local Ray cluster and the models loaded in it",
                       description="Stop the warm local Ray cluster. Commands using it are interrupted first, as "
                                   "Ctrl-C would (exit 130; run them again to resume).")
    q.add_argument("--json", action="store_true", help="print what was stopped as JSON")
    q.set_defaults(handler=cmd_down)
    s = sub.add_parser("status", help="the warm local cluster, its processes' memory, and the resident models",
                       description="What the warm local Ray cluster holds: its address, uptime and idle time, every "
                                   "process with its memory, and each resident model (the model in words, its "
                                   "memory, its last use). With --address, the resident models of that cluster.")
    s.add_argument("--address", default=None, help="a Ray cluster's address (default: the warm local cluster)")
    s.add_argument("--json", action="store_true", help="print it as JSON")
    s.set_defaults(handler=cmd_status)
    e = sub.add_parser("evict", help="free resident models now",
                       description="Free the resident models whose description or key contains MODEL (with --all, "
                                   "every one). One a run holds is freed when that run is done.")
    e.add_argument("model", nargs="?", default=None, help="part of a resident model's description or key")
    e.add_argument("--all", action="store_true", help="every resident model")
    e.add_argument("--address", default=None, help="a Ray cluster's address (default: the warm local cluster)")
    e.add_argument("--json", action="store_true", help="print what was freed as JSON")
    e.set_defaults(handler=cmd_evict)


