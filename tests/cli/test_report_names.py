"""``report`` takes a sweep by the name ``sweep`` stored it under, or a unique prefix of a sweep's or a run's
fingerprint (issue 45), through the real console script; a word that names two is a usage error listing
them, and one that names nothing lists the sweeps there are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from console import console

from auditkit_ray.testing.runs import build_run

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")


def _report(r) -> dict:
    doc = json.loads(r.stdout)
    doc.pop("generated_at")  # the one field that differs between two reports of the same runs
    return doc


def _one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("usage:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def test_report_takes_the_starter_sweep_by_its_name_and_by_fingerprint_prefixes(tmp_path):
    env = {"AUDITKIT_RAY_DB": str(tmp_path / "db.sqlite")}  # this test's runs alone
    proj = tmp_path / "proj"
    assert console("init", proj, env=env).returncode == 0
    swept = console("sweep", "sweep.yaml", "--quiet", cwd=proj, env=env, timeout=300)
    assert swept.returncode == 0, swept.stderr
    (sweep_dir,) = (proj / "results" / "sweeps").iterdir()
    args = ("--format", "json", "--resamples", "50")
    by_path = console("report", sweep_dir, *args, cwd=proj, env=env)
    assert by_path.returncode == 0, by_path.stderr
    expected = _report(by_path)
    assert len(expected["runs"]) == 2, expected["runs"]
    # the name the sweep file gives, the short fingerprint the commands print, a bare prefix
    for word in ("starter-sweep", sweep_dir.name[:12], sweep_dir.name[:6]):
        r = console("report", word, *args, cwd=proj, env=env)
        assert r.returncode == 0, (word, r.stderr)
        assert _report(r) == expected, word
    # from another folder: the ExperimentDB knows the store the sweep's runs went to
    elsewhere = console("report", "starter-sweep", *args, cwd=tmp_path, env=env)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert _report(elsewhere) == expected
    # a run by a unique prefix of its fingerprint
    run_fp = sorted(p.name for p in (proj / "results" / "runs").iterdir())[0]
    one = console("report", run_fp[:10], "--format", "text", "--resamples", "50", cwd=proj, env=env)
    assert one.returncode == 0, one.stderr
    assert f"fingerprint {run_fp[:12]}" in one.stdout.splitlines()[0], one.stdout


def _two_sweeps_named_night(store: Path) -> list[str]:
    ids = [f"q{i}" for i in range(6)]
    fps = []
    for k, sfp in enumerate(("ab" + "1" * 62, "ab" + "2" * 62)):
        fp = f"{k}" * 64
        build_run(store / "runs", fp, {"exact_match": {"values": {i: float(j % 2) for j, i in enumerate(ids)}}})
        (store / "sweeps" / sfp).mkdir(parents=True)
        (store / "sweeps" / sfp / "manifest.json").write_text(json.dumps({
            "name": "night", "fingerprint": sfp, "state": "complete", "updated_at": 1_790_000_000 + k,
            "runs": [{"name": f"r{k}", "fingerprint": fp, "state": "complete"}], "cells": []}))
        fps.append(sfp)
    return fps


def test_a_name_or_prefix_that_names_two_sweeps_is_a_usage_error_listing_both(tmp_path):
    env = {"AUDITKIT_RAY_DB": str(tmp_path / "db.sqlite")}
    store = tmp_path / "store"
    first, second = _two_sweeps_named_night(store)
    for word, how in (("night", "is the name of 2 sweeps"), ("ab", "starts the fingerprints of 2 sweeps")):
        line = _one_line_error(console("report", word, "--store", store, env=env))
        assert f"'{word}' {how}: " in line, line
        assert f"sweep night {first[:12]} (in {store}" in line and f"sweep night {second[:12]} (in {store}" in line
    # more of the fingerprint names one
    r = console("report", second[:4], "--store", store, "--format", "json", "--resamples", "50", env=env)
    assert r.returncode == 0, r.stderr
    by_path = console("report", store / "sweeps" / second, "--format", "json", "--resamples", "50", env=env)
    assert _report(r) == _report(by_path)
    assert _report(r) != _report(console("report", store / "sweeps" / first, "--format", "json", "--resamples", "50",
                                         env=env))


def test_an_unknown_sweep_name_says_which_sweeps_there_are(tmp_path):
    env = {"AUDITKIT_RAY_DB": str(tmp_path / "db.sqlite")}
    store = tmp_path / "store"
    _two_sweeps_named_night(store)
    line = _one_line_error(console("report", "nigth", "--store", store, env=env))
    assert line.startswith("error: 'nigth' is no path, and names no sweep or run"), line
    assert "sweeps there: night" in line and "(did you mean 'night'?)" in line, line
    line = _one_line_error(console("report", "night", "--store", tmp_path / "nowhere", env=env))
    assert line == f"error: --store {tmp_path / 'nowhere'}: no such result store (a directory holding runs/ and " \
                   "sweeps/)", line
