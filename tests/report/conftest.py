"""Fixtures: a result store with a pruning x quantization sweep, written
directly by ``auditkit_ray.testing.runs`` (RunResult JSON + per-sample Parquet
shards in the run_table layout, sweep.json + manifest.json), no Ray, with
realistic per-sample rows (prompt, raw and extracted answer) and some hostile
text to check escaping.
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

from auditkit_ray.testing import runs as stored

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
    from auditkit_ray.core.types import Score, Status

    rng = random.Random(seed)
    ids = sample_ids()
    if right is None:
        k = round(accuracy * len(ids))
        # a stable order of difficulty, so lower accuracy loses the hardest samples (plus noise)
        order = sorted(ids, key=lambda s: (int(hashlib.md5(s.encode()).hexdigest(), 16) % 1000) + rng.random() * 120)
        right = set(order[:k])
    fp = _fp(name, seed, accuracy)
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
            scores.append(s)
        rows.append({"sample_id": sid, "prompt": prompt, "target": target, "text": raw, "raw_text": raw,
                     "error": "generation failed: simulated" if sid in errors else None,
                     "annotations": {"number": answer}, "scores": scores, "latency_s": 0.01 + 0.001 * i})
    result = stored.write_run(
        rows,
        name=name,
        store=store,
        fingerprint=fp,
        metrics={"exact_match": {}, "token_f1": {}, "output_length": {"direction": "minimize"}},
        shard_size=8,
        generation_fingerprint=_fp("gen", fp),
        dataset_fingerprint=DATASET,
        seed=0,
        config=config or {"name": name},
        perf={"samples": len(ids), **(perf or {})},
        tokens={"prompt": 10 * len(ids), "completion": 8 * len(ids), "source": "engine"},
        backend={"type": "hf"},
        created_at="2026-01-01T00:00:00+00:00",
    )
    return result.parent


def write_sweep(store: Path, name: str = "pruning-grid") -> Path:
    """The 3 checkpoints x 2 quantizations grid as a finished sweep; returns
    ``store/sweeps/<fp>``."""
    members = []
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
        members.append({"name": run_name, "fingerprint": d.name})
    sfp = _fp("sweep", name, [r["fingerprint"] for r in members])
    return stored.write_sweep(store, name, members, fingerprint=sfp)


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
