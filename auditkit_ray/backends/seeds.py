"""Per-request seeds derived from (run seed, sample id, repeat), so that a
sample draws the same tokens whatever batch or actor it lands in."""

from __future__ import annotations

import hashlib
from typing import Any


def _digest(parts: tuple[Any, ...], n_bytes: int) -> int:
    data = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(data).digest()[:n_bytes], "big")


def seed63(*parts: Any) -> int:
    """A non-negative 63-bit seed (torch's generator; the ``hf`` and ``vllm`` backends)."""
    return _digest(parts, 8) & ((1 << 63) - 1)


def seed31(*parts: Any) -> int:
    """A non-negative 31-bit seed (servers and programs that take an int32: ``api``, ``command``)."""
    return _digest(parts, 4) & 0x7FFFFFFF
