"""An agent evaluation through the Ray pipeline: the scripted agent (a Python
callable) driven multi-turn by the agent backend, scored by tool-call
matching and outcome oracles in the scoring pool."""

import json
from pathlib import Path

import pytest

from auditkit_ray.api import evaluate, samples_table

pytestmark = pytest.mark.usefixtures("ray_cluster")
TOOLS = Path(__file__).resolve().parents[2] / "examples" / "agents" / "tools.jsonl"


def test_scripted_agent_episodes_are_recorded_and_the_verified_outcome_is_the_headline(make_spec):
    spec = make_spec(
        data=TOOLS,
        model={"type": "agent", "callable": "scripted_agent:step", "max_turns": 6},
        dataset={"path": str(TOOLS), "input_field": "input", "target_field": "target"},
        prompt={"template": "{{ input }}"},
        metrics=["tool_call_match", "parallel_calls", "agent_outcome"],
    )
    res = evaluate(spec)
    n = sum(1 for _ in open(TOOLS))
    assert res.perf.samples == n and res.error_count == 0
    assert res.metrics["tool_call_match.f1"].mean == 1.0  # the scripted agent follows the reference
    assert res.metrics["agent_outcome"].n >= 1 and res.metrics["agent_outcome"].mean == 1.0
    rows = samples_table(res).to_pylist()
    calls = {r["sample_id"]: json.loads(r["tool_calls"]) for r in rows}
    assert any(len(turns) >= 2 for turns in calls.values() if turns), "a sequential case spans turns"
    assert any(len(t) >= 2 for turns in calls.values() if turns for t in turns), (
        "a parallel case batches calls in one turn"
    )
