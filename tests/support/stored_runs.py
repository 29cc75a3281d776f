"""A stored sweep damaged as an interrupted night leaves it (a cell's last shards and its result gone). Stored
runs written without Ray come from ``auditkit_ray.testing.runs``."""

from __future__ import annotations

import json
from pathlib import Path


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
