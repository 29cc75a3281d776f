"""Agent metrics and oracles are registered with direction, family and a
one-line description; the example dataset is complete and in sync; the
agent modules stay light at import."""

import json
import subprocess
import sys

import pytest

from auditkit_ray.core.metric import Direction, metric_info
from auditkit_ray.core.registry import BUILTIN, build_metric, resolve_metric

EXPECTED = {
    "tool_call_match": ("maximize", "agent"), "argument_correctness": ("maximize", "agent"),
    "tool_chain_order": ("maximize", "agent"), "parallel_calls": ("maximize", "agent"),
    "redundancy_ratio": ("minimize", "agent"), "loop_frequency": ("minimize", "agent"),
    "tool_call_validity": ("maximize", "agent"), "permission_violations": ("minimize", "agent"),
    "irrelevance": ("maximize", "agent"),
    "agent_outcome": ("maximize", "oracle"), "final_state": ("maximize", "oracle"),
    "artifact_check": ("maximize", "oracle"), "answer_check": ("maximize", "oracle"),
    "custom_predicate": ("maximize", "oracle"), "judge_assertion": ("maximize", "oracle-diagnostic"),
    "oracle": ("maximize", "oracle"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_agent_metric_is_registered_with_direction_family_and_description(name):
    assert name in BUILTIN
    info = metric_info(resolve_metric(name))
    assert (info["direction"], info["family"]) == EXPECTED[name]
    assert info["name"] == name and info["description"] and "\n" not in info["description"]


def test_every_parameterless_agent_metric_builds_and_has_a_fingerprintable_identity():
    from auditkit_ray.core.fingerprint import fingerprint

    for name in EXPECTED:
        if name in ("custom_predicate", "oracle"):
            continue
        m = build_metric(name)
        assert len(fingerprint(m.identity())) == 64
        assert type(m).direction in (Direction.MAXIMIZE, Direction.MINIMIZE)


def test_example_dataset_covers_the_categories_and_matches_its_build_script(agents_examples, tmp_path, monkeypatch):
    import build_dataset

    from auditkit_ray.agents.dataset import load_tool_samples
    from auditkit_ray.agents.schemas import to_json_schema

    jsonschema = pytest.importorskip("jsonschema")
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) for r in build_dataset.rows()]
    assert (agents_examples / "tools.jsonl").read_text().splitlines() == lines, "run examples/agents/build_dataset.py"
    schemas = json.loads((agents_examples / "tool_schemas.json").read_text())
    assert schemas == list(build_dataset.TOOLS.values())
    samples = load_tool_samples(agents_examples / "tools.jsonl")
    cats = {s.metadata["category"] for s in samples}
    assert {"simple", "multiple", "parallel", "parallel_multiple", "irrelevance"} <= cats
    for s in samples:
        for t in s.tools:
            jsonschema.validators.validator_for({}).check_schema(to_json_schema(t["function"]["parameters"]))
    # the generic reader keeps agent fields in metadata: metrics still find them
    from auditkit_ray import Sample
    from auditkit_ray.agents.trace import reference_routes
    raw = json.loads(lines[4])
    generic = Sample(
        id=raw["id"], input=raw["input"], metadata={k: v for k, v in raw.items() if k not in ("id", "input")}
    )
    assert [[c.name for c in t] for t in reference_routes(generic)[0]] == [["search_flights"], ["book_flight"]]


def test_agent_modules_import_no_scipy_jsonschema_or_heavy_sdk():
    code = (
        "import sys, auditkit_ray.agents, auditkit_ray.agents.trace, auditkit_ray.agents.matching, "
        "auditkit_ray.agents.structure, auditkit_ray.agents.bfcl, auditkit_ray.agents.schemas, "
        "auditkit_ray.metrics.agent, auditkit_ray.oracles, auditkit_ray.oracles.builtin, auditkit_ray.backends.agent;"
        "print(','.join(m for m in ['scipy', 'jsonschema', 'numpy', 'ray', 'torch', 'pyarrow'] if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
