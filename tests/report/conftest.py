"""Fixtures: a result store with a pruning x quantization sweep, written
directly (RunResult JSON + per-sample Parquet shards in the run_table layout,
sweep.json + manifest.json), no Ray. Same approach as tests/compare/conftest.py,
with realistic per-sample rows (prompt, raw and extracted answer) and some
hostile text to check escaping.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

DATASET = "d" * 64
N = 40
HOSTILE_ID = 'q<i>"&\'07'
HOSTILE_TEXT = "<script>alert('x')</script> & \"quoted\" \x01 ]]> |pipe| *star*"

#: (checkpoint, pruning fraction, quantization) -> (accuracy, model size in bytes, latency p50)
GRID = [
    ("tiny-model", 0.0, None, 0.90, 400_000_000, 0.040),
    ("tiny-model-p25", 0.25, None, 0.85, 300_000_000, 0.034),
    ("tiny-model-p50", 0.50, None, 0.60, 200_000_000, 0.030),
    ("tiny-model", 0.0, "int8-dynamic", 0.875, 100_000_000, 0.025),
    ("tiny-model-p25", 0.25, "int8-dynamic", 0.80, 75_000_000, 0.022),
    ("tiny-model-p50", 0.50, "int8-dynamic", 0.50, 50_000_000, 0.021),
]


def _fp(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def sample_ids() -> list[str]:
    return [f"q{i:03d}" for i in range(N - 1)] + [HOSTILE_ID]


def write_run(
    store: Path,
    name: str,
    *,
    accuracy: float,
    seed: int,
    config: dict | None = None,
    perf: dict | None = None,
    right: set[str] | None = None,
    errors: tuple[str, ...] = (),
    unknown: tuple[str, ...] = (),
    unknown_metrics: tuple[str, ...] = ("token_f1",),
) -> Path:
    """A run under ``store/runs/<fp>/``: exact_match (binary, higher is
    better, on the extracted number), token_f1 (higher), output_length
    (lower). Returns the run directory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from auditkit_ray.core.aggregate import MeanStats, summarize
    from auditkit_ray.core.result import MetricSummary, Perf, RunResult, TokenUsage
    from auditkit_ray.core.types import Score, Status

    rng = random.Random(seed)
    ids = sample_ids()
    if right is None:
        k = round(accuracy * len(ids))
        # a stable order of difficulty, so lower accuracy loses the hardest samples (plus noise)
        order = sorted(ids, key=lambda s: (int(hashlib.md5(s.encode()).hexdigest(), 16) % 1000) + rng.random() * 120)
        right = set(order[:k])
    fp = _fp(name, seed, accuracy)
    run_dir = store / "runs" / fp
    shard_dir = run_dir / "s8"
    shard_dir.mkdir(parents=True, exist_ok=True)
    stats = {"exact_match": MeanStats(), "token_f1": MeanStats(), "output_length": MeanStats()}
    rows = []
    for i, sid in enumerate(ids):
        a, b = i % 7, (i * 3) % 11
        target = str(a + b)
        ok = sid in right
        answer = target if ok else str(a + b + 1 + i % 3)
        raw = (
            (
                f"Let me think. {a} plus {b} is {answer}."
                if ok
                else f"Let me think. Hmm, {a} plus {b} might be {answer}."
            )
            if sid != HOSTILE_ID
            else f"{HOSTILE_TEXT} {answer}"
        )
        prompt = f"What is {a} plus {b}? Answer:" if sid != HOSTILE_ID else f"{HOSTILE_TEXT} What is {a} plus {b}?"
        scores = []
        for m in ("exact_match", "token_f1", "output_length"):
            if sid in errors:
                s = Score(name=m, status=Status.ERROR, reason="generation failed: simulated")
            elif sid in unknown and m in unknown_metrics:
                s = Score(name=m, status=Status.UNKNOWN, reason="no reference")
            elif m == "exact_match":
                s = Score.scored(m, 1.0 if ok else 0.0)
            elif m == "token_f1":
                s = Score.scored(m, 1.0 if ok else round(0.2 + 0.5 * rng.random(), 3))
            else:
                s = Score.scored(m, float(len(raw.split())))
            stats[m].add(s)
            scores.append(s.model_dump(mode="json"))
        rows.append(
            {
                "shard": i // 8,
                "index": i % 8,
                "sample_id": sid,
                "repeat": 0,
                "prompt": prompt,
                "target": json.dumps(target),
                "text": raw,
                "raw_text": raw,
                "error": "generation failed: simulated" if sid in errors else None,
                "annotations": json.dumps({"number": answer}),
                "scores": json.dumps(scores),
                "latency_s": 0.01 + 0.001 * i,
            }
        )
    for shard in sorted({r["shard"] for r in rows}):
        part = [r for r in rows if r["shard"] == shard]
        cols = {k: [r[k] for r in part] for k in part[0]}
        table = pa.table({
            "shard": pa.array(cols["shard"], pa.int32()), "index": pa.array(cols["index"], pa.int32()),
            "sample_id": pa.array(cols["sample_id"], pa.string()), "repeat": pa.array(cols["repeat"], pa.int32()),
            "prompt": pa.array(cols["prompt"], pa.string()), "target": pa.array(cols["target"], pa.string()),
            "text": pa.array(cols["text"], pa.string()), "raw_text": pa.array(cols["raw_text"], pa.string()),
            "error": pa.array(cols["error"], pa.string()), "annotations": pa.array(cols["annotations"], pa.string()),
            "scores": pa.array(cols["scores"], pa.string()), "latency_s": pa.array(cols["latency_s"], pa.float64()),
        })
        pq.write_table(table, shard_dir / f"shard-{shard:05d}.parquet")
    directions = {"exact_match": "maximize", "token_f1": "maximize", "output_length": "minimize"}
    summaries = {}
    for m, ms in stats.items():
        summ = summarize(ms)
        summaries[m] = MetricSummary(
            name=m,
            direction=directions[m],
            identity={"name": m, "class": f"fixtures:{m}", "version": "1", "direction": directions[m], "params": {}},
            **summ,
        )
    result = RunResult(
        run_id=fp[:16],
        name=name,
        fingerprint=fp,
        generation_fingerprint=_fp("gen", fp),
        dataset_fingerprint=DATASET,
        seed=0,
        config=config or {"name": name},
        metrics=summaries,
        perf=Perf(samples=len(ids), **(perf or {})),
        tokens=TokenUsage(prompt=10 * len(ids), completion=8 * len(ids), source="engine"),
        samples_path=str(shard_dir),
        backend={"type": "hf"},
        created_at="2026-01-01T00:00:00+00:00",
        error_count=len(errors),
    )
    result.save(run_dir / "result.json")
    return run_dir


def write_sweep(store: Path, name: str = "pruning-grid") -> Path:
    """The 3 checkpoints x 2 quantizations grid as a finished sweep; returns
    ``store/sweeps/<fp>``."""
    runs = []
    for i, (ckpt, prune, quant, acc, size, p50) in enumerate(GRID):
        run_name = f"tiny/path={ckpt}/quantization={quant}"
        config = {
            "name": run_name,
            "model": {"type": "hf", "path": f"/ckpt/{ckpt}", "quantization": quant, "batch_size": 16},
            "dataset": {"path": "arith.jsonl"},
            "store": {"path": str(store)},
        }
        d = write_run(
            store,
            run_name,
            accuracy=acc,
            seed=i,
            config=config,
            perf={
                "latency_p50_s": p50,
                "latency_p95_s": p50 * 1.5,
                "latency_scope": "batch",
                "model_size_bytes": size,
                "wall_s": 10.0 + i,
                "throughput_samples_per_s": 40.0 / (10.0 + i),
            },
            errors=("q005",) if i == 5 else (),
            unknown=("q006",) if i == 2 else (),
        )
        runs.append({"name": run_name, "fingerprint": d.name})
    sfp = _fp("sweep", name, [r["fingerprint"] for r in runs])
    sdir = store / "sweeps" / sfp
    sdir.mkdir(parents=True)
    (sdir / "sweep.json").write_text(
        json.dumps({"name": name, "fingerprint": sfp, "cells": [], "runs": runs}, indent=2)
    )
    (sdir / "manifest.json").write_text(
        json.dumps(
            {
                "name": name,
                "fingerprint": sfp,
                "runs": [
                    {
                        **r,
                        "cell": "-",
                        "state": "complete",
                        "result": str(store / "runs" / r["fingerprint"] / "result.json"),
                    }
                    for r in runs
                ],
            },
            indent=2,
        )
    )
    return sdir


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory) -> Path:
    pytest.importorskip("pyarrow")
    return write_sweep(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="session")
def sweep_runs(sweep_dir) -> list[Path]:
    """The sweep's run directories, in grid order."""
    doc = json.loads((sweep_dir / "sweep.json").read_text())
    store = sweep_dir.parent.parent
    return [store / "runs" / r["fingerprint"] for r in doc["runs"]]


@pytest.fixture(scope="session")
def report_of():
    """report_of(*paths, **build_report kwargs) with few resamples (fast)."""
    from auditkit_ray.report.loader import build_report

    def _make(*paths, **kw):
        kw.setdefault("n_resamples", 200)
        return build_report([str(p) for p in paths], **kw)

    return _make


CHROMIUM_INSTALL = "apt-get update && apt-get install -y chromium"


def find_chromium() -> str:
    """The headless browser. Missing is a test failure, not a skip: `make test`
    installs it (the Makefile runs CHROMIUM_INSTALL when it is absent)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(f"chromium is not installed; install it with: {CHROMIUM_INSTALL}", pytrace=False)


def run_chromium(binary: str, tmp: Path, url: str, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess:
    profile = tmp / f"chromium-profile-{len(list(tmp.glob('chromium-profile-*')))}"
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def kit():
    """The builders and constants of this conftest, for tests (conftest
    modules are not importable under --import-mode=importlib)."""
    import types

    return types.SimpleNamespace(GRID=GRID, N=N, HOSTILE_ID=HOSTILE_ID, HOSTILE_TEXT=HOSTILE_TEXT, DATASET=DATASET,
                                 write_run=write_run, write_sweep=write_sweep, sample_ids=sample_ids,
                                 run_chromium=run_chromium, find_chromium=find_chromium,
                                 CHROMIUM_INSTALL=CHROMIUM_INSTALL)
