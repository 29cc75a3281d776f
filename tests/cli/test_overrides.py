"""lm-eval's habits (issue 30): ``run --limit N`` and ``--set KEY=VALUE`` overrides that enter the fingerprint
as the file would, and ``${VAR}`` in every path. The real console script, in a subprocess."""

from __future__ import annotations

import json
import re

import pytest
from console import console

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")


def _fp(out: str) -> str:
    return re.search(r"fingerprint ([0-9a-f]{12})", out).group(1)


def test_set_and_limit_enter_the_fingerprint_as_the_file_would_and_run_limits_the_samples(tmp_path):
    assert console("init", tmp_path).returncode == 0
    run = tmp_path / "run.yaml"
    from auditkit_ray.config.documents import read_document  # YAML 1.2: 'on:' stays a key

    edited, _ = read_document(run)
    edited["generation"] = {**edited.get("generation", {}), "temperature": 0.7}
    edited["dataset"]["limit"] = 3
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    by_file = console("validate", "edited.json", cwd=tmp_path)
    by_flags = console("validate", "run.yaml", "--set", "generation.temperature=0.7", "--limit", "3", cwd=tmp_path)
    plain = console("validate", "run.yaml", cwd=tmp_path)
    assert by_file.returncode == by_flags.returncode == plain.returncode == 0, by_flags.stderr
    assert _fp(by_file.stdout) == _fp(by_flags.stdout) != _fp(plain.stdout)
    # a misspelled key is named with the flag that set it, and the nearest field
    bad = console("validate", "run.yaml", "--set", "generation.temperatur=0.7", cwd=tmp_path)
    assert bad.returncode == 2 and "--set generation.temperatur" in bad.stderr and "'temperature'" in bad.stderr
    # ${VAR} in a dataset path: expanded, or a clear error naming the variable
    unset = console("validate", "run.yaml", "--set", "dataset.path=${AK_DATA}/tiny.jsonl", cwd=tmp_path)
    assert unset.returncode == 2 and "environment variable AK_DATA is not set" in unset.stderr, unset.stderr
    ok = console("validate", "run.yaml", "--set", "dataset.path=${AK_DATA}/tiny.jsonl", cwd=tmp_path,
                 env={"AK_DATA": str(tmp_path / "data")})
    assert ok.returncode == 0 and _fp(ok.stdout) == _fp(plain.stdout), ok.stderr
    r = console("run", "run.yaml", "--limit", "3", "--json", "--quiet", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["perf"]["samples"] == 3
