"""``arguments: bfcl`` through the real console script (issue 51): an agent that passes ``[]`` for an optional
array parameter (BFCL's possible answer ``["", [...]]``, as in its simple_python_178, and an optional array of
objects) scores as BFCL scores it, valid, in ``tool_call_match`` and ``argument_correctness`` alike; an empty list
for a required array stays wrong."""

from __future__ import annotations

import json

from console import console

SCHEMA = {"name": "report", "parameters": {"type": "dict", "required": ["company", "years"], "properties": {
    "company": {"type": "string"},
    "details": {"type": "array", "items": {"type": "string"}},
    "filters": {"type": "array", "items": {"type": "dict"}},
    "years": {"type": "array", "items": {"type": "integer"}}}}}
REFERENCE = {"name": "report", "arguments": {"company": ["Acme"], "details": ["", ["revenue", "profit"]],
                                             "filters": ["", [{"field": ["year"]}]], "years": [[2024, 2025]]}}
#: what the agent passes, per sample, and whether BFCL accepts it
CASES = {
    "empty-details": ({"company": "Acme", "years": [2024, 2025], "details": []}, True),
    "empty-filters": ({"company": "Acme", "years": [2024, 2025], "filters": []}, True),
    "both-empty": ({"company": "Acme", "years": [2024, 2025], "details": [], "filters": []}, True),
    "omitted": ({"company": "Acme", "years": [2024, 2025]}, True),
    "required-empty": ({"company": "Acme", "years": []}, False),
}
AGENT = '''
def step(payload):
    if payload.get("state"):
        return {"output": "done", "done": True, "state": payload["state"]}
    call = {"id": "c0", "name": "report", "arguments": payload["metadata"]["initial_state"]["call"]}
    return {"tool_calls": [call], "tool_results": [{"id": "c0", "content": "ok"}], "state": {"k": 1}}
'''


def test_bfcl_mode_scores_an_empty_list_for_an_optional_array_as_valid_through_the_run_command(tmp_path):
    (tmp_path / "bfcl_agent.py").write_text(AGENT)
    rows = [{"id": sid, "input": "Report on Acme", "tools": [{"type": "function", "function": SCHEMA}],
             "reference_tool_calls": [[REFERENCE]], "initial_state": {"call": call}}
            for sid, (call, _) in CASES.items()]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "run.json").write_text(json.dumps({
        "name": "bfcl-optional", "model": {"type": "agent", "callable": "bfcl_agent:step", "max_turns": 3},
        "dataset": {"path": "cases.jsonl", "input_field": "input", "target_field": None},
        "metrics": [{"name": "tool_call_match", "params": {"arguments": "bfcl"}},
                    {"name": "argument_correctness", "params": {"arguments": "bfcl"}}],
        "execution": {"shard_size": 5, "generation_actors": 1}, "store": {"path": "store"},
        "tracking": {"index": False}}))
    r = console("run", "run.json", "--json", "--quiet", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    from auditkit_ray.api import samples_table

    table = samples_table(result["samples_path"].rsplit("/", 1)[0]).to_pylist()
    got = {row["sample_id"]: {s["name"]: s["value"] for s in json.loads(row["scores"])} for row in table}
    for sid, (_, ok) in CASES.items():
        want = 1.0 if ok else 0.0
        assert got[sid]["tool_call_match.exact_set"] == want, (sid, got[sid])
        assert got[sid]["argument_correctness"] == want, (sid, got[sid])
