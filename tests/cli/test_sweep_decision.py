"""Issue 52 at the command line: ``sweep --limit/--set`` for a smoke run of a grid, the gates on ``sweep``,
and ``--require-candidate`` for CI. The real console script, in a subprocess, on the echo backend (the
starter sweep of ``auditkit-ray init``: one cell answers with the target, the other with the prompt)."""

from __future__ import annotations

import json
import re

import pytest
from console import console

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")

FP = re.compile(r"^  (\S+)  ([0-9a-f]{12})(?:  (\d+) samples)?$", re.M)


def _fingerprints(text: str) -> dict[str, tuple[str, int | None]]:
    return {m[1]: (m[2], int(m[3]) if m[3] else None) for m in FP.finditer(text)}


def test_sweep_limit_and_set_run_every_cell_on_5_samples_with_fingerprints_that_differ_from_the_full_runs(tmp_path):
    assert console("init", tmp_path).returncode == 0
    full = console("validate", "sweep.yaml", "--no-data", cwd=tmp_path)
    smoke = console("validate", "sweep.yaml", "--no-data", "--limit", "5", "--set", "generation.max_new_tokens=4",
                    cwd=tmp_path)
    assert full.returncode == smoke.returncode == 0, smoke.stderr
    r = console("sweep", "sweep.yaml", "--limit", "5", "--set", "generation.max_new_tokens=4", "--quiet",
                cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    ran, whole, planned = _fingerprints(r.stdout), _fingerprints(full.stdout), _fingerprints(smoke.stdout)
    assert set(ran) == set(whole) == {"starter/field=target", "starter/field=prompt"}, r.stdout
    for name, (fp, samples) in ran.items():
        assert samples == 5, r.stdout  # every cell ran on the first 5 of the 8 samples
        assert fp == planned[name][0] != whole[name][0]  # validate with the same flags names the same runs
    # the dry run plans the same runs, already done
    dry = console("sweep", "sweep.yaml", "--dry-run", "--limit", "5", "--set", "generation.max_new_tokens=4",
                  cwd=tmp_path)
    assert dry.returncode == 0 and all(f"{fp}  shards 2/2 done" in dry.stdout for fp, _ in ran.values()), dry.stdout
    bad = console("sweep", "sweep.yaml", "--limit", "0", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --limit 0: give a positive number"), bad.stderr


def test_require_candidate_exits_1_on_a_grid_with_no_qualifying_cell_and_names_the_best_with_its_bound(tmp_path):
    assert console("init", tmp_path).returncode == 0
    sweep = (tmp_path / "sweep.yaml").read_text()
    # two more runs: the same echo under another prefix (it answers right: as good as the baseline, but 8
    # samples cannot show it within 0.05) and its prompt-echoing twin
    sweep += ("runs:\n  - {name: a}\n  - {name: b, model.prefix: 'Answer: '}\n"
              "decision:\n  metric: exact_match@number\n  baseline: a/field=target\n  margin: 0.05\n")
    (tmp_path / "sweep.yaml").write_text(sweep.replace("name: starter-sweep", "name: ci-sweep"))
    r = console("sweep", "sweep.yaml", "--require-candidate", "--fail-under", "exact_match@number=0.5", "--quiet",
                cwd=tmp_path, timeout=300)
    assert r.returncode == 1, r.stderr
    error = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(error) == 1, r.stderr
    m = re.match(r"error: --require-candidate: keep a/field=target: no candidate is non-inferior on "
                 r"exact_match@number ↑ within 0\.05; the closest, b/field=target, has a 95% bound of "
                 r"(-0\.\d{4}) against a margin of -0\.05$", error[0])
    assert m, error[0]
    out = r.stdout
    # the decision leads the summary and ends it; the candidate table gives each verdict and the n needed
    assert out.index("decision: keep a/field=target") < out.index("leaderboard: 4 runs")
    assert out.rstrip().splitlines()[-1].startswith("decision: keep a/field=target: no candidate is non-inferior")
    row = re.search(r"^  b/field=target\s+inconclusive\s+\+0\.0000\s+(-0\.\d{4})\s+\S+\s+8\s+0\s+(\d+)", out, re.M)
    assert row and row[1] == m[1] and int(row[2]) > 8, out
    assert re.search(r"^  [ab]/field=prompt\s+inferior", out, re.M), out
    # the gate set on the sweep failed the prompt-echoing cells, each named
    assert "FAIL  a/field=prompt: exact_match@number" in out and "FAIL  b/field=prompt: exact_match@number" in out
    # a wider margin over the file's: the same stored runs decided again, and the JSON carries the decision
    ok = console("sweep", "sweep.yaml", "--margin", "0.5", "--require-candidate", "--json", "--quiet", cwd=tmp_path,
                 timeout=300)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    d = doc["decision"]
    assert d["recommended"] == "b/field=target" and d["ok"] is True and d["margin"] == 0.5
    assert d["headline"].startswith("decision: ship b/field=target instead of a/field=target: non-inferior")
    verdicts = {c["run"]: c["verdict"] for c in d["candidates"]}
    assert verdicts["b/field=target"] == "non-inferior" and verdicts["a/field=prompt"] != "non-inferior"
    assert {c["method"] for c in d["candidates"]} == {"tango"}
    # the sweep keeps the rule it ran with: a report on it leads with the same decision
    rep = console("report", "ci-sweep", "--store", "results", "--format", "md", "--resamples", "200", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert "### Decision" in rep.stdout and rep.stdout.index("### Decision") < rep.stdout.index("### Leaderboard")
    assert "decision: ship b/field=target instead of a/field=target" in rep.stdout
