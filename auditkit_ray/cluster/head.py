"""The Ray side of the warm cluster's keeper, in short-lived processes of their own, so that the keeper itself
imports no Ray and holds next to no memory while it waits (``keeper``):

- ``python -m auditkit_ray.cluster.head start``: start the head node (``compat.start_head_node``) with this
  process's environment (the cluster's mark included), print its address as JSON, and exit: the node's processes
  outlive it;
- ``python -m auditkit_ray.cluster.head lean ADDRESS``: join the cluster, and unless a model is resident, stop
  Ray Data's helper actors that the last pipeline left behind; print how many as JSON."""

from __future__ import annotations

import json
import logging
import sys


def start(num_cpus: float | None, num_gpus: float | None) -> dict:
    from . import compat
    from .local import int_or_float

    node = compat.start_head_node(int_or_float(num_cpus), num_gpus)
    return {"address": node.gcs_address, "node_id": node.node_id}


def lean(address: str) -> dict:
    import ray

    from . import compat
    from .residents import resident_count

    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    try:
        if resident_count(ray) > 0:
            return {"stopped": 0, "residents": True}
        return {"stopped": compat.stop_ray_data_helpers(ray), "residents": False}
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m auditkit_ray.cluster.head")
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("start")
    s.add_argument("--num-cpus", type=float, default=None)
    s.add_argument("--num-gpus", type=float, default=None)
    c = sub.add_parser("lean")
    c.add_argument("address")
    args = ap.parse_args(argv)
    out = start(args.num_cpus, args.num_gpus) if args.what == "start" else lean(args.address)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
