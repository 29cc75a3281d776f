"""The TextModel the scoring stage gives model-based annotators: a judge
backend behind ``complete(prompts, ids)``."""

import pytest

from auditkit_ray import ConfigError
from auditkit_ray.judges.textmodel import JudgeTextModel, judge_text_model


def test_prompts_go_to_the_judge_backend_in_one_batch_and_texts_come_back():
    model = judge_text_model({"type": "echo", "prefix": "> "}, max_new_tokens=4)
    assert isinstance(model, JudgeTextModel)
    assert model.complete(["a", "b"], ["s1#extract", "s2#extract"]) == ["> a", "> b"]
    assert model.judge.backend.generation.max_new_tokens == 4
    model.close()


def test_a_failed_request_is_none():
    model = judge_text_model({"type": "simulated", "fail_ids": ["bad"], "fixed_cost_s": 0, "output": "prompt"})
    assert model.complete(["x", "y"], ["ok", "bad"]) == ["x", None]


def test_a_bad_backend_mapping_fails_when_the_model_is_built():
    with pytest.raises(ConfigError, match="params.judge"):
        judge_text_model({"type": "api"})
