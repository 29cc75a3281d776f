"""Answers a user can trust (issue 30): a sample without its input field fails
the run while it is planned, naming the sample, whatever the template."""

import json

import pytest
import yaml

from auditkit_ray.cli import main

pytestmark = pytest.mark.usefixtures("ray_cluster")


@pytest.mark.parametrize("template", ["{{ input }}", None], ids=["input-placeholder", "default-template"])
def test_a_sample_missing_its_input_field_fails_the_run_before_any_generation(template, tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    rows = [{"id": f"q{i:02d}", "question": f"What is {i} plus 1?", "answer": str(i + 1)} for i in range(20)]
    del rows[11]["question"]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    store = tmp_path / "store"
    cfg = {"name": "missing", "model": {"type": "echo"}, "metrics": ["exact_match"],
           "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
           "execution": {"shard_size": 4}, "store": {"path": str(store)}, "tracking": {"index": False}}
    if template is not None:
        cfg["prompt"] = {"template": template}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert main(["run", str(tmp_path / "run.yaml"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "sample 'q11'" in err and "'question'" in err, err
    assert "Traceback" not in err
    # nothing was generated: not one shard of generations or scores reached the store
    assert not [p for p in store.rglob("*.parquet")], sorted(store.rglob("*"))


def test_a_samples_own_token_limit_out_of_range_fails_the_run_naming_the_sample(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    rows = [{"id": f"q{i}", "question": "x", "answer": "x", "n": 1 + i} for i in range(6)]
    rows[4]["n"] = 99  # over generation.max_new_tokens
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = {"name": "caps", "model": {"type": "echo"}, "metrics": ["exact_match"],
           "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
           "generation": {"max_new_tokens": 16, "max_new_tokens_field": "n"},
           "store": {"path": str(tmp_path / "store")}, "tracking": {"index": False}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert main(["run", str(tmp_path / "run.yaml"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "sample 'q4'" in err and "'n'" in err and "99" in err and "Traceback" not in err, err


def _targets_run(tmp_path, answers: dict[str, str], **over) -> dict:
    data = tmp_path / "wp.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i:02d}", "question": f"What is {i} plus 1?",
                                        "answer": answers.get(f"q{i:02d}", f"What is {i} plus 1?")}) + "\n"
                            for i in range(30)), encoding="utf-8")
    return {"name": "wpcopy", "model": {"type": "simulated", "output": "prompt", "fixed_cost_s": 0.0,
                                        "per_token_s": 0.0, "gpu": False},
            "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
            "metrics": ["exact_match"], "execution": {"shard_size": 3}, "store": {"path": str(tmp_path / "store")},
            "tracking": {"index": False}, **over}


def test_changing_a_target_rescoring_reuses_every_generation(tmp_path):
    # the simulated model answers with its prompt, so exact_match is 1 where the answer is the question
    from auditkit_ray.api import evaluate, samples_table

    first = evaluate(_targets_run(tmp_path, {}))
    assert first.perf.generated == 30 and first.metrics["exact_match"].mean == 1.0
    fixed = evaluate(_targets_run(tmp_path, {"q07": "8"}))  # one target fixed
    assert fixed.generation_fingerprint == first.generation_fingerprint
    assert fixed.fingerprint != first.fingerprint and fixed.dataset_fingerprint != first.dataset_fingerprint
    assert fixed.perf.generated == 0, "every output came from the store"
    scores = {r["sample_id"]: json.loads(r["scores"])[0]["value"] for r in samples_table(fixed).to_pylist()}
    assert scores["q07"] == 0.0 and sum(scores.values()) == 29.0
    # a template that shows the target to the model, or a backend that reads it, generates again
    from auditkit_ray.api import as_run_spec
    from auditkit_ray.pipeline.identity import generation_fingerprint

    def gen_fp(answers: dict, **over) -> str:
        spec = as_run_spec(_targets_run(tmp_path / str(len(answers) + len(over)), answers, **over))
        return generation_fingerprint(spec)

    (tmp_path / "1").mkdir(), (tmp_path / "2").mkdir()
    assert gen_fp({"q07": "8"}) == gen_fp({"q07": "9"})
    shown = {"prompt": {"template": "{{ question }} (answer: {{ answer }})"}}
    assert gen_fp({"q07": "8"}, **shown) != gen_fp({"q07": "9"}, **shown)
    reads = {"model": {"type": "simulated", "output": "target", "gpu": False}}
    assert gen_fp({"q07": "8"}, **reads) != gen_fp({"q07": "9"}, **reads)
