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


#: what ``--help`` lists after the commands: the exit codes, and the environment a user may set
EXIT_CODES = (("0", "ok"),
              ("1", "a gate failed, a regression, a failed sweep cell, or no metric comparable"),
              ("2", "a usage or configuration error (one line naming file, line and field), or output that could "
                    "not be written"),
              ("130", "interrupted (Ctrl-C); 143: terminated (SIGTERM); running the command again resumes"))
ENVIRONMENT = (
    ("AUDITKIT_RAY_WARM", "0: a private local Ray per command; 1: the library shares the warm one too"),
    ("AUDITKIT_RAY_IDLE_TIMEOUT", "how long the warm local Ray waits idle before it stops (600, 90s, 10m)"),
    ("AUDITKIT_RAY_RESIDENT_IDLE_TIMEOUT", "how long a resident model stays loaded unused (the cluster's)"),
    ("AUDITKIT_RAY_RESIDENT_MEMORY", "resident models' memory budget: 8G, or a share of RAM and GPU (50%)"),
    ("AUDITKIT_RAY_HOME", "where the warm local Ray keeps its state (~/.cache/auditkit-ray/local-cluster)"),
    ("RAY_ADDRESS", "a Ray cluster to run on (as --address)"),
    ("AUDITKIT_RAY_DB", "the ExperimentDB (~/.auditkit-ray/experiments.sqlite)"),
    ("AUDITKIT_RAY_API_CACHE", "the API/judge response cache (~/.cache/auditkit-ray/api-cache.sqlite)"),
    ("AUDITKIT_RAY_MODEL_CACHE", "where s3:// checkpoints are downloaded (~/.cache/auditkit-ray/models)"),
    ("AUDITKIT_RAY_CACHE", "lmeval's task data (~/.cache/auditkit-ray)"),
    ("AUDITKIT_RAY_DATA_ROOT", "every data file a run names must lie under this folder"),
    ("AUDITKIT_RAY_TRUSTED_PATHS", "more folders custom metrics and agents may be imported from (os.pathsep)"),
    ("AUDITKIT_RAY_BACKENDS", "modules that register more backends (comma-separated)"),
    ("AUDITKIT_RAY_VERBOSE", "1: as --verbose"),
    ("AUDITKIT_RAY_LOG_TO_DRIVER", "1: Ray workers' output forwarded to this terminal"),
    ("AWS_ENDPOINT_URL, AWS_DEFAULT_REGION", "S3 endpoint and region (credentials: the AWS variables or role)"),
    ("HF_HUB_OFFLINE, HF_TOKEN", "the Hugging Face Hub: offline, and its token"),
    ("NO_COLOR, FORCE_COLOR", "colour off, or on when not a terminal"),
)


def _epilog() -> str:
    width = max(len(n) for n, _ in ENVIRONMENT)
    lines = ["exit codes:"] + [f"  {c:<4} {what}" for c, what in EXIT_CODES]
    lines += ["", "environment:"] + [f"  {n:<{width}}  {what}" for n, what in ENVIRONMENT]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; each sub-command's handler is its ``handler`` default."""
    p = Parser(prog="auditkit-ray", description="Distributed batch evaluation of language models and agents on Ray.",
               epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
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
    """Run one command line; returns its exit code. Output that could not be written to stdout (a full disk)
    is one line on stderr; the command's verdict stands (a failed gate stays 1), and a command that otherwise
    succeeded exits 2: what it printed is lost."""
    streams: list[Any] = []
    code = _main(argv, streams)
    failed = next((s.failed for s in streams if s.failed is not None), None)
    if failed is not None:
        print(output.write_failed_line(failed), file=sys.stderr)
        code = code or EXIT_USAGE
    return code


def _on_sigint_ignored(signum: int, frame: Any) -> None:
    # SIGINT was ignored when this command started (a background job of a script): it stays ignored, except
    # from `auditkit-ray down`, which interrupts the commands using the cluster it stops
    if api.stopped_by_down():
        raise KeyboardInterrupt()


def _main(argv: Sequence[str] | None, streams: list[Any]) -> int:
    parser = build_parser()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else signal.getsignal(signal.SIGTERM)
    ignored = main_thread and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, _on_sigint_ignored)
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        if not args.command:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        _cwd_on_path()
        api.prefer_warm_cluster()  # commands without --address share the machine's warm local cluster
        if getattr(args, "resident", None) is not None:
            api.prefer_resident(args.resident)
        progress = hasattr(args, "quiet") and not args.quiet
        with (output.reader_may_leave() as out, output.terminal_logging(progress),
              output.json_stdout(bool(getattr(args, "json", False)))):
            streams.append(out)
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
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


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
    except OSError as exc:  # what was still buffered could not be written (a full disk)
        _quiet_stdout()
        print(output.write_failed_line(exc), file=sys.stderr)
        code = code or EXIT_USAGE
    sys.stdout = sys.stderr  # what Ray prints while it shuts down at exit is not the command's output
    # The interpreter's last garbage collection walks every object the run left (Ray, Arrow, pandas,
    # metrics), a noticeable pause at the exit of each command, and nothing left needs collecting once
    # the command is done: freeze them out of it. The exit hooks (Ray's shutdown) still run.
    gc.freeze()
    sys.exit(code)
