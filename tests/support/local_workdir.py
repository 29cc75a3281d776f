"""Run a small evaluation on a local cluster this process starts, from a
working directory that holds a custom metric (argv[1]); prints JSON."""

import json
import os
import sys

sys.path.insert(0, os.getcwd())  # as the CLI does, for the driver's own imports

from auditkit_ray.api import evaluate  # noqa: E402
from auditkit_ray.cluster.connect import init_ray  # noqa: E402
from auditkit_ray.config.models import ExecutionSpec  # noqa: E402

before = {k: os.environ.get(k) for k in ("PYTHONPATH", "AUDITKIT_RAY_WORKDIR")}
ray = init_ray(None, ExecutionSpec(num_cpus=2))
after = {k: os.environ.get(k) for k in ("PYTHONPATH", "AUDITKIT_RAY_WORKDIR")}


@ray.remote
def worker_view():
    ctx = ray.get_runtime_context()
    return {"runtime_env": dict(ctx.runtime_env), "workdir": os.environ.get("AUDITKIT_RAY_WORKDIR"),
            "cwd_on_path": os.getcwd() in sys.path}


res = evaluate({
    "name": "local-workdir",
    "model": {"type": "echo", "field": "target"},
    "dataset": {"path": "data.jsonl", "input_field": "question", "target_field": "answer"},
    "metrics": ["shouty_metric:Shouty"],
    "store": {"path": "store"},
    "tracking": {"index": False},
}, progress=False)
print(json.dumps({"mean": res.metrics["shouty"].mean, "n": res.metrics["shouty"].n,
                  "driver_env_restored": before == after,
                  "worker": ray.get(worker_view.remote())}))
sys.stdout.flush()
