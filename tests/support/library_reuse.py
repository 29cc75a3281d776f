"""Two ``ak.evaluate`` calls of one model in one Python process, on the private local cluster the library
starts (argv: the model folder, a data file, a work folder); prints JSON: each run's generation-actor pids (from
its per-sample table) and its outputs, and the residents after the second call."""

import json
import sys

import auditkit_ray as ak
from auditkit_ray.cluster import residents

model, data, work = sys.argv[1:4]


def run(store: str):
    res = ak.evaluate({
        "name": store, "model": {"type": "hf", "path": model, "batch_size": 4},
        "dataset": {"path": data, "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"}, "generation": {"max_new_tokens": 4},
        "metrics": ["exact_match"], "execution": {"shard_size": 4}, "store": {"path": f"{work}/{store}"},
        "tracking": {"index": False}})
    rows = ak.samples_table(res).select(["sample_id", "text", "worker"]).to_pylist()
    return {"pids": sorted({json.loads(r["worker"])["pid"] for r in rows}),
            "texts": sorted((r["sample_id"], r["text"]) for r in rows), "generated": res.perf.generated}


first, second = run("first"), run("second")
import ray  # noqa: E402

st = residents.status(ray)
print(json.dumps({"first": first, "second": second,
                  "residents": [{"uses": r["uses"], "pid": r["pid"]} for r in (st or {}).get("residents", [])]}))
sys.stdout.flush()
