"""Typed errors. Each maps to a CLI exit code.

0 ok, 1 a gate failed or a regression, 2 usage or configuration error,
130 interrupted (SIGINT), 143 terminated (SIGTERM). User mistakes raise one of these and the CLI prints one line,
never a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_GATE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class AuditKitError(Exception):
    """Base of every error that the CLI turns into a message and an exit code."""

    exit_code = EXIT_USAGE


class ConfigError(AuditKitError):
    """A run or sweep file (or a Python spec) is invalid."""


class ModelSourceError(ConfigError):
    """The model's checkpoint cannot be found or pinned (no such directory, no weights, a Hub id or an
    ``s3://`` prefix that cannot be resolved). A run stops with it (exit 2); a sweep fails that cell alone."""


class DataError(AuditKitError):
    """A dataset cannot be read or a sample lacks what the run needs."""


class ResultFormatError(AuditKitError):
    """A results file is malformed or of a format this version cannot read."""


class MissingExtraError(AuditKitError):
    """An optional dependency is not installed."""

    def __init__(self, module: str, extra: str):
        self.module = module
        self.extra = extra
        super().__init__(
            f"this feature needs the '{module}' package: pip install 'auditkit-ray[{extra}]'"
        )


class RunError(AuditKitError):
    """A fatal error during a run (engine dead, out of memory, store unreachable)."""


class InfrastructureError(RunError):
    """A part of the cluster was lost while running (an actor or node died, an engine crashed): running again
    can help, so a sweep retries the cell (``execution.cell_retries``)."""


class ModelLoadError(RunError):
    """The model could not be loaded (corrupt weights, a load that hung past ``execution.load_timeout_s``):
    a failure of the whole run or sweep cell, never an error per sample."""


class GateFailed(AuditKitError):
    exit_code = EXIT_GATE


class Interrupted(KeyboardInterrupt):
    """A run stopped by SIGINT or SIGTERM, with what it leaves (how many shards are stored). A
    ``KeyboardInterrupt``, so nothing that handles a failed run or sweep cell takes it for one."""


def require(module: str, extra: str):
    """Import an optional heavy dependency or raise a one-line MissingExtraError."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised by the extra test
        raise MissingExtraError(module.split(".")[0], extra) from exc


#: the names of Ray's errors for a part of the cluster that was lost: a run started again can succeed
RAY_LOST_ERRORS = frozenset({"ActorDiedError", "RayActorError", "ActorUnavailableError", "NodeDiedError",
                             "WorkerCrashedError", "ObjectLostError", "OwnerDiedError",
                             "ObjectReconstructionFailedError", "LocalRayletDiedError"})
