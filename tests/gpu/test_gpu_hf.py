"""The ``hf`` backend on GPUs through the real pipeline (issue 32): bfloat16 and float16 on CUDA, one GPU per
generation actor and half a GPU each, and the same per-sample outputs from one actor and from two.

On a CUDA machine (``pytest -m gpu``) the backend is told ``device: cuda``; in the dry mode of
``scripts/gpu-check.sh --cpu`` the same runs go through Ray's logical GPUs with the model on the CPU
(``conftest.py``). The runs are shared by the tests (each is started the first time a test asks for it)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from gpu_check_support import hf_model, run_doc, workers_of
from resident_engines import residents, wait_loaded

from auditkit_ray.api import evaluate, samples_table

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu_cluster")]


def _parameters(model: Path) -> int:
    """The checkpoint's parameter count, from its safetensors header (8-byte length, then JSON)."""
    raw = (model / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    total = 0
    for name, info in header.items():
        if name != "__metadata__":
            count = 1
            for d in info["shape"]:
                count *= d
            total += count
    return total


@pytest.fixture(scope="module")
def hf_run(gpu_mode, gpu_model, gpu_data, tmp_path_factory):
    """hf_run(key) -> RunResult, each run started once per module."""
    gpus = gpu_mode.gpus
    own = min(2, gpus)  # actors with a whole GPU each
    runs = {
        "bf16-one": (hf_model(gpu_mode, gpu_model, dtype="bfloat16", num_gpus=1), 1),
        "bf16-two-halves": (hf_model(gpu_mode, gpu_model, dtype="bfloat16", num_gpus=0.5), 2),
        "fp16-own-gpus": (hf_model(gpu_mode, gpu_model, dtype="float16", num_gpus=1), own),
    }
    done: dict[str, object] = {}

    def get(key: str):
        if key not in done:
            model, actors = runs[key]
            doc = run_doc(key, model, gpu_data, tmp_path_factory.mktemp(f"gpu-{key}"), actors=actors)
            if actors == 1:
                done[key] = evaluate(doc)
                return done[key]
            # every actor loaded before the run whose workers the tests read: the generation stage gives shards
            # to the actors that are up, so an actor still loading when the first one up has done every shard
            # generates nothing. A run of its own starts them, resident; once each has loaded (on a busy host the
            # second may still be loading when that run ends), the measured run leases them.
            with residents(True):
                evaluate({**doc, "store": {"path": str(tmp_path_factory.mktemp(f"gpu-{key}-load"))}})
                assert wait_loaded() == actors
                done[key] = evaluate(doc)
        return done[key]

    return get


def _check_generated(result, model: Path) -> None:
    t = samples_table(result)
    assert t.num_rows == 24
    assert t.column("error").to_pylist() == [None] * 24
    assert all(n and n > 0 for n in t.column("completion_tokens").to_pylist())
    assert result.tokens.source == "tokenizer" and result.tokens.completion > 0
    # 2 bytes per parameter: the weights are in the half-precision dtype asked for (buffers add a few bytes)
    per_param = result.perf.model_size_bytes / _parameters(model)
    assert 2.0 <= per_param < 2.05, per_param


def test_hf_generates_in_bfloat16_on_a_gpu_of_ray(hf_run, gpu_model):
    res = hf_run("bf16-one")
    _check_generated(res, gpu_model)
    assert all(w["gpu_ids"] and w["cuda_visible_devices"] for w in workers_of(res))


def test_hf_generates_in_float16_on_a_gpu_of_ray(hf_run, gpu_model):
    res = hf_run("fp16-own-gpus")
    _check_generated(res, gpu_model)


def test_each_generation_actor_sees_its_own_cuda_visible_devices(hf_run, gpu_mode):
    res = hf_run("fp16-own-gpus")
    by_pid = {w["pid"]: w for w in workers_of(res)}
    assert len(by_pid) == min(2, gpu_mode.gpus), f"one actor per GPU: {sorted(by_pid)}"
    seen: list[str] = []
    for pid, w in by_pid.items():
        # what Ray gave the actor is what CUDA (and so torch) in that process is limited to
        assert w["cuda_visible_devices"] == ",".join(w["gpu_ids"]), (pid, w)
        assert len(w["gpu_ids"]) == 1, (pid, w)
        seen.extend(w["gpu_ids"])
    assert len(set(seen)) == len(seen), f"two actors were given the same GPU: {by_pid}"


def test_two_actors_share_one_gpu_with_num_gpus_half(hf_run):
    res = hf_run("bf16-two-halves")
    by_pid = {w["pid"]: w for w in workers_of(res)}
    assert len(by_pid) == 2, f"two actors generated: {sorted(by_pid)}"
    gpus = {tuple(w["gpu_ids"]) for w in by_pid.values()}
    visible = {w["cuda_visible_devices"] for w in by_pid.values()}
    assert len(gpus) == 1 and len(next(iter(gpus))) == 1, f"both on one GPU: {by_pid}"
    assert visible == {next(iter(gpus))[0]}


def test_one_and_two_actors_give_the_same_per_sample_outputs(hf_run):
    one, two = hf_run("bf16-one"), hf_run("bf16-two-halves")
    assert len({w["pid"] for w in workers_of(two)}) == 2

    def rows(r):
        return [(x["sample_id"], x["repeat"], x["text"], x["completion_tokens"], x["scores"])
                for x in samples_table(r).to_pylist()]

    assert rows(one) == rows(two)
    assert {k: (m.mean, m.n) for k, m in one.metrics.items()} == {k: (m.mean, m.n) for k, m in two.metrics.items()}
