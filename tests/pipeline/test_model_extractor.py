"""The model-based answer extractor: a judge backend (the OpenAI-compatible
test server) reads each output and returns the answer; the raw output stays
as it was and both can be scored."""

import json
import re

import pytest

pytest.importorskip("aiohttp", reason="the api backend needs the 'api' extra")

from auditkit_ray.api import evaluate, samples_table  # noqa: E402
from auditkit_ray.testing import OpenAIServer, ScriptedPolicy  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_cluster")


def extract(body: dict) -> str:
    text = body["messages"][-1]["content"]
    nums = re.findall(r"\d+", text.split("Response:")[-1])
    return nums[-1] if nums else "none"


def test_model_extractor_feeds_metrics_and_keeps_the_raw_output(make_spec, tmp_path):
    with OpenAIServer(ScriptedPolicy(extract)) as server:
        spec = make_spec(
            model={"type": "simulated", "output": "target", "fixed_cost_s": 0.0},
            annotators=[{"type": "model", "name": "answer",
                         "judge": {"type": "api", "base_url": server.base_url, "model": "extractor",
                                   "cache_path": str(tmp_path / "cache.sqlite")},
                         "prompt": "Response: The result is {output}, I am sure.\nAnswer:"}],
            metrics=["exact_match", {"name": "exact_match", "on": "answer"}],
        )
        res = evaluate(spec)
        assert server.requests == 40
    assert res.metrics["exact_match@answer"].mean == 1.0 and res.metrics["exact_match@answer"].n == 40
    rows = samples_table(res).to_pylist()
    assert all(json.loads(r["annotations"])["answer"] == r["text"] for r in rows)
    assert all(r["raw_text"] == r["text"] for r in rows)


def test_unreachable_extractor_leaves_the_answer_unknown_not_zero(make_spec, tmp_path):
    spec = make_spec(
        model={"type": "simulated", "output": "target", "fixed_cost_s": 0.0},
        annotators=[{"type": "model", "name": "answer",
                     "judge": {"type": "api", "base_url": "http://127.0.0.1:9", "model": "x", "max_retries": 0,
                               "cache_path": str(tmp_path / "cache.sqlite")}}],
        metrics=["exact_match", {"name": "exact_match", "on": "answer"}],
        dataset={"limit": 8},
    )
    res = evaluate(spec)
    m = res.metrics["exact_match@answer"]
    assert m.n == 0 and m.counts["unknown"] == 8 and m.mean is None
    assert res.metrics["exact_match"].mean == 1.0
