"""Run the real ``auditkit-ray`` console script in a subprocess, the way a user does.

Every call checks what the user would see (issue 30's "done when"): no traceback and no line of Ray's or a
native library's own log on stderr, unless the command was given ``--verbose``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

EXE = shutil.which("auditkit-ray", path=str(Path(sys.executable).parent)) or "auditkit-ray"


def console(*args: str, cwd: str | Path | None = None, env: dict | None = None, timeout: float = 120,
            shell_tail: str | None = None) -> subprocess.CompletedProcess:
    """``auditkit-ray ARGS`` (``shell_tail``: piped on, e.g. ``"| head -1"``, through bash with pipefail)."""
    full_env = {**os.environ, **(env or {})}
    if shell_tail is None:
        r = subprocess.run([EXE, *map(str, args)], cwd=cwd, env=full_env, capture_output=True, text=True,
                           timeout=timeout)
    else:
        import shlex

        line = " ".join(shlex.quote(str(a)) for a in (EXE, *args)) + " " + shell_tail
        r = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=cwd, env=full_env, capture_output=True,
                           text=True, timeout=timeout)
    if "--verbose" not in map(str, args):
        check_clean_stderr(r.stderr, args)
    return r


def check_clean_stderr(stderr: str, args: tuple = ()) -> None:
    """Fail on a traceback or a foreign log line in what a command printed on stderr."""
    from auditkit_ray.cli.noise import FOREIGN

    for part in ("Traceback (most recent call last)", "The above exception was the direct cause",
                 "During handling of the above exception"):  # a traceback, or the tail of one
        assert part not in stderr, f"auditkit-ray {args}: a traceback:\n{stderr}"
    foreign = [ln for ln in stderr.splitlines() if FOREIGN.match(ln)]
    assert not foreign, f"auditkit-ray {args}: log lines the user did not ask for: {foreign[:3]}"
