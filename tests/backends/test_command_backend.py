"""The ``command`` backend: a real program per sample, never a shell."""

from __future__ import annotations

import sys

import pytest

from auditkit_ray.backends.base import Request
from auditkit_ray.backends.command import CommandBackend
from auditkit_ray.backends.command import CommandSettings as Spec
from auditkit_ray.config.models import GenerationSettings
from auditkit_ray.errors import RunError

PY = sys.executable


def _backend(argv, gen=None, **kw) -> CommandBackend:
    b = CommandBackend(Spec(type="command", argv=argv, **kw), gen or GenerationSettings(), seed=7)
    b.load()
    return b


def test_prompt_on_stdin_and_stdout_as_output():
    b = _backend([PY, "-c", "import sys; print(sys.stdin.read().upper())"])
    gens = b.generate([Request(sample_id="a", prompt="hello"), Request(sample_id="b", prompt="x y")])
    assert [g.text for g in gens] == ["HELLO", "X Y"]
    assert gens[0].raw_text == "HELLO\n" and gens[0].latency_scope == "request" and gens[0].latency_s > 0


def test_prompt_as_an_argument_is_never_interpreted_by_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    b = _backend([PY, "-c", "import sys; print(repr(sys.argv[1]))", "<{prompt}>"])
    nasty = f"; touch {marker} $(touch {marker}) `touch {marker}` {{seed}}"
    (g,) = b.generate([Request(sample_id="a", prompt=nasty)])
    assert g.error is None and g.text == repr(f"<{nasty}>")
    assert not marker.exists()


def test_placeholders_and_environment_carry_the_sample_and_settings():
    code = ("import os, sys; print(sys.argv[1], sys.argv[2], os.environ['AUDITKIT_SEED'], "
            "os.environ['AUDITKIT_MAX_NEW_TOKENS'], os.environ['X'])")
    b = _backend([PY, "-c", code, "{sample_id}", "{repeat}"], GenerationSettings(max_new_tokens=5), env={"X": "y"})
    g0, g1 = b.generate([Request(sample_id="s1", prompt="p", repeat=0), Request(sample_id="s1", prompt="p", repeat=1)])
    sid, rep, seed0, mnt, x = g0.text.split()
    assert (sid, rep, mnt, x) == ("s1", "0", "5", "y")
    assert g1.text.split()[1] == "1" and g1.text.split()[2] != seed0


def test_nonzero_exit_is_an_error_with_the_stderr_tail():
    b = _backend([PY, "-c", "import sys; sys.stderr.write('x' * 5000 + 'the real reason'); sys.exit(3)"])
    (g,) = b.generate([Request(sample_id="a", prompt="p")])
    assert g.error.startswith("command exited with status 3") and g.error.endswith("the real reason")
    assert len(g.error) < 1200


def test_timeout_is_an_error_and_the_batch_goes_on():
    b = _backend([PY, "-c", "import sys, time; p = sys.stdin.read(); time.sleep(5 if p == 'slow' else 0); print(p)"],
                 timeout_s=0.5, concurrency=2)
    gens = b.generate([Request(sample_id="a", prompt="slow"), Request(sample_id="b", prompt="fast")])
    assert "timed out after 0.5s" in gens[0].error
    assert gens[1].text == "fast"


def test_stop_strings_cut_the_text_but_not_the_raw_output():
    b = _backend([PY, "-c", "print('42. And more')"], GenerationSettings(stop=["."]))
    (g,) = b.generate([Request(sample_id="a", prompt="")])
    assert g.text == "42" and g.raw_text == "42. And more\n"


def test_a_missing_program_stops_the_run_and_tools_are_refused():
    with pytest.raises(RunError, match="not found"):
        _backend(["definitely-not-a-program-xyz"])
    b = _backend([PY, "-c", "print(1)"])
    (g,) = b.generate([Request(sample_id="a", prompt="p", metadata={"tools": [{"name": "f"}]})])
    assert "tool schemas" in g.error


def test_secret_environment_is_not_in_identity_or_repr():
    spec = Spec(type="command", argv=["echo"], env={"API_TOKEN": "tok-secret-1234", "MODE": "fast"})
    assert spec.settings_identity()["env"] == {"MODE": "fast"}
    assert "tok-secret-1234" not in repr(spec)
