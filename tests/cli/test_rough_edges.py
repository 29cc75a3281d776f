"""The trial's rough edges (issue 45), through the real console script: a report never shows a green "ok"
next to a failed sweep cell."""

from __future__ import annotations

import json

import pytest
from console import console

from auditkit_ray.testing.runs import build_run

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")


def test_a_sweep_report_with_a_failed_cell_reads_failed_not_ok(tmp_path):
    store = tmp_path / "store"
    ids = [f"q{i}" for i in range(10)]
    fps = {}
    for name, d in (("fp32", 2), ("int8", 3)):
        fp = (name.encode().hex() + "0" * 64)[:64]
        build_run(store / "runs", fp, {"exact_match": {"values": {i: float(k % d != 0) for k, i in enumerate(ids)}}})
        fps[name] = fp
    sfp = "e" * 64
    (store / "sweeps" / sfp).mkdir(parents=True)
    cells = [{"name": n, "state": "done", "reason": None, "attempts": 1, "runs": [n], "fingerprints": [fp]}
             for n, fp in fps.items()]
    cells.append({"name": "hf:ckpt-p75", "state": "failed", "reason": "model load failed: HeaderTooLarge",
                  "attempts": 1, "runs": ["p75"], "fingerprints": ["f" * 64]})
    (store / "sweeps" / sfp / "manifest.json").write_text(json.dumps({
        "name": "night", "fingerprint": sfp, "state": "failed", "cells": cells,
        "runs": [{"name": n, "fingerprint": fp, "state": "complete"} for n, fp in fps.items()]
        + [{"name": "p75", "fingerprint": "f" * 64, "state": "failed"}]}))

    out = tmp_path / "report.html"
    r = console("report", store / "sweeps" / sfp, "--format", "html", "--output", out, "--resamples", "50")
    assert r.returncode == 0, r.stderr  # no gate set: the report's exit code is the gates' (README)
    html = out.read_text()
    assert '<span class="status fail" id="result-status">Result: failed: 1 sweep cell(s) failed</span>' in html
    assert "Result: ok" not in html and 'class="status ok"' not in html
    assert "model load failed: HeaderTooLarge" in html
    text = console("report", store / "sweeps" / sfp, "--format", "text", "--resamples", "50")
    assert text.returncode == 0 and "result: failed: 1 sweep cell(s) failed" in text.stdout, text.stdout
    md = console("report", store / "sweeps" / sfp, "--format", "md", "--resamples", "50")
    assert "**Result: failed: 1 sweep cell(s) failed**" in md.stdout and "**Result: ok" not in md.stdout


def _run_file(tmp_path, **over):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "q": f"q{i}", "a": "x"}) + "\n" for i in range(3)))
    doc = {"name": "edge", "dataset": {"path": "d.jsonl", "input_field": "q", "target_field": "a"},
           "model": {"type": "simulated"}, "metrics": ["exact_match"], "store": {"path": "store"},
           "tracking": {"index": False}, **over}
    (tmp_path / "run.json").write_text(json.dumps(doc))
    return "run.json"


def test_a_missing_input_file_is_named_by_its_field(tmp_path):
    f = _run_file(tmp_path, dataset={"path": "nope.jsonl", "input_field": "q", "target_field": "a"})
    r = console("validate", f, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"error: run.json:1: dataset.path 'nope.jsonl': file not found ({tmp_path / 'nope.jsonl'})"), r.stderr
    f = _run_file(tmp_path, prompt={"few_shot": {"path": "shots.jsonl", "n": 1}})
    r = console("validate", f, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().startswith(
        "error: run.json:1: prompt.few_shot.path 'shots.jsonl': file not found"), r.stderr


def test_validate_refuses_a_checkpoint_without_weights(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    f = _run_file(tmp_path, model={"type": "hf", "path": "ckpt"})
    r = console("validate", f, cwd=tmp_path)
    assert r.returncode == 2 and "model.path" in r.stderr and "no weights in the checkpoint" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    (ckpt / "model.safetensors").write_bytes(b"")  # there (whether it loads is the actor's to find out)
    r = console("validate", f, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_the_text_report_header_says_the_run_count_once(tmp_path):
    ids = [f"q{i}" for i in range(6)]
    runs = [str(build_run(tmp_path, n, {"exact_match": {"values": {i: float(k % d != 0) for k, i in enumerate(ids)}}}))
            for n, d in (("a", 2), ("b", 3))]
    r = console("report", *runs, "--format", "text", "--resamples", "50")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "2 runs  1 metrics  errors 0", r.stdout
    titled = console("report", *runs, "--format", "text", "--resamples", "50", "--title", "nightly")
    assert titled.stdout.splitlines()[0] == "nightly  2 runs  1 metrics  errors 0", titled.stdout


def test_rescore_takes_a_metric_on_an_annotation_as_results_name_it(tmp_path):
    f = _run_file(tmp_path, model={"type": "simulated", "constant": "The answer is x.", "fixed_cost_s": 0.0,
                                   "per_token_s": 0.0},
                  annotators=[{"type": "regex", "name": "word", "pattern": "(\\w+)\\.$", "select": "last"}],
                  metrics=["exact_match", {"name": "exact_match", "on": "word"}])
    first = console("run", f, "--json", "--quiet", cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    before = json.loads(first.stdout)["metrics"]
    assert set(before) == {"exact_match", "exact_match@word"}
    (run_dir,) = (tmp_path / "store" / "runs").glob("*/result.json")
    again = console("rescore", run_dir.parent, "--metric", "exact_match@word", "--json", "--quiet", cwd=tmp_path,
                    timeout=300)
    assert again.returncode == 0, again.stderr
    metrics = json.loads(again.stdout)["metrics"]
    # the same outputs, the same annotation, the same score
    assert list(metrics) == ["exact_match@word"] and metrics["exact_match@word"]["n"] == 3, metrics
    assert metrics["exact_match@word"]["mean"] == before["exact_match@word"]["mean"], (metrics, before)


def test_an_unknown_warm_cluster_choice_is_a_usage_error_naming_the_variable(tmp_path):
    """``AUDITKIT_RAY_WARM`` is on or off; a typo is neither, and is not taken silently for the default."""
    f = _run_file(tmp_path)
    r = console("run", f, "--quiet", cwd=tmp_path, env={"AUDITKIT_RAY_WARM": "yse"})
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: AUDITKIT_RAY_WARM='yse': expected 1 or 0 (also true/false, yes/no, on/off)"), r.stderr
    assert not (tmp_path / "store" / "runs").exists()  # nothing ran
