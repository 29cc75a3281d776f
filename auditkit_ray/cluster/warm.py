"""The warm local cluster: one local Ray that the commands on this machine share, whatever their working
folder or shell, so that only the first pays for starting it and models stay loaded between them
(``residents``).

A keeper process (``cluster/keeper.py``, started detached by the first command that wants the cluster or by
``auditkit-ray up``) starts the local cluster the way a run starts its private one (``local.start_local``),
writes its address to a state file and waits. Each driver that uses it holds a shared lock on ``active.lock``
for as long as it lives (the kernel drops it when the driver exits, however it dies); the keeper stops the
cluster once nothing has held that lock for the idle timeout, when ``auditkit-ray down`` asks, or when it is
terminated. A keeper killed outright takes its cluster with it (``local``'s reaper), and the next command finds
a state file whose keeper is dead and starts a new one.

What a command's workers need of it (its folder, its environment, user code imported from its folder) travels
with each run (``actors.context``), never with the cluster: the keeper starts with a small base environment
(``keeper_env``), and a cluster is shared by every command with the same Python, packages and resource request
(``cluster_key``, ``State.fits``). Runs on a cluster at an address (``--address``, ``RAY_ADDRESS``) never come
here.

State lives under ``AUDITKIT_RAY_HOME`` (default ``~/.cache/auditkit-ray``), in ``local-cluster/``."""

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ..errors import InfrastructureError

log = logging.getLogger(__name__)

#: the idle timeout a cluster started by a run gets (``AUDITKIT_RAY_IDLE_TIMEOUT`` seconds overrides it)
DEFAULT_IDLE_S = 600.0
#: how long a driver waits for a new keeper's cluster to come up
START_TIMEOUT_S = 90.0
#: how long ``down`` waits for the commands using the cluster to stop after it interrupted them
DRIVERS_STOP_S = 20.0
#: variables of the environment that make a different cluster: what its processes import and which devices
#: they see (a run's other variables travel with the run)
KEY_VARIABLES = ("PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "PYTHONHOME")
#: the keeper's environment, which its cluster's processes inherit: what a process needs to start and what
#: configures Ray itself (``RAY_*``); every other variable is the run's (``actors.context``)
BASE_VARIABLES = KEY_VARIABLES + ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "SHELL",
                                  "VIRTUAL_ENV", "AUDITKIT_RAY_HOME")


def wanted() -> bool | None:
    """``AUDITKIT_RAY_WARM``: ``1`` the warm cluster, ``0`` a private cluster per run, unset: the caller decides
    (the command line uses the warm one, the library a private one)."""
    raw = os.environ.get("AUDITKIT_RAY_WARM", "")
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    if value:
        from ..errors import ConfigError

        raise ConfigError(f"AUDITKIT_RAY_WARM={raw!r}: expected 1 or 0 (also true/false, yes/no, on/off)")
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
    if value < 0 or value != value:
        raise ValueError(text)
    return value * (scale or 1)


def cluster_key(env: dict[str, str] | None = None) -> str:
    """What every command sharing a cluster must share: the Python and the packages its processes run (the
    interpreter, auditkit-ray's version and place, Ray's version, the import path) and the devices they see.
    Not the working folder, not the other variables: those travel with each run."""
    from .._version import __version__

    env = dict(os.environ if env is None else env)
    body = json.dumps({"python": sys.executable, "auditkit_ray": __version__,
                       "package": str(Path(__file__).resolve().parents[1]), "ray": _ray_version(),
                       "env": {k: env.get(k) for k in KEY_VARIABLES}})
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def keeper_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the keeper, and so every process of its cluster, starts with (``BASE_VARIABLES``,
    ``RAY_*``, ``LC_*``): nothing of one command's own variables, secrets included, stays in a shared cluster."""
    env = dict(os.environ if env is None else env)
    return {k: v for k, v in env.items() if k in BASE_VARIABLES or k.startswith(("RAY_", "LC_"))}


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
    #: the mark every process of the cluster carries in its environment (``local.REAPER_MARK``)
    mark: str | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> State | None:
        try:
            data = json.loads(path.read_text())
            known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
            return cls(**known)
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
            "log": base / "keeper.log", "drivers": base / "drivers.log", "down": base / "down.json",
            "activity": base / "activity.json"}


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


def lease_holders(active: Path) -> list[int]:
    """The processes that hold a lock on ``active`` (the drivers using the cluster), from ``/proc/locks``."""
    try:
        ino = os.stat(active).st_ino
        text = Path("/proc/locks").read_text()
    except OSError:
        return []
    pids = set()
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  READ 1234 08:01:56789 0 EOF" (a blocked waiter's line has "->" after the index)
        if "->" in parts:
            parts.remove("->")
        if len(parts) >= 6 and parts[1] == "FLOCK":
            with contextlib.suppress(ValueError):
                if int(parts[5].rsplit(":", 1)[-1]) == ino and int(parts[4]) != os.getpid():
                    pids.add(int(parts[4]))
    return sorted(pids)


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


def connect(num_cpus: float | None, num_gpus: float | None, *, base: Path | None = None,
            idle_s: float | None = None) -> State | None:
    """The warm cluster that fits this command, started if there is none, with this process holding its lease;
    None when the command must start a private cluster instead (another command is using a warm cluster that
    does not fit: another Python or package set, or other resources)."""
    base = base or home()
    p = paths(base)
    key = cluster_key()
    with _locked(p["start"]):
        st = State.read(p["state"])
        if st is not None and st.alive():
            if st.fits(key, num_cpus, num_gpus):
                _take_lease(p["active"])
                _note_driver(p, st)
                return st
            if not idle(p["active"]):
                log.info("the warm local cluster %s runs another Python or package set, or other resources, and "
                         "is in use; this command starts a private one", st.cluster_id)
                return None
            log.info("replacing the idle warm local cluster %s: it runs another Python or package set, or other "
                     "resources", st.cluster_id)
            _stop_keeper(st)
        with contextlib.suppress(FileNotFoundError):
            p["state"].unlink()
        st = _start_keeper(p, key, num_cpus, num_gpus, idle_timeout_s() if idle_s is None else idle_s)
        _take_lease(p["active"])
        _note_driver(p, st)
        return st


def _note_driver(p: dict[str, Path], st: State) -> None:
    with contextlib.suppress(OSError), open(p["drivers"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "cluster_id": st.cluster_id, "at": time.time()}) + "\n")


def _start_keeper(p: dict[str, Path], key: str, num_cpus: float | None, num_gpus: float | None,
                  idle_s: float) -> State:
    args = [sys.executable, "-m", "auditkit_ray.cluster.keeper", "--state-dir", str(p["state"].parent),
            "--key", key, "--idle-timeout", str(idle_s)]
    if num_cpus is not None:
        args += ["--num-cpus", str(num_cpus)]
    if num_gpus is not None:
        args += ["--num-gpus", str(num_gpus)]
    with contextlib.suppress(FileNotFoundError):
        p["down"].unlink()
    # from the state folder: a shared cluster does not hold on to the folder of the command that started it
    with open(p["log"], "ab") as logf:
        proc = subprocess.Popen(args, env=keeper_env(), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                start_new_session=True, cwd=str(p["state"].parent))
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
    """Start the warm cluster unless one that fits is up; returns its state and whether it was started now.
    A live cluster that does not fit (another Python or package set, other resources) is replaced when idle."""
    base = base or home()
    p = paths(base)
    key = cluster_key()
    before = status(base)
    if before is not None and before.fits(key, num_cpus, num_gpus):
        return before, False
    with _locked(p["start"]):
        st = State.read(p["state"])
        if st is not None and st.alive():
            if st.fits(key, num_cpus, num_gpus):
                return st, False
            if not idle(p["active"]):
                raise InfrastructureError(f"the warm local cluster {st.cluster_id} runs another Python or package "
                                          "set, or other resources, and is in use; `auditkit-ray down` stops it")
            _stop_keeper(st)
        with contextlib.suppress(FileNotFoundError):
            p["state"].unlink()
        return _start_keeper(p, key, num_cpus, num_gpus, idle_timeout_s() if idle_s is None else idle_s), True


def down(base: Path | None = None) -> State | None:
    """Stop the warm cluster; returns the state of the cluster that was stopped, None when none was up.

    The commands using it are interrupted first, as Ctrl-C interrupts them (``stopped_by_down`` tells them
    why): each stores what it finished, says how to resume, and exits as an interrupted command does."""
    base = base or home()
    p = paths(base)
    with _locked(p["start"]):
        st = State.read(p["state"])
        if st is None or not st.alive():
            with contextlib.suppress(FileNotFoundError):
                p["state"].unlink()
            return None
        drivers = lease_holders(p["active"])
        if drivers:
            p["down"].write_text(json.dumps({"cluster_id": st.cluster_id, "at": time.time(), "drivers": drivers}))
            for pid in drivers:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGINT)
            deadline = time.monotonic() + DRIVERS_STOP_S
            while time.monotonic() < deadline and not idle(p["active"]):
                time.sleep(0.05)
        if not _stop_keeper(st):
            raise InfrastructureError(f"the warm local cluster's keeper (pid {st.keeper_pid}) did not stop")
        with contextlib.suppress(FileNotFoundError):
            p["state"].unlink()
        return st


def note_activity(base: Path, in_use: bool) -> None:
    """The keeper's record of whether commands use the cluster, and since when (``activity``)."""
    p = paths(base)["activity"]
    tmp = p.with_suffix(".tmp")
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps({"in_use": in_use, "since": time.time()}))
        os.replace(tmp, p)


def activity(base: Path | None = None) -> dict:
    """Whether a command uses the warm cluster now, and how long it has been idle (seconds; None in use)."""
    p = paths(base or home())
    if lease_holders(p["active"]) or not idle(p["active"]):
        return {"in_use": True, "idle_for_s": None}
    try:
        note = json.loads(p["activity"].read_text())
        since = float(note["since"]) if not note.get("in_use") else time.time()
    except (OSError, ValueError, KeyError, TypeError):
        since = time.time()
    return {"in_use": False, "idle_for_s": round(max(0.0, time.time() - since), 1)}


def stopped_by_down(cluster_id: str | None, base: Path | None = None, within_s: float = 120.0) -> bool:
    """Whether ``auditkit-ray down`` has just interrupted the commands using warm cluster ``cluster_id``."""
    if not cluster_id:
        return False
    try:
        note = json.loads(paths(base or home())["down"].read_text())
    except (OSError, ValueError):
        return False
    return note.get("cluster_id") == cluster_id and time.time() - float(note.get("at", 0)) < within_s


def processes(mark: str | None) -> list[dict]:
    """The processes of the local cluster whose processes carry ``mark`` (``local.marked``), with its keeper
    (pid, resident memory in bytes, name): read from ``/proc`` (Linux)."""
    if not mark:
        return []
    from .local import marked

    keeper = int(mark.split(":", 1)[0])  # the keeper started the cluster: the mark begins with its pid
    out = []
    page = os.sysconf("SC_PAGE_SIZE")
    for pid in sorted({keeper, *marked(mark)}):
        try:
            with open(f"/proc/{pid}/statm") as f:
                rss = int(f.read().split()[1]) * page
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue
        out.append({"pid": pid, "rss_bytes": rss, "name": _process_name(cmd)})
    return sorted(out, key=lambda d: -d["rss_bytes"])


def _process_name(cmd: str) -> str:
    """A short name for a cluster process: Ray's worker titles (``ray::GenerationActor``), a Python program's
    script or module, or the program's name (``raylet``)."""
    if cmd.startswith("ray::"):
        return cmd.split()[0]
    words = cmd.split()
    if not words:
        return "?"
    if not Path(words[0]).name.startswith("python"):
        return Path(words[0]).name
    for i, w in enumerate(words[1:], start=1):
        if w == "-m" and i + 1 < len(words):
            return words[i + 1]
        if w.endswith(".py"):
            return Path(w).name
    return Path(words[0]).name
