"""lmeval's summary describes the command that printed it (issue 51): its wall time is the command's (the
model's load included, not only lm-eval's evaluation), a multiple-choice task counts its documents as its samples
(as the metrics' n does, not one per choice), a figure it does not have (tokens) is left out, and a task found
stored says so. The real console script, in a subprocess."""

from __future__ import annotations

import re
import time

import pytest
from console import console

pytest.importorskip("lm_eval", reason="the lm-eval bridge needs the 'lmeval' extra")

MC = "auditkit_arith_mc"


def test_lmeval_summary_gives_the_command_s_wall_time_one_sample_per_document_and_no_zero_tokens(tiny_model,
                                                                                                   tmp_path):
    args = ("lmeval", "--tasks", MC, "--model", tiny_model, "--limit", "6", "--store", tmp_path / "s", "--no-index",
            "--bootstrap-iters", "0")
    t0 = time.monotonic()
    r = console(*args, cwd=tmp_path, timeout=300)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    head = next(ln for ln in r.stdout.splitlines() if ln.startswith("run lm_eval:"))
    assert re.search(r"\bsamples 6\b", head), head  # 6 documents (24 requests, one per choice)
    assert re.search(r"^acc\s+\S+\s+\S+\s+\[[^]]+\]\s+6\s", r.stdout, re.M), r.stdout
    (line,) = [ln for ln in r.stdout.splitlines() if " wall " in f" {ln}"]
    assert line.startswith("generated 6  wall "), line
    wall = float(re.search(r"wall (\d+\.\d)s", line).group(1))
    # the command's time less the interpreter's start and the CLI's imports: most of it, and never more
    assert 0.5 * took <= wall <= took, (line, took)
    assert "tokens" not in r.stdout, r.stdout
    again = console(*args, cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    (line,) = [ln for ln in again.stdout.splitlines() if " wall " in f" {ln}"]
    assert line.startswith("reused 6 stored results, nothing generated  wall "), line
    assert "samples/s" not in line
