"""The warm local cluster: one local Ray that consecutive command-line runs on
this machine share, so that only the first pays for starting it.

A keeper process (``pipeline/warm_keeper.py``, started detached by
the first run or by ``auditkit-ray up``) starts the local cluster the way a run
starts its private one (``runtime.start_local``), writes its address to a state
file and waits. Each driver that uses it holds a shared lock on ``active.lock``
for as long as it lives (the kernel drops it when the driver exits, however it
dies); the keeper stops the cluster once nothing has held that lock for the
idle timeout, when ``auditkit-ray down`` asks, or when it is terminated. A
keeper killed outright takes its cluster with it (``runtime``'s reaper), and the
next run finds a state file whose keeper is dead and starts a new one.

Workers inherit the keeper's environment and working directory, so a run
reuses the cluster only when its own are the same (``cluster_key``); a run with
another environment replaces an idle cluster, or runs on a private one of its
own while another driver is using the warm one. Runs on a cluster at an
address (``--address``, ``RAY_ADDRESS``) never come here.

State lives under ``AUDITKIT_RAY_HOME`` (default ``~/.cache/auditkit-ray``), in
``local-cluster/``."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import InfrastructureError

log = logging.getLogger(__name__)

#: the idle timeout a cluster started by a run gets (``AUDITKIT_RAY_IDLE_TIMEOUT`` seconds overrides it)
DEFAULT_IDLE_S = 600.0
#: how long a driver waits for a new keeper's cluster to come up
START_TIMEOUT_S = 90.0
#: environment variables that differ between two shells of one user without changing what a worker does
_VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "TERM", "TERM_PROGRAM",
                       "TERM_PROGRAM_VERSION", "TERM_SESSION_ID", "WINDOWID", "PS1", "PROMPT_COMMAND",
                       "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "TMUX", "TMUX_PANE", "STY", "HISTFILE",
                       "AUDITKIT_RAY_WARM", "AUDITKIT_RAY_IDLE_TIMEOUT", "PYTEST_CURRENT_TEST",
                       "RAY_AUTH_MODE"})


def worker_env() -> dict[str, str]:
    """What workers need of the driver's environment: user code imports relative to its working directory."""
    cwd = os.getcwd()
    pythonpath = os.pathsep.join(p for p in [cwd, os.environ.get("PYTHONPATH", "")] if p)
    return {"PYTHONPATH": pythonpath, "AUDITKIT_RAY_WORKDIR": cwd}


def wanted() -> bool | None:
    """``AUDITKIT_RAY_WARM``: ``1`` the warm cluster, ``0`` a private cluster per run, unset: the caller decides
    (the command line uses the warm one, the library a private one)."""
    value = os.environ.get("AUDITKIT_RAY_WARM", "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


def home() -> Path:
    base = os.environ.get("AUDITKIT_RAY_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "auditkit-ray")
    return Path(base) / "local-cluster"


def idle_timeout_s(default: float = DEFAULT_IDLE_S) -> float:
    raw = os.environ.get("AUDITKIT_RAY_IDLE_TIMEOUT")
    if not raw:
        return default
    try:
        return parse_duration(raw)
    except ValueError:
        log.warning("AUDITKIT_RAY_IDLE_TIMEOUT=%r is not a duration (e.g. 600, 90s, 10m, 2h); using %gs", raw,
                    default)
        return default


def parse_duration(text: str) -> float:
    """``600``, ``90s``, ``10m``, ``2h`` -> seconds."""
    t = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], None)
    value = float(t[:-1] if scale else t)
    if value < 0:
        raise ValueError(text)
    return value * (scale or 1)


def cluster_key(env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    """What a reused cluster must share with the run: the environment its workers inherit, the working
    directory they import user code from, and the Python and packages that run it (resources: ``fits``)."""
    from .._version import __version__

    env = dict(os.environ if env is None else env)
    kept = sorted((k, v) for k, v in env.items() if k not in _VOLATILE and not k.startswith("BASH_FUNC_"))
    body = json.dumps({"env": kept, "cwd": cwd or os.getcwd(), "python": sys.executable,
                       "auditkit_ray": __version__, "ray": _ray_version()})
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _ray_version() -> str:
    try:
        from importlib.metadata import version

        return version("ray")
    except Exception:  # noqa: BLE001 - not installed: the key still differs from one that has it
        return ""


@dataclass
class State:
    """What the keeper wrote once its cluster was up."""

    address: str
    cluster_id: str
    keeper_pid: int
    key: str
    idle_timeout_s: float
    started_at: float
    num_cpus: float | None = None
    num_gpus: float | None = None

    @classmethod
    def read(cls, path: Path) -> State | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def alive(self) -> bool:
        return _pid_alive(self.keeper_pid)

    def fits(self, key: str, num_cpus: float | None, num_gpus: float | None) -> bool:
        """Whether a run with this key and these resources (None: whatever the machine has) can use it."""
        return self.key == key and num_cpus in (None, self.num_cpus) and num_gpus in (None, self.num_gpus)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (killed, not yet reaped by its parent) is gone for our purposes
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    return True


def paths(base: Path) -> dict[str, Path]:
    return {"state": base / "state.json", "start": base / "start.lock", "active": base / "active.lock",
            "log": base / "keeper.log", "drivers": base / "drivers.log"}


@contextlib.contextmanager
def _locked(path: Path, kind: int = fcntl.LOCK_EX) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, kind)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def idle(active: Path) -> bool:
    """Whether no driver holds the shared lock on ``active``."""
    fd = os.open(active, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


#: the shared lock this process holds on the warm cluster it uses (kept open for the process's lifetime)
_LEASE: list[int] = []


def _take_lease(active: Path) -> None:
    fd = os.open(active, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    os.set_inheritable(fd, False)
    _LEASE.append(fd)


def release_lease() -> None:
    while _LEASE:
        with contextlib.suppress(OSError):
            os.close(_LEASE.pop())


def status(base: Path | None = None) -> State | None:
    """The warm cluster's state when its keeper is alive, else None."""
    p = paths(base or home())
    st = State.read(p["state"])
    return st if st is not None and st.alive() else None


def connect_address(num_cpus: float | None, num_gpus: float | None, worker_env: dict[str, str],
                    *, base: Path | None = None, idle_s: float | None = None) -> str | None:
    """The address of a warm cluster that fits this run, started if there is none, with this process holding
    its lease; None when a run must start a private cluster instead (another driver is using a warm cluster
    that does not fit this run)."""
    base = base or home()
    p = paths(base)
    env = {**os.environ, **worker_env}
    key = cluster_key(env)
    with _locked(p["start"]):
        st = State.read(p["state"])
        if st is not None and st.alive():
            if st.fits(key, num_cpus, num_gpus):
                _take_lease(p["active"])
                _note_driver(p, st)
                return st.address
            if not idle(p["active"]):
                log.info("the warm local cluster %s serves another environment or other resources and is in use; "
                         "this run starts a private one", st.cluster_id)
                return None
            log.info("replacing the idle warm local cluster %s: this run's environment or resources differ",
                     st.cluster_id)
            _stop_keeper(st)
        with contextlib.suppress(FileNotFoundError):
            p["state"].unlink()
        st = _start_keeper(p, key, num_cpus, num_gpus, env, idle_timeout_s() if idle_s is None else idle_s)
        _take_lease(p["active"])
        _note_driver(p, st)
        return st.address


def _note_driver(p: dict[str, Path], st: State) -> None:
    with contextlib.suppress(OSError), open(p["drivers"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "cluster_id": st.cluster_id, "at": time.time()}) + "\n")


def _start_keeper(p: dict[str, Path], key: str, num_cpus: float | None, num_gpus: float | None,
                  env: dict[str, str], idle_s: float) -> State:
    args = [sys.executable, "-m", "auditkit_ray.pipeline.warm_keeper", "--state-dir", str(p["state"].parent),
            "--key", key, "--idle-timeout", str(idle_s)]
    if num_cpus is not None:
        args += ["--num-cpus", str(num_cpus)]
    if num_gpus is not None:
        args += ["--num-gpus", str(num_gpus)]
    with open(p["log"], "ab") as logf:
        proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                start_new_session=True, cwd=os.getcwd())
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        st = State.read(p["state"])
        if st is not None and st.keeper_pid == proc.pid:
            return st
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        proc.kill()
    tail = ""
    with contextlib.suppress(OSError):
        tail = p["log"].read_text(errors="replace").strip().splitlines()[-1]
    raise InfrastructureError(f"the warm local Ray cluster did not start ({tail or 'no output'}; log: {p['log']}); "
                              "AUDITKIT_RAY_WARM=0 runs each command on a private cluster")


def _stop_keeper(st: State, timeout: float = 30.0) -> bool:
    """Ask the keeper to stop its cluster and wait for it to exit; True once it has."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(st.keeper_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(st.keeper_pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(st.keeper_pid, signal.SIGKILL)  # its reaper then kills the cluster's processes
    return not _pid_alive(st.keeper_pid)


def up(num_cpus: float | None = None, num_gpus: float | None = None, idle_s: float | None = None,
       base: Path | None = None) -> tuple[State, bool]:
    """Start the warm cluster for this environment unless it is up; returns its state and whether it was
    started now."""
    base = base or home()
    p = paths(base)
    before = status(base)
    env = {**os.environ, **worker_env()}
    key = cluster_key(env)
    if before is not None and before.fits(key, num_cpus, num_gpus):
        return before, False
    with _locked(p["start"]):
        st = State.read(p["state"])
        if st is not None and st.alive():
            if st.fits(key, num_cpus, num_gpus):
                return st, False
            if not idle(p["active"]):
                raise InfrastructureError(f"the warm local cluster {st.cluster_id} serves another environment and "
                                          "is in use; `auditkit-ray down` stops it")
            _stop_keeper(st)
        with contextlib.suppress(FileNotFoundError):
            p["state"].unlink()
        return _start_keeper(p, key, num_cpus, num_gpus, env, idle_timeout_s() if idle_s is None else idle_s), True


def down(base: Path | None = None) -> State | None:
    """Stop the warm cluster (whoever uses it: their runs fail and resume when run again); returns the state
    of the cluster that was stopped, None when none was up."""
    base = base or home()
    p = paths(base)
    with _locked(p["start"]):
        st = State.read(p["state"])
        if st is None or not st.alive():
            with contextlib.suppress(FileNotFoundError):
                p["state"].unlink()
            return None
        if not _stop_keeper(st):
            raise InfrastructureError(f"the warm local cluster's keeper (pid {st.keeper_pid}) did not stop")
        with contextlib.suppress(FileNotFoundError):
            p["state"].unlink()
        return st
