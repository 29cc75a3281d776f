"""Start a local cluster the way the CLI does, run a task, then call the exit
hook as the interpreter's exit would; prints JSON: whether this process is
still connected to Ray and which of the cluster's processes are left."""

import json
import sys

import psutil

from auditkit_ray.cluster import local as driver
from auditkit_ray.cluster.connect import init_ray
from auditkit_ray.config.models import ExecutionSpec

ray = init_ray(None, ExecutionSpec(num_cpus=1))
import ray._private.worker as rw  # noqa: E402

pids = [info.process.pid for infos in rw._global_node.all_processes.values() for info in infos]


@ray.remote
def f(x):
    return x + 1


task = ray.get(f.remote(1))
driver.release_local_cluster()


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


print(json.dumps({"task": task, "processes": len(pids), "connected": ray.is_initialized(),
                  "left": [p for p in pids if alive(p)]}))
sys.stdout.flush()
