"""The keeper of the warm local cluster (``warm``): ``python -m auditkit_ray.cluster.keeper``, started
detached by the first command that wants the cluster. It has the head node started (``head start``, a process
of its own whose node outlives it, every process of which carries the keeper's mark), writes the state file,
and stops the cluster once no driver has held the lease for the idle timeout, or when it is terminated
(``auditkit-ray down``). Its reaper takes the cluster down with it if it is killed outright.

It imports no Ray: waiting, it holds a few megabytes. Between commands it keeps the cluster lean: Ray Data's
helper actors, which a pipeline starts and leaves behind, go (``head lean``) once no command has used the
cluster for ``LINGER_S`` and no model is resident (``residents``): the next command's pipeline starts them
again."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .local import REAPER_MARK, start_reaper, stop_marked
from .warm import DEFAULT_IDLE_S, START_TIMEOUT_S, State, idle, note_activity, paths

#: how long the cluster stays unused before Ray Data's helper actors are stopped (commands that follow each
#: other closely keep them)
LINGER_S = 30.0


def _head(*args: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> dict:
    """``python -m auditkit_ray.cluster.head ARGS``'s answer (its last line of output, JSON)."""
    out = subprocess.run([sys.executable, "-m", "auditkit_ray.cluster.head", *args], env=env, capture_output=True,
                         text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"head {args[0]} failed (exit {out.returncode}): {tail}")
    return json.loads(lines[-1])


def _keep(args: Any) -> int:
    base = Path(args.state_dir)
    p = paths(base)
    stop = {"now": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # the cluster takes token authentication, as every cluster Ray starts (its token in ~/.ray); the keeper's
    # own look-ins (``head lean``) join it so, as the commands do (``connect.init_ray``)
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    mark = f"{os.getpid()}:{os.urandom(6).hex()}"
    start_reaper(mark)  # first: killed outright, the keeper takes whatever carries its mark with it
    extra = [*(["--num-cpus", str(args.num_cpus)] if args.num_cpus is not None else []),
             *(["--num-gpus", str(args.num_gpus)] if args.num_gpus is not None else [])]
    try:
        node = _head("start", *extra, env={**os.environ, REAPER_MARK: mark}, timeout=START_TIMEOUT_S)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
        print(f"auditkit-ray: the warm local cluster did not start: {exc}", flush=True)
        stop_marked(mark)
        return 1
    st = State(address=node["address"], cluster_id=node["node_id"][:12], keeper_pid=os.getpid(), key=args.key,
               idle_timeout_s=args.idle_timeout, started_at=time.time(), num_cpus=args.num_cpus,
               num_gpus=args.num_gpus, mark=mark)
    tmp = p["state"].with_suffix(".tmp")
    tmp.write_text(json.dumps(st.__dict__))
    os.replace(tmp, p["state"])
    print(f"auditkit-ray: warm local cluster {st.cluster_id} at {st.address} (idle timeout {args.idle_timeout:g}s)",
          flush=True)
    try:
        _wait(p, st, args.idle_timeout, stop)
    finally:
        _retire(p, st)
        stop_marked(mark)
    return 0


def _wait(p: dict[str, Path], st: State, idle_timeout: float, stop: dict[str, bool]) -> None:
    """Until the idle timeout or a signal: note whether commands use the cluster, and keep it lean."""
    last_used = next_lean = time.monotonic()
    lean = True  # nothing of Ray Data's is up yet
    in_use = False
    note_activity(p["state"].parent, False)
    while not stop["now"]:
        time.sleep(0.5)
        busy = not idle(p["active"])
        if busy != in_use:
            in_use = busy
            note_activity(p["state"].parent, busy)
        if busy:
            last_used, lean = time.monotonic(), False
            next_lean = last_used + LINGER_S
            continue
        unused = time.monotonic() - last_used
        if not lean and time.monotonic() >= next_lean:
            lean = _lean(st)  # False while a model is resident: looked at again a while later
            next_lean = time.monotonic() + LINGER_S
        if unused >= idle_timeout:
            # a driver about to connect holds the start lock: then this is not the moment
            fd = os.open(p["start"], os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                if idle(p["active"]):
                    _retire(p, st)
                    print("auditkit-ray: idle timeout; the warm local cluster stopped", flush=True)
                    return
            finally:
                os.close(fd)
    print("auditkit-ray: the warm local cluster stopped", flush=True)


def _lean(st: State) -> bool:
    """Stop Ray Data's helper actors unless a model is resident; True once nothing is left to stop."""
    try:
        out = _head("lean", st.address)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
        print(f"auditkit-ray: could not stop Ray Data's idle helper actors: {exc}", flush=True)
        return True  # not again and again: the next command's end tries once more
    if out.get("stopped"):
        n = out["stopped"]
        print(f"auditkit-ray: stopped {n} idle helper actor{'s' if n > 1 else ''} of Ray Data", flush=True)
    return not out.get("residents")


def _retire(p: dict[str, Path], st: State) -> None:
    """Remove the state file if it is still this keeper's."""
    cur = State.read(p["state"])
    if cur is not None and cur.keeper_pid == st.keeper_pid:
        with contextlib.suppress(FileNotFoundError):
            p["state"].unlink()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m auditkit_ray.cluster.keeper")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_S)
    ap.add_argument("--num-cpus", type=float, default=None)
    ap.add_argument("--num-gpus", type=float, default=None)
    return _keep(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
