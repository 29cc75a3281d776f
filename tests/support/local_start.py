"""Start a local cluster the way the CLI does and report what it started;
prints JSON: the cluster's process types, whether Ray's Node class is as it
was before, a task's result, whether the GCS lists this node's raylet (and
not a made-up one). The task prints a line of its own, which reaches this
process's output only if Ray forwards worker output."""

import json
import sys

from ray._private.node import Node

from auditkit_ray.cluster import compat as local_start
from auditkit_ray.cluster import local as driver
from auditkit_ray.cluster.connect import init_ray
from auditkit_ray.config.models import ExecutionSpec

before = {n: Node.__dict__[n] for n in local_start.PATCHED_METHODS}  # importing patches nothing; init_ray does

ray = init_ray(None, ExecutionSpec(num_cpus=1))
import ray._private.worker as rw  # noqa: E402

node = rw._global_node


@ray.remote
def f(x):
    print("printed by the worker", flush=True)
    return x + 1


task = ray.get(f.remote(1))
gcs = node.get_gcs_client()
print(json.dumps({"processes": sorted(node.all_processes),
                  "restored": all(Node.__dict__[n] is v for n, v in before.items()),
                  "task": task,
                  "registered": local_start.raylet_registered(gcs, node._node_id),
                  "other_registered": local_start.raylet_registered(gcs, "ab" * 28)}))
sys.stdout.flush()
if driver.log_to_driver():
    import time

    time.sleep(2)  # Ray's log monitor forwards worker output about once a second
