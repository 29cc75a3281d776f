"""The keeper of the warm local cluster (``warm``): ``python -m auditkit_ray.pipeline.warm_keeper``, started
detached by the first run that wants the cluster. It starts the cluster the way a run starts a private one
(``runtime.start_local``, reaper included), writes the state file, and stops the cluster once no driver has held
the lease for the idle timeout, or when it is terminated (``auditkit-ray down``)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from .runtime import release_local_cluster, start_local
from .warm import DEFAULT_IDLE_S, State, idle, paths


def _keep(args: Any) -> int:
    base = Path(args.state_dir)
    p = paths(base)
    stop = {"now": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ray = start_local(args.num_cpus, args.num_gpus, log_to_driver=False)
    signal.signal(signal.SIGTERM, on_signal)  # ray.init installs its own
    ctx = ray.get_runtime_context()
    address = ray.get_runtime_context().gcs_address
    st = State(address=address, cluster_id=ctx.get_node_id()[:12], keeper_pid=os.getpid(), key=args.key,
               idle_timeout_s=args.idle_timeout, started_at=time.time(), num_cpus=args.num_cpus,
               num_gpus=args.num_gpus)
    tmp = p["state"].with_suffix(".tmp")
    tmp.write_text(json.dumps(st.__dict__))
    os.replace(tmp, p["state"])
    print(f"auditkit-ray: warm local cluster {st.cluster_id} at {address} (idle timeout {args.idle_timeout:g}s)",
          flush=True)
    last_used = time.monotonic()
    while not stop["now"]:
        time.sleep(0.5)
        if not idle(p["active"]):
            last_used = time.monotonic()
        elif time.monotonic() - last_used >= args.idle_timeout:
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
                    break
            finally:
                os.close(fd)
    else:
        _retire(p, st)
        print("auditkit-ray: the warm local cluster stopped", flush=True)
    release_local_cluster()
    return 0


def _retire(p: dict[str, Path], st: State) -> None:
    """Remove the state file if it is still this keeper's."""
    cur = State.read(p["state"])
    if cur is not None and cur.keeper_pid == st.keeper_pid:
        with contextlib.suppress(FileNotFoundError):
            p["state"].unlink()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m auditkit_ray.pipeline.warm_keeper")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_S)
    ap.add_argument("--num-cpus", type=float, default=None)
    ap.add_argument("--num-gpus", type=float, default=None)
    return _keep(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
