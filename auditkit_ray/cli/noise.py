"""Only our own messages on the terminal: the lines Ray and native libraries write to the process's
stderr (Ray's C++ ``core_worker.cc ... E`` lines, ``(raylet)`` notices, ``nanobind: leaked`` at exit,
git's ``fatal: not a git repository`` from lm-eval) go to a log file instead, which the command names at
its end when it held any. ``--verbose`` (or ``AUDITKIT_RAY_VERBOSE=1``) lets them through.

This works on file descriptor 2, not on ``sys.stderr``: most of those lines are written by C++ code or by
child processes that inherit the descriptor. A thread reads the pipe that stands for fd 2 and passes every
other line on to the real stderr, in order. A record of Ray's Python logger is one write to ``sys.stderr``,
and all its lines go where its first goes, the unindented ones of a chained traceback too. Only the console
script turns it on (``auditkit_ray.cli.entrypoint``), never ``main()`` called in-process.

A command that runs a chatty library in its own process (``lmeval``: lm-eval's and transformers' progress
bars and log lines, whatever their shape) wraps it in ``library_output_to_log``: every line on fd 2 then goes
to the log, and the library's own logger alone reaches the terminal. Once the log holds anything, what is
written to fd 2 after the command (a native library's leak report while the interpreter shuts down) goes there
too.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import sys
import tempfile
import threading
import time
from contextlib import contextmanager, suppress
from typing import IO, Iterator

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


#: put before each further line of one write to ``sys.stderr`` that began with a foreign line: the pump keeps it
#: with that line (a Ray logger's record is one write, and its traceback's lines have no shape of their own)
_CONTINUED = "\x01"
_SENTINEL = "\0auditkit-stderr-end\0\n"
_BARRIER = "\0auditkit-stderr-barrier\0\n"


class _Filter:
    def __init__(self) -> None:
        self.log_path: str | None = None
        self.log: IO[str] | None = None
        self.held = 0
        self.everything = False  # library_output_to_log: every line is the library's
        self.reached = threading.Event()  # the pump has read a barrier line
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
            barrier = line.endswith(_BARRIER)
            if barrier:  # after a partial line (a progress bar's "\r" redraw) it ends that line
                line = line[: -len(_BARRIER)] + "\n" if line != _BARRIER else ""
            if line.startswith(_CONTINUED):  # the rest of a foreign record written in one piece
                foreign_block = True
                self._keep(line[len(_CONTINUED):])
                continue
            # a foreign line's continuation (an indented line, a traceback of Ray's own) stays with it
            if line and (self.everything or FOREIGN.match(line) or (foreign_block and line[:1] in (" ", "\t"))):
                foreign_block = True
                self._keep(line)
            elif line:  # empty: a barrier alone, nothing to pass on
                foreign_block = False
                self.out.write(line)
                self.out.flush()
            if barrier:
                self.reached.set()

    def barrier(self) -> None:
        """Return once the pump has judged every line written to fd 2 before this call."""
        self.reached.clear()
        os.write(2, _BARRIER.encode())
        self.reached.wait(2.0)

    def close(self, name_log: bool) -> None:
        """Put fd 2 back, drain the pipe, and name the log file if it holds anything."""
        with suppress(OSError, ValueError):
            sys.stderr.flush()
        if isinstance(sys.stderr, _RecordMarker):
            sys.stderr = sys.stderr.stream
        os.dup2(self.real, 2)
        os.write(self.own_end, _SENTINEL.encode())  # everything before it is read and passed on first
        os.close(self.own_end)
        self.thread.join(2.0)
        if self.log is not None:
            self.log.close()
            # what native code writes while the interpreter shuts down (nanobind's leak report) is more of it
            fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND)
            os.dup2(fd, 2)
            os.close(fd)
            if name_log:
                self.out.write(f"(Ray and library log lines of this command: {self.log_path})\n")
        self.out.flush()


class _RecordMarker:
    """``sys.stderr`` while the filter runs: a write whose first line is foreign (a Ray logger's record, with
    the unindented lines of a chained traceback in it) has its other lines marked as the same record's."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        head, sep, rest = text.partition("\n")
        if rest and FOREIGN.match(head):
            lines = rest.split("\n")
            tail = lines.pop()  # after the last newline: a line still open, or nothing
            rest = "".join(f"{_CONTINUED}{ln}\n" for ln in lines) + (_CONTINUED + tail if tail else "")
        self.stream.write(head + sep + rest)
        return len(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


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
    sys.stderr = _RecordMarker(sys.stderr)  # type: ignore[assignment]
    # registered before Ray is imported, so it runs after Ray's own exit hooks (last in, first out) and
    # their lines are still filtered
    atexit.register(_close_at_exit)


def log_path() -> str | None:
    """The log file of this command's foreign lines, once it holds any (None before, and without the filter)."""
    return _active.log_path if _active is not None else None


@contextmanager
def library_output_to_log(logger: str = "auditkit_ray") -> Iterator[None]:
    """While it runs, every line written to fd 2 goes to the log file (a library's progress bars, its log
    lines, its warnings), and the records of ``logger`` (the command's own progress and warnings) go to the
    terminal. Without the filter (``--verbose``, ``main()`` in-process) it changes nothing."""
    if _active is None:
        yield
        return
    from .output import StderrHandler

    log = logging.getLogger(logger)
    ours = [h for h in log.handlers if isinstance(h, StderrHandler)]
    direct = []
    for h in ours:  # the same lines, written to the real stderr instead of through fd 2
        d = logging.StreamHandler(_active.out)
        d.setLevel(h.level)
        d.setFormatter(h.formatter)
        log.removeHandler(h)
        log.addHandler(d)
        direct.append(d)
    sys.stderr.flush()
    _active.barrier()  # lines written before stay the command's
    _active.everything = True
    try:
        yield
    finally:
        with suppress(OSError, ValueError):
            sys.stderr.flush()
        _active.barrier()  # lines written inside are the library's
        _active.everything = False
        for d in direct:
            log.removeHandler(d)
        for h in ours:
            log.addHandler(h)


_exit_code: list[int] = [0]


def set_exit_code(code: int) -> None:
    """The command's exit code: the log file is named at exit only when the command did not succeed."""
    _exit_code[0] = code


def _close_at_exit() -> None:
    if _active is not None:
        time.sleep(0)  # let the pump thread take what was just written
        _active.close(name_log=_exit_code[0] != 0)
