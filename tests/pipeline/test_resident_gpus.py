"""Resident engines and GPUs (issue 50): idle residents hold the GPUs their actors asked for, and give them up,
least recently used first, when a new run's actors need them; a resident in use is never taken. On the pipeline
tests' local Ray with 4 logical GPUs."""

import pytest
from resident_engines import resident_list, residents

from auditkit_ray.api import evaluate

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _model(output: str) -> dict:
    return {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": output, "num_gpus": 1.0}


def test_idle_residents_give_their_gpus_to_a_new_runs_actors_least_recently_used_first(make_spec, ray_cluster):
    with residents(True):
        first = evaluate(make_spec("all-gpus", model=_model("target"),
                                   execution={"shard_size": 2, "generation_actors": 4}))
        held = resident_list()
        assert len(held) == 4 and ray_cluster.available_resources().get("GPU", 0) == 0, held
        other = evaluate(make_spec("another-model", model=_model("prompt"),
                                   execution={"shard_size": 2, "generation_actors": 2}))
        after = resident_list()
        assert first.metrics["exact_match"].n == other.metrics["exact_match"].n == 40
        # two of the first model's idle actors made room for the second model's two; the other two stay loaded
        by_model = {}
        for r in after:
            by_model.setdefault(r["key"], []).append(r["name"])
        assert sorted(len(v) for v in by_model.values()) == [2, 2], after
        kept = {r["name"] for r in held} & {r["name"] for r in after}
        assert len(kept) == 2, (held, after)
    assert resident_list() == []
