"""Run the real ``auditkit-ray`` console script in a subprocess, the way a user does."""

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
        return subprocess.run([EXE, *map(str, args)], cwd=cwd, env=full_env, capture_output=True, text=True,
                              timeout=timeout)
    import shlex

    line = " ".join(shlex.quote(str(a)) for a in (EXE, *args)) + " " + shell_tail
    return subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
