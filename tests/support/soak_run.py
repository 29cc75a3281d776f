"""Soak run in its own process: N samples in 5 consecutive runs of N/5
through the echo backend with every deterministic metric (each run its own
dataset and store, so nothing is reused); prints JSON with peak RSS, open
file descriptors and the cluster's free CPUs after each run."""

import json
import os
import random
import resource
import sys
import time


def main(n: int, work: str) -> None:
    import ray

    from auditkit_ray.api import evaluate

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    metrics = ["exact_match", "token_f1", "contains", "non_degenerate", "output_length", "regex_match", "numeric_match",
               "json_valid", "evidence_recall", "freshness", "stale_hit_rate", "access_control_compliance",
               "unauthorized_hit_rate", "citation_validity", "numeric_correctness", "abstention"]
    out = {}
    for label, size in [(f"run{k}", n // 5) for k in range(1, 6)]:
        data = os.path.join(work, f"{label}.jsonl")
        rng = random.Random(size)
        with open(data, "w") as f:
            for i in range(size):
                f.write(
                    json.dumps(
                        {
                            "id": f"{label}{i}",
                            "input": f"answer {rng.randint(0, 999)} now",
                            "target": f"answer {i % 1000}",
                        }
                    )
                    + "\n"
                )
        spec = {
            "name": f"soak-{label}",
            "model": {"type": "echo", "batch_size": 1000},
            "dataset": {"path": data},
            "metrics": metrics,
            "execution": {"shard_size": 2000},
            "store": {"path": os.path.join(work, f"store-{label}")},
            "tracking": {"index": False},
        }
        t0 = time.time()
        res = evaluate(spec)
        time.sleep(2)
        out[label] = {
            "n": res.metrics["exact_match"].total,
            "wall_s": round(time.time() - t0, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "open_fds": len(os.listdir("/proc/self/fd")),
            "free_cpus": ray.available_resources().get("CPU", 0),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
