"""User code named in configs is imported only from the working directory,
installed packages, or explicitly trusted folders."""

import sys
import textwrap

import pytest

from auditkit_ray import ConfigError
from auditkit_ray.core.registry import resolve_metric

METRIC = textwrap.dedent('''
    from auditkit_ray import Direction, Metric
    import pathlib
    pathlib.Path(__file__).with_name("IMPORTED").write_text("ran")

    class Mine(Metric):
        direction = Direction.MAXIMIZE

        def score(self, sample, generation, context):
            return 1.0
''')


def test_module_outside_workdir_is_refused_before_its_code_runs(tmp_path, monkeypatch):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "evil_metric_mod.py").write_text(METRIC)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(outside))
    monkeypatch.delenv("AUDITKIT_RAY_WORKDIR", raising=False)
    with pytest.raises(ConfigError, match="outside the working directory"):
        resolve_metric("evil_metric_mod:Mine")
    assert not (outside / "IMPORTED").exists(), "the module's code must not have run"
    sys.modules.pop("evil_metric_mod", None)


def test_module_in_workdir_or_trusted_path_is_imported(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "good_metric_mod.py").write_text(METRIC)
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))
    monkeypatch.delenv("AUDITKIT_RAY_WORKDIR", raising=False)
    assert resolve_metric("good_metric_mod:Mine").name == "mine"
    other = tmp_path / "team"
    other.mkdir()
    (other / "team_metric_mod.py").write_text(METRIC)
    monkeypatch.syspath_prepend(str(other))
    monkeypatch.setenv("AUDITKIT_RAY_TRUSTED_PATHS", str(other))
    assert resolve_metric("team_metric_mod:Mine").name == "mine"
    for m in ("good_metric_mod", "team_metric_mod"):
        sys.modules.pop(m, None)


def test_installed_packages_and_builtins_resolve(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert resolve_metric("exact_match").name == "exact_match"
    with pytest.raises(ConfigError):
        resolve_metric("json:dumps")  # importable (stdlib) but not a Metric
