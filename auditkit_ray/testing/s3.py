"""A real S3-compatible server on 127.0.0.1 for tests and benchmarks: moto in
server mode (the ``moto[server]`` package, a dev extra), in its own process."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO


def start_moto_server(log: IO[str] | None = None, timeout_s: float = 30.0) -> tuple[subprocess.Popen, str, int]:
    """Start ``moto_server`` on a free port and wait until it accepts
    connections; returns (process, endpoint URL, port). Stop it with
    ``process.terminate()``."""
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log or subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}", port
