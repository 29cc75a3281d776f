"""What every stage actor knows: the runs it serves, the process it is, and the command it works for.

A command's folder, environment and user code travel with its runs (``DriverContext``), never with the
cluster: a cluster on this machine is shared by commands started from any folder and shell (``cluster.warm``),
and a generation actor may outlive the command that started it (``cluster.residents``). Every stage applies
the context of the command whose shards it takes before it builds anything from a run's spec (``enter``):
relative paths, ``${VAR}`` values read by libraries, and ``module:Class`` metrics from the command's folder
then mean in the actor what they mean in the command."""

from __future__ import annotations

import os
import socket
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from ..config.models import RunSpec
from ..store.base import ResultStore
from ..store.layout import RunLayout

#: what the driver hands each stage: run fingerprint -> (the run's spec as JSON, its store, its layout)
Runs = dict[str, tuple[str, ResultStore, RunLayout]]


def worker_info() -> dict[str, Any]:
    """This process: host, pid and the GPUs Ray gave it (none outside Ray)."""
    info: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        import ray

        info["gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 - outside Ray (or Ray not started): no GPUs of Ray's
        info["gpu_ids"] = []
    info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return info


#: variables an actor keeps from its own start whatever command it works for: what Ray gave this process (its
#: devices, its threads, its session) and the mark of the cluster it belongs to
KEPT_PREFIXES = ("RAY_", "AUDITKIT_RAY_DRIVER")
KEPT_VARIABLES = frozenset({"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                            "NEURON_RT_VISIBLE_CORES", "TPU_VISIBLE_CHIPS", "OMP_NUM_THREADS"})
#: variables of a shell that say nothing to a worker
VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "PS1", "PROMPT_COMMAND", "HISTFILE",
                      "PYTEST_CURRENT_TEST"})


@dataclass(frozen=True)
class DriverContext:
    """The command a stage works for: its working folder, its environment, and the folders its user code
    imports from (the folder first)."""

    cwd: str
    env: dict[str, str] = field(default_factory=dict)
    path: tuple[str, ...] = ()

    @classmethod
    def capture(cls) -> DriverContext:
        """This process's: the context the driver sends with its runs."""
        cwd = os.getcwd()
        env = {k: v for k, v in os.environ.items() if k not in VOLATILE and not k.startswith("BASH_FUNC_")}
        env["AUDITKIT_RAY_WORKDIR"] = cwd
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        return cls(cwd=cwd, env=env, path=tuple(dict.fromkeys([cwd, *extra])))


_ENTERED: dict[str, Any] = {"base": None, "path": (), "key": None}
_ENTER_LOCK = threading.Lock()


def enter(ctx: DriverContext | None) -> None:
    """Make this process work for the command ``ctx`` describes: its variables (those Ray gave this process
    kept: ``KEPT_*``), its working folder, and its import folders ahead of the others. A process that worked
    for another command before loses that command's variables and folders. None: nothing changes (a cluster
    at an address: the job's own runtime environment sets its workers up)."""
    if ctx is None:
        return
    key = (ctx.cwd, tuple(sorted(ctx.env.items())), ctx.path)
    with _ENTER_LOCK:
        if _ENTERED["key"] == key:
            return
        if _ENTERED["base"] is None:
            _ENTERED["base"] = dict(os.environ)
        base = _ENTERED["base"]
        kept = {k: v for k, v in base.items() if k in KEPT_VARIABLES or k.startswith(KEPT_PREFIXES)}
        wanted = {**ctx.env, **kept}
        for k in [k for k in os.environ if k not in wanted]:
            del os.environ[k]
        os.environ.update(wanted)
        if os.path.isdir(ctx.cwd):
            os.chdir(ctx.cwd)
        sys.path[:] = [p for p in sys.path if p not in _ENTERED["path"]]  # only what an earlier command added
        added = tuple(p for p in ctx.path if p not in sys.path)
        sys.path[:0] = added
        _ENTERED["path"], _ENTERED["key"] = added, key


class RunContext:
    """What a stage knows about each run it serves: spec, store and layout,
    keyed by the run fingerprint (one pipeline can carry several runs that
    share a model: evaluate_many, sweep cells)."""

    def __init__(self, runs: Runs, driver: DriverContext | None = None) -> None:
        enter(driver)  # before any spec is read: its paths and variables are the command's
        self.specs: dict[str, RunSpec] = {}
        self.stores: dict[str, ResultStore] = {}
        self.layouts: dict[str, RunLayout] = {}
        #: each run's spec as the command sent it: what tells a later command's run of the same fingerprint apart
        self.sent: dict[str, str] = {}
        self.add(runs)

    def changed(self, runs: Runs) -> bool:
        """Whether ``runs`` holds a run this stage does not know, or knows as another command sent it."""
        return any(self.sent.get(k) != v[0] for k, v in runs.items())

    def add(self, runs: Runs) -> None:
        """Serve these runs too (a generation actor started before its runs were planned learns them so). A run
        of a fingerprint already known, sent by a later command that leased this resident actor, replaces the
        earlier one's: the fingerprint leaves out where results go and how they are sharded (``store``,
        ``execution.shard_size``), which are that command's."""
        for k, v in runs.items():
            if self.sent.get(k) != v[0]:
                self.stores[k], self.layouts[k] = v[1], v[2]
                self.specs[k] = RunSpec.model_validate_json(v[0])
                self.sent[k] = v[0]

    def of(self, stage: str, run: str) -> tuple[RunSpec, ResultStore, RunLayout]:
        """The run's spec, store and layout; a shard of a run this stage was not given fails naming both."""
        try:
            return self.specs[run], self.stores[run], self.layouts[run]
        except KeyError:
            from ..errors import RunError

            raise RunError(f"{stage}: a shard of run {run[:12]!r}, which this stage was not given") from None
