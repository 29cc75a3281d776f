"""Stored runs without Ray, for tests outside ``tests/compare``: that folder's ``build_run`` (its conftest),
which writes a run directory (result.json and the per-sample table) from per-sample scores; and a stored sweep
damaged as an interrupted night leaves it (a cell's last shards and its result gone)."""

from __future__ import annotations

import json
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


def drop_shards(store: Path, run_name: str, shards: list[int]) -> None:
    """Remove the run ``run_name`` of the store's sweep: these shards (its rows and its stored outputs) and its
    result, so that running the sweep again does those shards again."""
    (manifest,) = store.glob("sweeps/*/manifest.json")
    fp = next(r["fingerprint"] for r in json.loads(manifest.read_text())["runs"] if r["name"] == run_name)
    result = store / "runs" / fp / "result.json"
    gen_fp = json.loads(result.read_text())["generation_fingerprint"]
    for k in shards:
        for pattern in (f"runs/{fp}/*/shard-{k:05d}.parquet", f"generations/{gen_fp}/*/shard-{k:05d}.parquet"):
            (stored,) = store.glob(pattern)
            stored.unlink()
    result.unlink()
