import json

import pytest

from auditkit_ray import ConfigError
from auditkit_ray.cli import main
from auditkit_ray.config import RunSpec, SweepSpec, expand, json_schema, load_config

GOOD = """
name: t
model:
  type: echo
dataset:
  path: {data}
  input_field: question
  target_field: answer
metrics:
  - exact_match
"""


def test_valid_yaml_and_json_run_files_load(write, data_file):
    y = write("run.yaml", GOOD.format(data=data_file))
    spec = load_config(y)
    assert isinstance(spec, RunSpec) and spec.metrics[0].name == "exact_match"
    j = write("run.json", json.dumps(spec.model_dump(mode="json", by_alias=True)))
    assert load_config(j) == spec


def _err(path) -> str:
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    return str(exc.value)


def test_unknown_key_names_file_line_and_field_path(write, data_file):
    p = write("run.yaml", GOOD.format(data=data_file).replace("  type: echo", "  type: echo\n  batch_sise: 4"))
    msg = _err(p)
    assert f"{p}:4:" in msg and "model.batch_sise" in msg and "unknown field" in msg


def test_wrong_type_names_the_field_and_value(write, data_file):
    p = write("run.yaml", GOOD.format(data=data_file) + "execution:\n  shard_size: many\n")
    msg = _err(p)
    assert "execution.shard_size" in msg and "'many'" in msg and f"{p}:11" in msg


def test_unknown_backend_type_is_named(write, data_file):
    msg = _err(write("run.yaml", GOOD.format(data=data_file).replace("type: echo", "type: gpt5")))
    assert "model" in msg and "gpt5" in msg


def test_malformed_yaml_gives_line(write):
    msg = _err(write("run.yaml", "name: x\nmodel: [\n  type: echo\n"))
    assert "invalid YAML" in msg and "run.yaml:" in msg


def test_missing_env_var_without_default_is_an_error(write, data_file, monkeypatch):
    monkeypatch.delenv("AK_TEST_NOPE", raising=False)
    text = GOOD.format(data=data_file).replace("type: echo", "type: echo\n  prefix: ${AK_TEST_NOPE}")
    msg = _err(write("run.yaml", text))
    assert "AK_TEST_NOPE" in msg and "model.prefix" in msg and "run.yaml:4" in msg


def test_env_var_and_default_expand_in_backend_settings(write, data_file, monkeypatch):
    monkeypatch.setenv("AK_TEST_PREFIX", ">> ")
    text = GOOD.format(data=data_file).replace(
        "type: echo", "type: echo\n  prefix: '${AK_TEST_PREFIX}${AK_TEST_UNSET:-!}'"
    )
    spec = load_config(write("run.yaml", text))
    assert spec.model.prefix == ">> !"
    text = GOOD.format(data=data_file).replace("type: echo", "type: echo\n  prefix: '$${LITERAL}'")
    assert load_config(write("run2.yaml", text)).model.prefix == "${LITERAL}"


def test_unresolvable_metric_is_a_config_error_naming_the_item(write, data_file):
    msg = _err(write("run.yaml", GOOD.format(data=data_file) + "  - name: not_a_metric\n"))
    assert "metrics[1]" in msg and "not_a_metric" in msg and "run.yaml:10" in msg


def test_metric_on_unknown_annotator_is_rejected(write, data_file):
    msg = _err(write("run.yaml", GOOD.format(data=data_file) + "  - name: exact_match\n    on: extracted\n"))
    assert "extracted" in msg and "annotator" in msg


def test_unreadable_and_missing_files(tmp_path):
    assert "cannot read" in _err(tmp_path / "nope.yaml")
    assert "directory" in _err(tmp_path)
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("name: caf\xe9\n".encode("latin-1"))
    assert "not UTF-8" in _err(bad)


def test_sweep_expands_grid_and_explicit_runs(write, data_file):
    p = write(
        "sweep.yaml",
        f"""
        name: grid
        base:
          name: g
          model: {{type: simulated}}
          dataset: {{path: {data_file}, input_field: question, target_field: answer}}
          metrics: [exact_match]
        grid:
          generation.max_new_tokens: [4, 8]
          seed: [0, 1, 2]
        runs:
          - {{name: a}}
          - {{name: b, model: {{type: echo}}}}
        """,
    )
    sweep = load_config(p)
    assert isinstance(sweep, SweepSpec)
    runs = expand(sweep)
    assert len(runs) == 12
    assert {r.model.type for r in runs} == {"simulated", "echo"}
    assert len({r.name for r in runs}) == 12
    assert "a/max_new_tokens=4/seed=0" in {r.name for r in runs}


def test_sweep_with_invalid_grid_value_names_the_run(write, data_file):
    p = write(
        "sweep.yaml",
        f"""
        base:
          model: {{type: simulated}}
          dataset: {{path: {data_file}}}
          metrics: [exact_match]
        grid:
          generation.max_new_tokens: [4, -1]
        """,
    )
    msg = _err(p)
    assert "max_new_tokens=-1" in msg and "generation.max_new_tokens" in msg


def test_json_schema_is_exported_and_validates_a_config(data_file):
    import jsonschema

    schema = json_schema("run")
    assert schema["additionalProperties"] is False
    doc = {"model": {"type": "echo"}, "dataset": {"path": str(data_file)}, "metrics": [{"name": "exact_match"}]}
    jsonschema.validate(doc, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "bogus": 1}, schema)
    json_schema("sweep")


# ----------------------------------------------------------------------------- CLI
def test_cli_validate_ok_prints_fingerprint(write, data_file, capsys):
    assert main(["validate", str(write("run.yaml", GOOD.format(data=data_file)))]) == 0
    assert "fingerprint" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text",
    [
        "name: x\nmodel: [\n",  # malformed YAML
        "name: x\nmodel: {type: echo}\ndataset: {path: d}\nmetrics: [exact_match]\nbogus: 1\n",  # unknown key
        "name: x\nmodel: {type: echo, batch_size: lots}\ndataset: {path: d}\nmetrics: [exact_match]\n",  # wrong type
        "name: x\nmodel: {type: echo, prefix: '${AK_DEFINITELY_UNSET_VAR}'}\ndataset: {path: d}\n"
        "metrics: [exact_match]\n",
        "name: x\nmodel: {type: echo}\ndataset: {path: d}\nmetrics: [nope]\n",  # metric does not resolve
        "- just\n- a list\n",
    ],
)
def test_cli_bad_config_exits_2_with_one_clear_message_and_no_traceback(write, capsys, text):
    rc = main(["validate", str(write("bad.yaml", text))])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: ") and "Traceback" not in err and "bad.yaml" in err


def test_cli_unreadable_file_exits_2(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_cli_schema_prints_json_schema(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "model" in schema["properties"]
    assert main(["schema", "--kind", "sweep"]) == 0
    assert "grid" in json.loads(capsys.readouterr().out)["properties"]


def test_cli_version_and_usage_errors(capsys):
    from auditkit_ray import __version__

    assert main(["--version"]) == 0
    assert __version__ in capsys.readouterr().out
    assert main(["no-such-command"]) == 2
    assert main([]) == 2


def test_cli_metrics_lists_direction(capsys):
    assert main(["metrics", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["exact_match"]["direction"] == "maximize"
    assert rows["output_length"]["direction"] == "minimize"


def test_console_script_is_installed_and_exits_2_on_bad_input(tmp_path):
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = shutil.which("auditkit-ray") or str(Path(sys.executable).parent / "auditkit-ray")
    bad = tmp_path / "x.yaml"
    bad.write_text("model: {type: nope}\n")
    out = subprocess.run([exe, "validate", str(bad)], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr and out.stderr.startswith("error:")


def test_the_default_shard_size_is_the_backends_and_an_explicit_one_wins():
    from auditkit_ray.config import run_spec_from_dict

    api = {"type": "api", "base_url": "http://127.0.0.1:1/v1", "model": "m"}
    sim = {"type": "simulated"}
    # vllm batches a whole shard in one engine call: its default keeps the engine's usual batch (256) full,
    # and does not move with max_num_seqs (outside the run's identity, so it must not move its shards)
    vllm = {"type": "vllm", "path": "/m"}
    for model, want in ((api, 256), (sim, 64), (vllm, 1024), ({**vllm, "max_num_seqs": 32}, 1024)):
        spec = run_spec_from_dict({"model": model, "dataset": {"path": "d.jsonl"}})
        assert spec.execution.shard_size is None and spec.shard_size == want
        assert (
            run_spec_from_dict(
                {"model": model, "dataset": {"path": "d.jsonl"}, "execution": {"shard_size": 5}}
            ).shard_size
            == 5
        )
    # generation shards in flight: 4 for api, 1 for a model in the actor, unless set
    assert run_spec_from_dict({"model": api, "dataset": {"path": "d.jsonl"}}).model.shards_in_flight() == 4
    assert run_spec_from_dict({"model": sim, "dataset": {"path": "d.jsonl"}}).model.shards_in_flight() == 1
