"""Only our own messages on the terminal: the lines Ray and native libraries write to the process's
stderr (Ray's C++ ``core_worker.cc ... E`` lines, ``(raylet)`` notices, ``nanobind: leaked`` at exit,
git's ``fatal: not a git repository`` from lm-eval) go to a log file instead, which the command names at
its end when it held any. ``--verbose`` (or ``AUDITKIT_RAY_VERBOSE=1``) lets them through.

This works on file descriptor 2, not on ``sys.stderr``: most of those lines are written by C++ code or by
child processes that inherit the descriptor. A thread reads the pipe that stands for fd 2 and passes every
other line on to the real stderr, in order. Only the console script turns it on (``auditkit_ray.cli.
entrypoint``), never ``main()`` called in-process.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import tempfile
import threading
import time
from typing import IO

#: lines that are another program's log, not the command's message
FOREIGN = re.compile(
    r"^(?:\x1b\[[0-9;]*m)*(?:"
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [DIWEF] \d+ \d+\] "  # Ray's C++ log lines
    r"|\((?:raylet|gcs_server|pid=\d+)[^)]*\)"  # Ray's forwarded notices
    r"|nanobind: leaked"
    r"|fatal: not a git repository"
    r"|\*\*\* SIGTERM received"  # Ray's C++ signal report
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+[\w.]+\.py:\d+ -- "  # Ray's loggers
    r")"
)


_SENTINEL = "\0auditkit-stderr-end\0\n"


class _Filter:
    def __init__(self) -> None:
        self.log_path: str | None = None
        self.log: IO[str] | None = None
        self.held = 0
        self.real = os.dup(2)
        r, w = os.pipe()
        os.dup2(w, 2)
        self.own_end = w  # to write the closing sentinel (children may hold the other write ends)
        self.reader = os.fdopen(r, "r", encoding="utf-8", errors="replace", newline="")
        self.out = os.fdopen(self.real, "w", encoding="utf-8", errors="replace", closefd=False)
        self.thread = threading.Thread(target=self._pump, name="auditkit-stderr", daemon=True)
        self.thread.start()

    def _keep(self, line: str) -> None:
        if self.log is None:
            fd, self.log_path = tempfile.mkstemp(prefix=f"auditkit-ray-{os.getpid()}-", suffix=".log")
            self.log = os.fdopen(fd, "w", encoding="utf-8")
        self.log.write(line)
        self.log.flush()
        self.held += 1

    def _pump(self) -> None:
        foreign_block = False
        for line in self.reader:
            if line == _SENTINEL:
                return
            # a foreign line's continuation (an indented line, a traceback of Ray's own) stays with it
            if FOREIGN.match(line) or (foreign_block and line[:1] in (" ", "\t")):
                foreign_block = True
                self._keep(line)
                continue
            foreign_block = False
            self.out.write(line)
            self.out.flush()

    def close(self, name_log: bool) -> None:
        """Put fd 2 back, drain the pipe, and name the log file if it holds anything."""
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self.real, 2)
        os.write(self.own_end, _SENTINEL.encode())  # everything before it is read and passed on first
        os.close(self.own_end)
        self.thread.join(2.0)
        if self.log is not None:
            self.log.close()
            if name_log:
                self.out.write(f"(Ray and library log lines of this command: {self.log_path})\n")
        self.out.flush()


_active: _Filter | None = None


def filter_foreign_lines(verbose: bool) -> None:
    """Send other programs' log lines on fd 2 to a log file until the process exits."""
    global _active
    if verbose or os.environ.get("AUDITKIT_RAY_VERBOSE") == "1" or _active is not None:
        return
    try:
        _active = _Filter()
    except OSError:  # no usable fd 2 (a closed stderr): nothing to filter
        return
    # registered before Ray is imported, so it runs after Ray's own exit hooks (last in, first out) and
    # their lines are still filtered
    atexit.register(_close_at_exit)


_exit_code: list[int] = [0]


def set_exit_code(code: int) -> None:
    """The command's exit code: the log file is named at exit only when the command did not succeed."""
    _exit_code[0] = code


def _close_at_exit() -> None:
    if _active is not None:
        time.sleep(0)  # let the pump thread take what was just written
        _active.close(name_log=_exit_code[0] != 0)
