"""The viewer's rough edges (issue 45): an interrupted run is not shown as running forever, a score of 0 is not
coloured as good, and a tiny p-value is not printed as 0.0000. The server is the real console script
(``auditkit-ray view``); the page's own formatting code (app.js) runs in Node when it is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
STATIC = Path(__file__).resolve().parents[2] / "auditkit_ray" / "viewer" / "static"


def test_a_run_that_stopped_shows_why_not_running(tmp_path, kit):
    store = tmp_path / "store"
    done = kit.write_run(store, "night/done", n=10, right=lambda i: True)
    interrupted, failed, live = "a" * 64, "b" * 64, "c" * 64
    for fp in (interrupted, failed, live):
        (store / "runs" / fp).mkdir(parents=True)
    # what pipeline.plan.mark_interrupted writes when a run stops on SIGINT/SIGTERM
    (store / "runs" / interrupted / "manifest.json").write_text(json.dumps(
        {"name": "night/stopped", "fingerprint": interrupted, "state": "interrupted", "n_shards": 4}))
    sdir = store / "sweeps" / ("d" * 64)
    sdir.mkdir(parents=True)
    (sdir / "manifest.json").write_text(json.dumps({"name": "night", "fingerprint": "d" * 64, "cells": [], "runs": [
        {"name": "night/done", "fingerprint": done, "state": "complete"},
        {"name": "night/broken", "fingerprint": failed, "state": "failed", "reason": "model load failed"},
        {"name": "night/live", "fingerprint": live, "state": "running"}]}))
    v = kit.Viewer(["--store", str(store), "--port", "0"], tmp_path / "view.log")
    try:
        status, body = kit.http(v.base + "/api/runs")
        assert status == 200, body
        runs = {r["fingerprint"]: r for r in json.loads(body)["runs"]}
    finally:
        v.stop()
    assert runs[done]["state"] == "complete"
    assert runs[interrupted]["state"] == "interrupted" and runs[interrupted]["name"] == "night/stopped"
    assert runs[failed]["state"] == "failed"
    assert runs[live]["state"] == "running"  # nothing says it stopped


def _node_eval(expr: str) -> str:
    """``expr`` evaluated in Node with app.js's own number formatting functions (fmt, fmtP) defined."""
    js = (STATIC / "app.js").read_text()
    funcs = [m.group(0) for name in ("fmt", "fmtP")
             for m in [re.search(rf"^function {name}\(.*?^}}$", js, re.S | re.M)] if m]
    assert len(funcs) == 2, "app.js defines fmt and fmtP"
    out = subprocess.run(["node", "-e", "\n".join(funcs) + f"\nprocess.stdout.write(String({expr}));"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.skipif(shutil.which("node") is None, reason="runs app.js's formatting in Node")
def test_p_values_too_small_for_four_decimals_read_below_0_0001():
    assert _node_eval("fmtP(3e-7)") == "< 0.0001"
    assert _node_eval("fmtP(0.0312)") == "0.0312"
    assert _node_eval("fmtP(1)") == "1" and _node_eval("fmtP(0)") == "0" and _node_eval("fmtP(null)") == "–"
    # every p-value cell of the page goes through fmtP
    js = (STATIC / "app.js").read_text()
    assert "p-value" in js and not re.search(r'"num p-value", text: fmt\(', js)


def test_a_scored_value_is_not_coloured_as_good_whatever_it_is():
    # a score's class says its status (scored, error, unknown...), not whether it is good: 0 is scored too
    css = (STATIC / "app.css").read_text()
    rule = re.search(r"\.status-scored\s*\{([^}]*)\}", css)
    assert rule is not None
    colour = re.search(r"color:\s*([^;]+)", rule.group(1))
    assert colour is None or colour.group(1).strip() in ("inherit", "currentColor"), rule.group(0)
