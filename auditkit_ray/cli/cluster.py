"""``up`` / ``down``: the warm local Ray cluster that consecutive commands on this machine share."""

from __future__ import annotations

import argparse
import json

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
        emit(_describe(c, "started" if c["started"] else "already up"))
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    c = api.cluster_down()
    if args.json:
        emit(json.dumps({"stopped": c}, indent=2))
    else:
        emit(f"stopped the local Ray cluster {c['cluster_id']}" if c else "no warm local Ray cluster is up")
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="start the warm local Ray cluster that later commands on this machine reuse",
                       description="Start the local Ray cluster that commands without --address share (the first "
                                   "such command starts it by itself). It stops after an idle timeout, or with "
                                   "`auditkit-ray down`. AUDITKIT_RAY_WARM=0 gives each command a private cluster.")
    p.add_argument("--idle-timeout", default=None,
                   help="stop after this long without a run: 600, 90s, 10m, 2h (default: AUDITKIT_RAY_IDLE_TIMEOUT, "
                        "else 10m)")
    p.add_argument("--num-cpus", type=float, default=None, help="CPUs of the cluster (default: this machine's)")
    p.add_argument("--num-gpus", type=float, default=None, help="GPUs of the cluster (default: this machine's)")
    p.add_argument("--json", action="store_true", help="print the cluster as JSON")
    p.set_defaults(handler=cmd_up)
    q = sub.add_parser("down", help="stop the warm local Ray cluster",
                       description="Stop the warm local Ray cluster (runs using it stop; run them again to resume).")
    q.add_argument("--json", action="store_true", help="print what was stopped as JSON")
    q.set_defaults(handler=cmd_down)
