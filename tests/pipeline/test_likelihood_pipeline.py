"""Log-likelihood and multiple-choice requests through the pipeline with the
hf backend on the tiny model, checked against the backend called directly."""

import json

import pytest

from auditkit_ray.api import evaluate, samples_table

pytestmark = pytest.mark.usefixtures("ray_cluster")


@pytest.fixture
def mc_data(tmp_path):
    p = tmp_path / "mc.jsonl"
    rows = [{"id": f"m{i}", "question": f"What is {i} plus {i}? Answer:", "choices": [str(2 * i), str(2 * i + 1), "no"],
             "answer": str(2 * i)} for i in range(10)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_choices_are_scored_by_loglikelihood_and_match_the_backend(make_spec, tiny_model, mc_data):
    from auditkit_ray.backends.hf import HFBackend
    from auditkit_ray.backends.hf import HFSettings as HFSpec
    from auditkit_ray.config.models import GenerationSettings

    spec = make_spec(
        data=mc_data, model={"type": "hf", "path": str(tiny_model), "batch_size": 4},
        dataset={"path": str(mc_data), "input_field": "question", "target_field": "answer", "choices_field": "choices"},
        prompt={"template": "{{ question }}", "request": "choices"},
        metrics=["mc_accuracy", "mc_accuracy_norm", "loglikelihood"],
    )
    res = evaluate(spec)
    assert res.metrics["mc_accuracy"].n == 10 and res.metrics["loglikelihood"].n == 30
    rows = samples_table(res).to_pylist()
    b = HFBackend(HFSpec(type="hf", path=str(tiny_model), device="cpu", batch_size=1), GenerationSettings())
    b.load()
    hits = 0
    for i in range(10):
        lls = b.loglikelihood([(f"What is {i} plus {i}? Answer:", " " + c) for c in (str(2 * i), str(2 * i + 1), "no")])
        got = sorted((r for r in rows if r["sample_id"] == f"m{i}"), key=lambda r: r["choice"])
        stored = [[s for s in json.loads(r["scores"]) if s["name"] == "loglikelihood"][0]["value"] for r in got]
        for k in range(3):
            assert abs(stored[k] - lls[k][0]) < 1e-3, (
                i,
                k,
                stored[k],
                lls[k][0],
            )  # batch padding may move the last digits
        hits += max(range(3), key=lambda k: (stored[k], -k)) == 0  # argmax of what the pipeline measured
    assert res.metrics["mc_accuracy"].mean == hits / 10


def test_word_perplexity_of_targets(make_spec, tiny_model):
    spec = make_spec(
        model={"type": "hf", "path": str(tiny_model), "batch_size": 8},
        prompt={"template": "{{ question }} Answer:", "request": "loglikelihood"},
        metrics=["word_perplexity", "loglikelihood"],
    )
    res = evaluate(spec)
    wp = res.metrics["word_perplexity"]
    assert wp.aggregation == "corpus" and wp.n == 40 and wp.mean > 1.0
    assert res.metrics["loglikelihood"].mean < 0
