"""Run a failing evaluation in a fresh driver joined to a cluster, keep the
error (as a notebook would), and print the cluster's free GPUs while it is
held. Usage: hold_failed_run.py ADDRESS CONFIG REPORT.json"""

import json
import sys
import time

import ray

from auditkit_ray.api import evaluate
from auditkit_ray.config import load_run_spec

ray.init(address=sys.argv[1], log_to_driver=False)
total = ray.cluster_resources().get("GPU", 0)
held = None
out = sys.argv[3]
try:
    evaluate(load_run_spec(sys.argv[2]), progress=False)
except Exception as exc:  # noqa: BLE001 - kept on purpose
    held = exc
deadline = time.time() + 20
while time.time() < deadline and ray.available_resources().get("GPU", 0) < total:
    time.sleep(0.2)
with open(out, "w") as f:  # not stdout: Ray may print its own lines there
    json.dump({"error": str(held), "free_gpus": ray.available_resources().get("GPU", 0), "total_gpus": total}, f)
