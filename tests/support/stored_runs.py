"""Stored runs without Ray, for tests outside ``tests/compare``: that folder's ``build_run`` (its conftest),
which writes a run directory (result.json and the per-sample table) from per-sample scores."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

COMPARE_TESTS = Path(__file__).resolve().parents[1] / "compare"


def build_run(*args: Any, **kwargs: Any) -> Path:
    """``tests/compare/conftest.py``'s ``build_run(root, name, metrics, ...)``."""
    sys.path.insert(0, str(COMPARE_TESTS))
    try:
        from conftest import build_run as _build  # the compare tests' run writer
    finally:
        sys.path.pop(0)
    return _build(*args, **kwargs)
