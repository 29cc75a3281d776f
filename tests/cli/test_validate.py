"""``validate`` passes only what ``run`` accepts (issue 30): it reads the dataset and builds every prompt,
and relative paths resolve against the file that names them, so its fingerprint is the run's from any
folder. The real console script, in a subprocess."""

from __future__ import annotations

import re

import pytest
from console import console


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "project"
    assert console("init", d).returncode == 0
    return d


def _fp(out: str) -> str:
    return re.search(r"fingerprint ([0-9a-f]{12})", out).group(1)


def test_validate_from_another_folder_prints_the_runs_own_fingerprint(project, tmp_path):
    here = console("validate", "run.yaml", cwd=project)
    assert here.returncode == 0 and "data/tiny.jsonl: 8 samples, every prompt built" in here.stdout, here.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    there = console("validate", "../project/run.yaml", cwd=elsewhere)
    assert there.returncode == 0, there.stderr
    assert _fp(there.stdout) == _fp(here.stdout)


@pytest.mark.parametrize("damage, want", [
    (lambda f: f.unlink(), "not found"),
    (lambda f: f.write_text(""), "no samples"),
    (lambda f: f.write_bytes(f.read_bytes()[:-20]), "tiny.jsonl:8"),
    (lambda f: f.write_text(f.read_text() + f.read_text().splitlines()[0] + "\n"), "duplicate sample id"),
    (lambda f: f.write_bytes(f.read_bytes().replace(b"?", b"\xff", 1)), "UTF-8"),
], ids=["missing", "empty", "truncated", "duplicate-id", "invalid-utf8"])
def test_validate_refuses_a_dataset_that_run_would_refuse(project, damage, want):
    damage(project / "data" / "tiny.jsonl")
    r = console("validate", "run.yaml", cwd=project)
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and want in lines[0] and "Traceback" not in r.stderr, r.stderr
    # --no-data checks the file alone (for very large datasets)
    assert console("validate", "run.yaml", "--no-data", cwd=project).returncode == 0
