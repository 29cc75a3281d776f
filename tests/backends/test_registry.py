"""A user's backend registers the way the built-ins do (``register_backend``),
after the config models were built, and then validates in run files, appears
in the JSON Schema and is created by ``create_backend``; installed packages
register through the ``auditkit_ray.backends`` entry point group."""

import json
import sys
import textwrap
from typing import ClassVar, Literal

import pytest
from pydantic import Field

from auditkit_ray import ConfigError
from auditkit_ray.backends.base import Backend, Request
from auditkit_ray.cli import main
from auditkit_ray.config import load_run_spec, run_spec_from_dict
from auditkit_ray.core import backends as registry
from auditkit_ray.core.backends import (
    BackendSettings,
    backend_settings,
    backend_types,
    create_backend,
    register_backend,
    unregister_backend,
)
from auditkit_ray.core.types import Generation


class TinySettings(BackendSettings):
    """Upper-cases the prompt: a user's backend, registered by a test."""

    type: Literal["tiny"]
    shout: bool = Field(True, description="upper-case the output")
    batch_size: int = Field(4, ge=1)
    headers: dict[str, str] = Field(default_factory=dict)

    not_in_identity: ClassVar[frozenset[str]] = frozenset({"batch_size"})
    secret_maps: ClassVar[tuple[str, ...]] = ("headers",)

    def thread_safe(self) -> bool:
        return True


class TinyBackend(Backend):
    def generate(self, requests: list[Request]) -> list[Generation]:
        return [Generation(text=r.prompt.upper() if self.spec.shout else r.prompt) for r in requests]


@pytest.fixture
def tiny():
    register_backend("tiny", settings=TinySettings, impl=TinyBackend)
    yield
    unregister_backend("tiny")


RUN = """\
name: t
model:
  type: tiny
  shout: false
dataset:
  path: {data}
metrics: [exact_match]
"""


def test_the_builtins_are_registered_like_a_users_backend():
    assert backend_types()[:8] == ["echo", "simulated", "hf", "precomputed", "agent", "vllm", "api", "command"]
    assert backend_settings("hf").__name__ == "HFSettings" and backend_settings("hf").__module__.endswith("backends.hf")


def test_a_backend_registered_after_the_models_were_built_validates_a_run_file(tiny, write, data_file):
    spec = load_run_spec(write("run.yaml", RUN.format(data=data_file)))
    assert isinstance(spec.model, TinySettings) and spec.model.shout is False
    assert spec.shard_size == 64 and spec.model.thread_safe() and not spec.model.needs_gpu()
    assert spec.model.settings_identity() == {"type": "tiny", "shout": False, "headers": {}}
    backend = create_backend(spec.model, spec.generation, spec.seed)
    assert isinstance(backend, TinyBackend)
    assert [g.text for g in backend.run([Request(sample_id="a", prompt="hi")])] == ["hi"]


def test_bad_settings_of_a_registered_backend_name_the_field_and_line(tiny, write, data_file):
    p = write("run.yaml", RUN.format(data=data_file).replace("  shout: false", "  shout: false\n  batch_sise: 4"))
    with pytest.raises(ConfigError) as exc:
        load_run_spec(p)
    msg = str(exc.value)
    assert f"{p}:5:" in msg and "model.batch_sise" in msg and "unknown field" in msg and "model.tiny" not in msg


def test_the_json_schema_lists_a_registered_backend(tiny, capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["properties"]["model"]["discriminator"]["mapping"]["tiny"] == "#/$defs/TinySettings"
    assert "shout" in schema["$defs"]["TinySettings"]["properties"]


def test_an_unregistered_backend_is_unknown_again(write, data_file):
    register_backend("tiny", settings=TinySettings, impl=TinyBackend)
    unregister_backend("tiny")
    with pytest.raises(ConfigError) as exc:
        load_run_spec(write("run.yaml", RUN.format(data=data_file)))
    assert "model" in str(exc.value) and "tiny" in str(exc.value)
    assert "tiny" not in backend_types()


def test_secret_maps_are_masked_remembered_and_left_out_of_the_identity(tiny):
    spec = run_spec_from_dict({"model": {"type": "tiny", "headers": {"Authorization": "Bearer t1ny-secret", "X": "y"}},
                               "dataset": {"path": "d.jsonl"}})
    assert spec.model.settings_identity()["headers"] == {"X": "y"}
    assert "t1ny-secret" not in repr(spec.model)
    from auditkit_ray.core.secrets import scrub_text

    assert "t1ny-secret" not in scrub_text("sent Bearer t1ny-secret")


def test_registrations_that_cannot_work_are_refused():
    class Other(BackendSettings):
        type: Literal["other"]

    with pytest.raises(TypeError, match="Literal"):
        register_backend("tiny", settings=Other, impl=TinyBackend)
    with pytest.raises(TypeError, match="BackendSettings"):
        register_backend("tiny", settings=dict, impl=TinyBackend)
    with pytest.raises(ValueError):
        register_backend("tiny", settings="no_colon", impl=TinyBackend)
    with pytest.raises(ValueError):
        register_backend("has space", settings=TinySettings, impl=TinyBackend)
    assert "tiny" not in backend_types()


PLUGIN = '''
from typing import Literal

from auditkit_ray.backends.base import Backend
from auditkit_ray.core.backends import BackendSettings, register_backend
from auditkit_ray.core.types import Generation


class {cls}Settings(BackendSettings):
    type: Literal["{name}"]
    reply: str = "ok"


class {cls}Backend(Backend):
    def generate(self, requests):
        return [Generation(text=self.spec.reply) for _ in requests]


register_backend("{name}", settings={cls}Settings, impl="{module}:{cls}Backend")
'''


def _plugin(tmp_path, monkeypatch, name: str) -> str:
    module = f"{name}_plugin"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(PLUGIN.format(name=name, cls=name.title(), module=module)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("AUDITKIT_RAY_TRUSTED_PATHS", str(tmp_path))
    monkeypatch.setitem(registry._state, "entry_points", "unread")  # read them again, as a fresh process does
    return module


@pytest.fixture
def cleanup():
    names: list[str] = []
    yield names
    for name in names:
        unregister_backend(name)
        sys.modules.pop(f"{name}_plugin", None)


def test_an_installed_package_registers_through_the_entry_point_group(tmp_path, monkeypatch, cleanup):
    module = _plugin(tmp_path, monkeypatch, "plugged")
    cleanup.append("plugged")
    dist = tmp_path / "plugged_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[auditkit_ray.backends]\nplugged = {module}\n")
    assert "plugged" in backend_types()
    spec = run_spec_from_dict({"model": {"type": "plugged", "reply": "hi"}, "dataset": {"path": "d.jsonl"}})
    assert create_backend(spec.model, spec.generation).generate([Request(sample_id="a", prompt="x")])[0].text == "hi"


def test_a_module_named_in_the_environment_registers_its_backends(tmp_path, monkeypatch, cleanup):
    module = _plugin(tmp_path, monkeypatch, "envreg")
    cleanup.append("envreg")
    monkeypatch.setenv("AUDITKIT_RAY_BACKENDS", module)
    assert "envreg" in backend_types()
    assert run_spec_from_dict({"model": {"type": "envreg"}, "dataset": {"path": "d.jsonl"}}).model.reply == "ok"
