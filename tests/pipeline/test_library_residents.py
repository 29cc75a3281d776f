"""The library keeps a model loaded between two ``evaluate`` calls of one process (issue 50): the private local
cluster it starts lives as long as the process, and the generation actor the first call loaded serves the second."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the pipeline needs the 'ray' extra")


def test_two_evaluate_calls_in_one_process_share_one_loaded_generation_actor(tiny_model, tmp_path, data_file):
    script = Path(__file__).resolve().parents[1] / "support" / "library_reuse.py"
    out = subprocess.run([sys.executable, str(script), str(tiny_model), str(data_file), str(tmp_path)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env={**__import__("os").environ, "AUDITKIT_RAY_WARM": "0"})
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    first, second = got["first"], got["second"]
    assert first["generated"] == second["generated"] == 3  # both generated: two stores, no stored outputs shared
    assert first["pids"] == second["pids"] and len(first["pids"]) == 1, got  # one actor, loaded once
    assert first["texts"] == second["texts"]
    assert got["residents"] == [{"uses": 2, "pid": first["pids"][0]}], got
