"""Exit codes CI can trust (issue 45): a reader of stdout that goes away never changes a verdict. The real
console script, in a subprocess."""

from __future__ import annotations

import subprocess

import pytest
from console import EXE, check_clean_stderr, console

from auditkit_ray.testing.runs import build_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    ids = [f"q{i}" for i in range(20)]
    return [str(build_run(root, n, {"exact_match": {"values": {i: float(k % d != 0) for k, i in enumerate(ids)}}}))
            for n, d in (("base", 3), ("cand", 4))]


def _reader_gone(args: list[str]) -> subprocess.CompletedProcess:
    """stdout a pipe whose reader closed before the command writes: its first write meets EPIPE, every time."""
    p = subprocess.Popen([EXE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    return subprocess.CompletedProcess(args, p.wait(timeout=120), "", err)


GATES = {
    "compare": ["compare", "{0}", "{1}", "--fail-under", "exact_match=0.99", "--resamples", "50"],
    "compare --json": ["compare", "{0}", "{1}", "--fail-under", "exact_match=0.99", "--resamples", "50", "--json"],
    "leaderboard": ["leaderboard", "{0}", "{1}", "--fail-under", "exact_match=0.99", "--resamples", "50"],
    "leaderboard --max-regression": ["leaderboard", "{0}", "{1}", "--baseline", "{1}", "--max-regression", "0.01",
                                     "--resamples", "50"],
}


@pytest.mark.parametrize("name", list(GATES))
def test_a_failing_gate_exits_1_with_its_error_line_when_the_reader_of_stdout_went_away(name, runs):
    args = [a.format(*runs) for a in GATES[name]]
    attached = console(*args)
    assert attached.returncode == 1 and "error: " in attached.stderr, attached.stderr
    verdict = next(ln for ln in attached.stderr.splitlines() if ln.startswith("error: "))
    gone = _reader_gone(args)
    assert gone.returncode == 1, gone.stderr
    assert verdict in gone.stderr.splitlines(), gone.stderr
    check_clean_stderr(gone.stderr, tuple(args))
    assert "BrokenPipe" not in gone.stderr, gone.stderr


def test_piped_into_true_the_gate_still_fails(runs):
    # the issue's own command line: the exit status of auditkit-ray itself (PIPESTATUS), not the pipe's
    r = console(*[a.format(*runs) for a in GATES["compare"]], shell_tail="| true; exit ${PIPESTATUS[0]}")
    assert r.returncode == 1 and "error: 1 check(s) failed: cand: exact_match" in r.stderr, r.stderr


def test_a_passing_command_whose_reader_went_away_still_exits_0(runs):
    r = _reader_gone(["compare", *runs, "--resamples", "50"])
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
