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
