"""The ``auditkit-ray`` command: a thin layer over the public functions (``auditkit_ray.api``).

``main(argv) -> int``; exit codes: 0 ok, 1 a gate failed, 2 usage or
configuration error, 130 interrupted. User mistakes print one line to
stderr, never a traceback. One module per command group registers its
sub-commands (``add_parsers``); this one parses, sets up the terminal
(``output``) and maps errors to exit codes.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

from .. import api
from .._version import __version__
from ..errors import EXIT_INTERRUPTED, EXIT_USAGE, AuditKitError
from . import compare, config, k8s, lmeval, output, report, run, runs, sweep


class UsageError(Exception):
    """A command line argparse refuses (exit 2, one line)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, as argparse does
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: {message}")


#: the command groups, in the order their commands are listed by --help
GROUPS = (config.add_parsers, run.add_run_parser, compare.add_parsers, sweep.add_parsers, k8s.add_parsers,
          runs.add_parsers, run.add_stored_parsers, report.add_parsers, config.add_init_parser, lmeval.add_parsers)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; each sub-command's handler is its ``handler`` default."""
    p = Parser(prog="auditkit-ray", description="Distributed batch evaluation of language models and agents on Ray.")
    p.add_argument("--version", action="version", version=f"auditkit-ray {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    for add in GROUPS:
        add(sub)
    return p


def _cwd_on_path() -> None:
    # custom metrics named 'module:Class' import from the working directory
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; returns its exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        if not args.command:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        _cwd_on_path()
        progress = hasattr(args, "quiet") and not args.quiet
        with output.terminal_logging(progress), output.json_stdout(bool(getattr(args, "json", False))):
            return args.handler(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except AuditKitError as exc:
        print(f"error: {api.scrub_secrets(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # argparse --help / --version
        return int(exc.code or 0)


def entrypoint() -> None:
    """The console script ``auditkit-ray``."""
    code = main()
    output.warnings_until_exit()
    sys.stdout.flush()
    sys.stdout = sys.stderr  # what Ray prints while it shuts down at exit is not the command's output
    # The interpreter's last garbage collection walks every object the run left (Ray, Arrow, pandas,
    # metrics), a noticeable pause at the exit of each command, and nothing left needs collecting once
    # the command is done: freeze them out of it. The exit hooks (Ray's shutdown) still run.
    gc.freeze()
    sys.exit(code)
