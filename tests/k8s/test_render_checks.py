"""``k8s render`` behaves like a careful colleague (issue 30): it refuses a run file, warns about local paths
the cluster will not have (git-ignored checkpoints built here), and writes plain YAML. The real console script,
in a subprocess, from the repository (a git checkout)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from console import console

ROOT = Path(__file__).resolve().parents[2]


def test_k8s_render_refuses_a_run_file_warns_about_ignored_paths_and_writes_plain_yaml(tmp_path):
    r = console("k8s", "render", ROOT / "examples/echo.yaml", "--store", "s3://b/p", cwd=ROOT)
    assert r.returncode == 2 and "a run file, not a sweep" in r.stderr and not r.stdout, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1

    if shutil.which("git") is None or subprocess.run(["git", "rev-parse"], cwd=ROOT).returncode != 0:
        pytest.skip("not a git checkout: git-ignored paths cannot be told")
    # a sweep naming a git-ignored checkpoint: examples/tiny-model, built by `make model` (as make demo builds
    # the pruned word-problems checkpoints), which make test builds before the tests run
    ignored = ROOT / "examples" / "tiny-model"
    if not (ignored / "config.json").exists():
        pytest.skip("examples/tiny-model is missing (make model)")
    assert subprocess.run(["git", "check-ignore", "-q", str(ignored)], cwd=ROOT).returncode == 0
    sweep = {"name": "k8s-check",
             "base": {"model": {"type": "hf", "path": "examples/models/word-problems", "device": "cpu"},
                      "dataset": {"path": "examples/data/word_problems_test.jsonl"}, "metrics": ["exact_match"]},
             "grid": {"model.path": ["examples/models/word-problems", str(ignored.relative_to(ROOT)),
                                     str(tmp_path)]}}
    f = tmp_path / "sweep.yaml"
    f.write_text(yaml.safe_dump(sweep))
    out = tmp_path / "job.yaml"
    r = console("k8s", "render", f, "--store", "s3://b/p", "-o", out, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 2, r.stderr
    assert any("tiny-model" in w and "git-ignored" in w for w in warnings)
    assert any(str(tmp_path) in w and "outside the repository" in w for w in warnings)
    text = out.read_text()
    assert "&id" not in text and "*id" not in text, "anchors or aliases in the rendered YAML"
    docs = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in docs] == ["ConfigMap", "RayJob"]
