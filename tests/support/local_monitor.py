"""Start a local cluster the way the CLI does, stop its autoscaler monitor as
the exit hook would, and check that the cluster still works; prints JSON."""

import json
import sys

from auditkit_ray.cluster import compat as ray_compat
from auditkit_ray.cluster.connect import init_ray
from auditkit_ray.config.models import ExecutionSpec

ray = init_ray(None, ExecutionSpec(num_cpus=1))
import ray._private.worker as rw  # noqa: E402

monitor = rw._global_node.all_processes["monitor"][0].process
before = monitor.poll() is None
ray_compat.stop_local_monitor()
after = monitor.poll() is None


@ray.remote
def f(x):
    return x + 1


print(json.dumps({"monitor_alive_before": before, "monitor_alive_after": after, "task": ray.get(f.remote(1))}))
sys.stdout.flush()
