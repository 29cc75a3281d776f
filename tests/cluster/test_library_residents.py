"""The library keeps a model loaded between two ``evaluate`` calls of one process (issue 50): the private local
cluster it starts lives as long as the process, and the generation actor the first call loaded serves the second.
And it writes nothing of Ray's own on the user's stderr (issue 51)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("library_warnings_on_stderr")

pytest.importorskip("ray", reason="the pipeline needs the 'ray' extra")


@pytest.fixture(scope="module")
def two_calls(tiny_model, tmp_path_factory):
    """One Python process that calls ``ak.evaluate`` twice (tests/support/library_reuse.py): its exit status,
    its stderr and what it printed."""
    work = tmp_path_factory.mktemp("library")
    data = work / "data.jsonl"
    data.write_text("".join(json.dumps({"id": k, "question": f"What is {n} plus {n}?", "answer": str(2 * n)}) + "\n"
                            for k, n in (("a", 1), ("b", 2), ("c", 3))))
    script = Path(__file__).resolve().parents[1] / "support" / "library_reuse.py"
    out = subprocess.run([sys.executable, str(script), str(tiny_model), str(data), str(work)],
                         capture_output=True, text=True, timeout=600, cwd=work,
                         env={**os.environ, "AUDITKIT_RAY_WARM": "0"})
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_two_evaluate_calls_in_one_process_share_one_loaded_generation_actor(two_calls):
    got = json.loads(two_calls.stdout.strip().splitlines()[-1])
    first, second = got["first"], got["second"]
    assert first["generated"] == second["generated"] == 3  # both generated: two stores, no stored outputs shared
    assert first["pids"] == second["pids"] and len(first["pids"]) == 1, got  # one actor, loaded once
    assert first["texts"] == second["texts"]
    assert got["residents"] == [{"uses": 2, "pid": first["pids"][0]}], got


def test_the_python_api_writes_no_ray_core_worker_line_on_stderr(two_calls):
    # Ray's C++ warning about actors with constructor arguments in the object store came from Ray Data's actor
    # pools; a run this small takes the direct pipeline, which starts none
    lines = [ln for ln in two_calls.stderr.splitlines() if ln.strip()]
    assert not [ln for ln in lines if "core_worker.cc" in ln or "max_restarts > 0" in ln], two_calls.stderr[-3000:]
