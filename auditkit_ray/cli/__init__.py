"""The ``auditkit-ray`` command: a thin layer over the public functions (``auditkit_ray.api``).

``main(argv) -> int``; exit codes: 0 ok, 1 a gate failed, 2 usage or
configuration error, 130 interrupted (SIGINT), 143 terminated (SIGTERM). User mistakes print one line to
stderr, never a traceback. One module per command group registers its
sub-commands (``add_parsers``); this one parses, sets up the terminal
(``output``) and maps errors to exit codes.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .. import api
from .._version import __version__
from ..errors import EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE, AuditKitError, Interrupted
from . import (
    cache,
    catalogue,
    cluster,
    compare,
    config,
    inspect,
    k8s,
    lmeval,
    noise,
    output,
    report,
    run,
    runs,
    sweep,
    view,
)


class UsageError(Exception):
    """A command line argparse refuses (exit 2, one line)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, as argparse does
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: {message}")


#: the command groups, in the order their commands are listed by --help
GROUPS = (config.add_parsers, run.add_run_parser, compare.add_parsers, sweep.add_parsers, k8s.add_parsers,
          runs.add_parsers, run.add_stored_parsers, report.add_parsers, config.add_init_parser, lmeval.add_parsers,
          catalogue.add_parsers, inspect.add_parsers, cache.add_parsers, view.add_parsers, cluster.add_parsers)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; each sub-command's handler is its ``handler`` default."""
    p = Parser(prog="auditkit-ray", description="Distributed batch evaluation of language models and agents on Ray.")
    p.add_argument("--version", action="version", version=f"auditkit-ray {__version__}")
    p.add_argument("--verbose", action="store_true",
                   help="also show Ray's and native libraries' own log lines (anywhere on the line; by default "
                        "they go to a log file, named at the end when the command fails)")
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    for add in GROUPS:
        add(sub)
    return p


def _cwd_on_path() -> None:
    # custom metrics named 'module:Class' import from the working directory
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


class _Terminated(KeyboardInterrupt):
    """SIGTERM, taken as an interrupt: the command stops the way Ctrl-C stops it."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; returns its exit code."""
    parser = build_parser()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else signal.getsignal(signal.SIGTERM)
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        if not args.command:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        _cwd_on_path()
        api.prefer_warm_cluster()  # commands without --address share the machine's warm local cluster
        progress = hasattr(args, "quiet") and not args.quiet
        with (output.reader_may_leave(), output.terminal_logging(progress),
              output.json_stdout(bool(getattr(args, "json", False)))):
            return args.handler(args)
    except UsageError as exc:
        print(f"error: {api.error_text(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except AuditKitError as exc:
        print(f"error: {api.error_text(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # the reader of our output went away (`| head`) where sys.stdout was bypassed; what it wanted it has:
        # stop quietly, as Unix tools do (a command's own prints finish, and its verdict stands:
        # output.reader_may_leave)
        _quiet_stdout()
        return 0
    except KeyboardInterrupt as exc:
        what = "terminated" if isinstance(exc, _Terminated) or isinstance(exc.__cause__, _Terminated) else "interrupted"
        print(f"{what}" + (f": {exc}" if isinstance(exc, Interrupted) else ""), file=sys.stderr)
        return EXIT_TERMINATED if what == "terminated" else EXIT_INTERRUPTED
    except SystemExit as exc:  # argparse --help / --version
        return int(exc.code or 0)
    finally:
        if main_thread and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: its reader is gone, and the flush at exit must not fail again."""
    output.quiet_stdout(sys.stdout)


def entrypoint() -> None:
    """The console script ``auditkit-ray``."""
    argv = sys.argv[1:]
    verbose = "--verbose" in argv[: argv.index("--")] if "--" in argv else "--verbose" in argv
    noise.filter_foreign_lines(verbose)
    code = main([a for a in argv if a != "--verbose"] if verbose else argv)
    noise.set_exit_code(code)
    output.warnings_until_exit()
    try:
        if sys.stdout is not None:  # None: started with stdout closed (`>&-`)
            sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    sys.stdout = sys.stderr  # what Ray prints while it shuts down at exit is not the command's output
    # The interpreter's last garbage collection walks every object the run left (Ray, Arrow, pandas,
    # metrics), a noticeable pause at the exit of each command, and nothing left needs collecting once
    # the command is done: freeze them out of it. The exit hooks (Ray's shutdown) still run.
    gc.freeze()
    sys.exit(code)
