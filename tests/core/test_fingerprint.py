import copy

import pytest
import yaml

from auditkit_ray.config import run_spec_from_dict
from auditkit_ray.core.fingerprint import canonical_json, fingerprint
from auditkit_ray.pipeline.identity import generation_fingerprint, run_fingerprint

BASE = {
    "name": "fp",
    "model": {"type": "simulated", "fixed_cost_s": 0.01, "per_token_s": 0.001},
    "dataset": {"path": "PLACEHOLDER", "input_field": "question", "target_field": "answer"},
    "prompt": {"template": "Q: {{ question }}\nA:"},
    "generation": {"max_new_tokens": 8, "temperature": 0.0},
    "metrics": ["exact_match"],
    "seed": 0,
}


@pytest.fixture
def base(data_file):
    d = copy.deepcopy(BASE)
    d["dataset"]["path"] = str(data_file)
    return d


def test_key_order_in_yaml_does_not_change_the_fingerprint(base):
    text_a = yaml.safe_dump(base, sort_keys=True)
    reordered = dict(reversed(list(base.items())))
    reordered["model"] = dict(reversed(list(base["model"].items())))
    text_b = yaml.safe_dump(reordered, sort_keys=False)
    assert text_a != text_b
    a = run_spec_from_dict(yaml.safe_load(text_a))
    b = run_spec_from_dict(yaml.safe_load(text_b))
    assert run_fingerprint(a) == run_fingerprint(b)


def test_integral_floats_and_ints_are_the_same_setting(base):
    b2 = copy.deepcopy(base)
    b2["generation"]["temperature"] = 0
    assert run_fingerprint(run_spec_from_dict(base)) == run_fingerprint(run_spec_from_dict(b2))


CHANGES = [
    ("model.per_token_s", 0.002),
    ("model.output", "prompt"),
    ("prompt.template", "Question: {{ question }}\nAnswer:"),
    ("prompt.system", "Be brief."),
    ("generation.max_new_tokens", 9),
    ("generation.temperature", 0.7),
    ("generation.stop", ["\n"]),
    ("dataset.input_field", "answer"),
    ("dataset.limit", 2),
    ("seed", 1),
]


def _set(d, dotted, value):
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d[p]
    d[parts[-1]] = value


@pytest.mark.parametrize("path,value", CHANGES, ids=[c[0] for c in CHANGES])
def test_each_numbers_changing_field_changes_both_fingerprints(base, path, value):
    changed = copy.deepcopy(base)
    _set(changed, path, value)
    a, b = run_spec_from_dict(base), run_spec_from_dict(changed)
    assert generation_fingerprint(a) != generation_fingerprint(b)
    assert run_fingerprint(a) != run_fingerprint(b)


def test_dataset_content_changes_the_fingerprint(base, data_file):
    before = run_fingerprint(run_spec_from_dict(base))
    data_file.write_text(data_file.read_text().replace('"2"', '"3"'))
    assert run_fingerprint(run_spec_from_dict(base)) != before


@pytest.mark.parametrize(
    "metrics",
    [
        ["exact_match", "token_f1"],
        [{"name": "exact_match", "params": {"ignore_case": True}}],
        [{"name": "exact_match", "on": "x"}],
    ],
)
def test_metric_and_annotator_changes_change_the_run_but_not_the_generation_fingerprint(base, metrics):
    changed = copy.deepcopy(base)
    changed["metrics"] = metrics
    changed["annotators"] = [{"type": "regex", "name": "x", "pattern": r"(\d+)"}]
    a, b = run_spec_from_dict(base), run_spec_from_dict(changed)
    assert generation_fingerprint(a) == generation_fingerprint(b)
    assert run_fingerprint(a) != run_fingerprint(b)


def test_repeat_index_changes_the_fingerprint(base):
    spec = run_spec_from_dict(base)
    assert run_fingerprint(spec, repeat=0) != run_fingerprint(spec, repeat=1)


def test_execution_and_store_settings_do_not_change_the_fingerprint(base):
    changed = copy.deepcopy(base)
    changed["execution"] = {"shard_size": 3, "generation_actors": 4}
    changed["store"] = {"path": "/elsewhere"}
    changed["experiment"] = {"name": "x", "tags": {"a": "b"}}
    changed["model"]["batch_size"] = 2
    assert run_fingerprint(run_spec_from_dict(base)) == run_fingerprint(run_spec_from_dict(changed))


def test_secrets_never_appear_in_the_fingerprint_input():
    secret = "sk-live-THIS-IS-SECRET-123"
    payload = {"backend": {"api_key": secret, "headers": {"Authorization": f"Bearer {secret}"}, "model": "gpt"}}
    text = canonical_json(payload)
    assert secret not in text and "gpt" in text
    other = {"backend": {"model": "gpt", "api_key": "other", "headers": {"Authorization": "Bearer other"}}}
    assert fingerprint(payload) == fingerprint(other)


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "OPENAI_API_KEY",
        "x-api-key",
        "hf_token",
        "Authorization",
        "aws_secret_access_key",
        "password",
        "accessToken",
    ],
)
def test_secret_key_names_are_recognised(key):
    from auditkit_ray.core.secrets import is_secret_key

    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key", ["max_new_tokens", "per_token_s", "tokens_per_output", "token_source", "prompt_tokens", "model", "path"]
)
def test_ordinary_key_names_are_not_secret(key):
    from auditkit_ray.core.secrets import is_secret_key

    assert not is_secret_key(key)


def test_secret_from_env_in_backend_settings_is_absent_from_fingerprint_and_stored_config(base, monkeypatch):
    from auditkit_ray.config.loader import expand_env
    from auditkit_ray.pipeline.identity import generation_payload, redacted_config

    secret = "tok-ABCDEF-987654"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    expanded = expand_env({"model": {"path": "x", "note": "${MY_SERVICE_TOKEN}"}})
    assert expanded["model"]["note"] == secret
    spec = run_spec_from_dict(base)
    spec.prompt.system = f"key is {secret}"  # leaked into a non-secret field by mistake
    assert secret not in canonical_json(generation_payload(spec))
    assert secret not in str(redacted_config(spec))


def test_canonical_json_is_one_walk_of_the_two_walk_formula():
    """``canonical_json`` walks a value once (a sweep fingerprints tens of thousands of runs) and must write
    exactly what canonicalising, dropping secrets and canonicalising again writes: every fingerprint stays."""
    import importlib
    import json
    from enum import Enum

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from auditkit_ray.core.secrets import redact, remember_secret

    mod = importlib.import_module("auditkit_ray.core.fingerprint")  # the module (the package exports a function)

    class Kind(Enum):
        A = 1.5
        B = "b"

    def two_walks(obj):
        return json.dumps(mod._canon(redact(mod._canon(obj), drop=True)), sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"))

    atoms = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8),
                      st.sampled_from([Kind.A, Kind.B, "remembered-secret", (1, 2.0)]))
    keys = st.one_of(st.sampled_from(["api_key", "token", "max_new_tokens", "Authorization", "x"]),
                     st.integers(0, 3), st.text(max_size=6))
    values = st.recursive(atoms, lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(keys, c, max_size=4)),
                          max_leaves=20)

    @settings(max_examples=400, deadline=None)
    @given(values)
    def check(value):
        assert canonical_json(value) == two_walks(value)

    check()
    remember_secret("remembered-secret")  # strings are scrubbed from here on: the one walk must scrub too
    check()
