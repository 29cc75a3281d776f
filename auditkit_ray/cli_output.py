"""`--json` output: the JSON alone on stdout.

While a command with ``--json`` runs, Python-level writes to ``sys.stdout``
(Ray forwards its workers' and raylets' log lines that way) go to stderr, and
the command writes its JSON with :func:`emit` to the stdout it started with,
so ``auditkit-ray run --json > result.json`` is a clean file."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_streams: list[Any] = []


@contextmanager
def json_stdout(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    out = sys.stdout
    _streams.append(out)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = out
        _streams.pop()


def emit(text: str) -> None:
    """Print a command's result: to the original stdout inside json_stdout."""
    print(text, file=_streams[-1] if _streams else sys.stdout, flush=True)
