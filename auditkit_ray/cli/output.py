"""What the command writes: results on stdout, diagnostics on stderr.

``--json`` output is the JSON alone on stdout: while such a command runs,
Python-level writes to ``sys.stdout`` (Ray forwards its workers' and raylets'
log lines that way) go to stderr, and the command writes its JSON with
:func:`emit` to the stdout it started with, so
``auditkit-ray run --json > result.json`` is a clean file.

The library logs through ``logging`` and prints nothing; :func:`terminal_logging`
is where the command decides what of it reaches the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import api
from ..errors import ConfigError

_streams: list[Any] = []

#: the package's logger: everything the library logs goes through it or a child of it
LOGGER = "auditkit_ray"


@contextmanager
def json_stdout(enabled: bool) -> Iterator[None]:
    """While enabled, ``sys.stdout`` is stderr and :func:`emit` writes to the real stdout."""
    if not enabled:
        yield
        return
    out = sys.stdout
    _streams.append(out)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = out
        _streams.pop()


class _ReaderMayLeave:
    """``sys.stdout`` while a command runs: when the reader of its output goes away (``| head``, ``| true``),
    the rest of what the command prints goes nowhere instead of raising, so the command finishes and its exit
    code is its verdict (a failed gate stays 1, with its ``error:`` line on stderr), not the pipe's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.reader_gone = False
        #: a write that failed for another reason (a full disk, /dev/full, an I/O error): the output is lost, and
        #: the command says so in one line (``cli.main``) with its verdict kept
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._gone()
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()
            except OSError as exc:
                self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.failed = self.failed or exc
        self._gone()

    def _gone(self) -> None:
        self.reader_gone = True
        quiet_stdout(self._stream)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer...
        return getattr(self._stream, name)


def quiet_stdout(stream: Any = None) -> None:
    """Point stdout's file descriptor at /dev/null: its reader is gone, and the flush at exit must not fail."""
    # no real file descriptor behind it (a test's capture): nothing to point anywhere
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = (stream or sys.__stdout__).fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


@contextmanager
def reader_may_leave() -> Iterator[_ReaderMayLeave]:
    """While the command runs, ``sys.stdout`` survives its reader going away (``_ReaderMayLeave``)."""
    before = sys.stdout
    if before is None:  # started with stdout closed (`>&-`): print() writes nowhere already
        yield _ReaderMayLeave(None)
        return
    safe = _ReaderMayLeave(before)
    sys.stdout = safe
    try:
        yield safe
    finally:
        if sys.stdout is safe:
            sys.stdout = before


def write_failed_line(exc: OSError) -> str:
    """The one line a command prints when its output could not be written to stdout."""
    return f"error: cannot write the output to stdout ({exc.strerror or exc}); what it printed is lost"


def emit(text: str) -> None:
    """Print a command's result: to the original stdout inside json_stdout."""
    out = _streams[-1] if _streams else sys.stdout
    if out is not None:  # None: started with stdout closed (`>&-`)
        print(text, file=out, flush=True)


def print_run(result: Any) -> None:
    """One run's summary table on stdout (coloured on a terminal that wants colour)."""
    print(api.format_run(result, color=api.use_color(sys.stdout)))


def write_output(path: str, text: str) -> None:
    """Write ``--output FILE`` atomically (a reader never sees half a report)."""
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"--output {path}: cannot write ({exc.strerror or exc})") from None


class TerminalFormatter(logging.Formatter):
    """Plain lines as the command has always printed them: ``warning: ...`` and
    ``error: ...`` for those levels, progress (INFO) as it is."""

    PREFIX = {logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.CRITICAL: "error: "}

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and record.levelno >= logging.ERROR:
            text += "\n" + self.formatException(record.exc_info)
        return self.PREFIX.get(record.levelno, "") + text


class StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (a test's
    capture, a redirected stream), flushing each line so progress shows at once."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr: nowhere left to tell anyone
            self.handleError(record)


@contextmanager
def terminal_logging(progress: bool) -> Iterator[None]:
    """While a command runs, the library's warnings and errors go to stderr,
    and its progress lines (INFO) too when ``progress``; afterwards the
    logger is as it was (``main`` may run several times in one process)."""
    logger = logging.getLogger(LOGGER)
    handler = StderrHandler(logging.INFO if progress else logging.WARNING)
    handler.setFormatter(TerminalFormatter())
    before = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(handler.level)
    logger.propagate = False  # a root handler someone configured would print every line twice
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before[0])
        logger.propagate = before[1]


def warnings_until_exit() -> None:
    """After the command: the library's warnings from exit hooks (Ray's local
    cluster stopping) still reach stderr, as the command's own did."""
    logger = logging.getLogger(LOGGER)
    handler = StderrHandler(logging.WARNING)
    handler.setFormatter(TerminalFormatter())
    logger.addHandler(handler)
    logger.propagate = False


class SweepStatus:
    """A sweep's progress from its events (``api.sweep(on_event=...)``): one status line per cell (queued,
    loading, running k of n shards, done, failed: reason) and the sweep's ETA, redrawn in place on a terminal;
    elsewhere (a log file, CI) a plain line per change of state, and for a running cell the line of its first
    shard (its first rate and ETA), then at most one every ``every_s`` seconds, and its last."""

    def __init__(self, cells: list[str] | None = None, stream: Any = None, every_s: float = 10.0) -> None:
        self.stream = stream
        self.lines: dict[str, str] = {c: "queued" for c in cells or []}
        self.eta: float | None = None
        self.drawn = 0
        self.every_s = every_s
        self.last: dict[str, float] = {}

    def _out(self) -> Any:
        return self.stream or sys.stderr

    def __call__(self, event: dict[str, Any]) -> None:
        import time

        e, cell = event["event"], event.get("cell")
        if e == "sweep_started":
            self.lines = {c: "queued" for c in event["cells"]} | self.lines
            if not (self._out().isatty() if hasattr(self._out(), "isatty") else False):
                print(f"sweep {event['sweep']}: {len(event['cells'])} cells queued on {event['cluster_gpus']:g} GPUs",
                      file=self._out(), flush=True)
            return
        if e == "cell_started":
            text = api.cell_start_status(event)
            text += f" (attempt {event['attempt']})" if event["attempt"] > 1 else ""
            self.last.pop(cell, None)  # a new attempt's first shard is shown too
        elif e == "shard_done":
            text = api.shard_status(event)
            self.eta = event.get("eta_s")
        elif e == "cell_done":
            text = "done"
        elif e == "cell_failed":
            text = ("retrying after: " if event.get("retry") else "failed: ") + str(event.get("reason"))
        elif e == "cell_skipped":
            text = "skipped: " + str(event.get("reason"))
        elif e == "sweep_done":
            occ = event.get("gpu_occupancy")
            self._final = (f"sweep {event['sweep']}: {event['done']} of {event['cells']} cells done, "
                           f"{event['failed']} failed"
                           + (f", {event['skipped']} skipped" if event.get("skipped") else "")
                           + (f", GPU occupancy {occ:.0%}" if occ is not None else "")
                           + f", {event['wall_s']:.0f}s")
            self._draw(None)
            return
        else:
            return
        self.lines[cell] = text
        if self._out().isatty() if hasattr(self._out(), "isatty") else False:
            self._draw(cell)
            return
        if e == "shard_done":  # the first shard's figures (the first ETA), then one every every_s, and the last
            now = time.monotonic()
            if now - self.last.get(cell, -self.every_s) < self.every_s and event["shards_done"] < event["shards_total"]:
                return
            self.last[cell] = now
        eta = f"  (sweep ETA {self.eta:.0f}s)" if e == "shard_done" and self.eta else ""
        print(f"[{cell}] {text}{eta}", file=self._out(), flush=True)

    def _draw(self, cell: str | None) -> None:
        out = self._out()
        tty = out.isatty() if hasattr(out, "isatty") else False
        final = getattr(self, "_final", None)
        if not tty:
            if final:
                print(final, file=out, flush=True)
            return
        width = max((len(c) for c in self.lines), default=0)
        block = [f"  {c:<{width}}  {t}" for c, t in self.lines.items()]
        block.append(final or (f"  sweep ETA {self.eta:.0f}s" if self.eta else "  sweep ETA -"))
        if self.drawn:
            out.write(f"\x1b[{self.drawn}F\x1b[J")
        out.write("\n".join(block) + "\n")
        out.flush()
        self.drawn = len(block)
