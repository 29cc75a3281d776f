"""The pipeline with the real transformers backend on the repo's tiny model."""

import pytest

from auditkit_ray.api import evaluate

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _hf(tiny_model, **kw):
    return {"type": "hf", "path": str(tiny_model), "batch_size": 4, **kw}


def test_hf_same_per_sample_scores_on_one_and_two_actors(make_spec, tiny_model, rows, numbers):
    over = dict(
        model=_hf(tiny_model),
        generation={"max_new_tokens": 6},
        annotators=[{"type": "regex", "name": "num", "pattern": r"(\d+)", "select": "last"}],
        metrics=["exact_match", {"name": "exact_match", "on": "num"}, "token_f1", "non_degenerate"],
    )
    one = evaluate(make_spec("a", execution={"shard_size": 8, "generation_actors": 1}, **over))
    two = evaluate(make_spec("b", execution={"shard_size": 8, "generation_actors": 2}, **over))
    assert rows(one) == rows(two)
    assert numbers(one) == numbers(two)
    assert one.tokens.completion > 0 and one.tokens.source == "tokenizer"
    assert one.perf.latency_scope == "batch" and one.perf.latency_p50_s > 0
    assert one.perf.model_size_bytes and one.perf.model_size_bytes > 100_000  # parameters + buffers of the loaded model
    assert set(one.metrics) == {"exact_match", "exact_match@num", "token_f1", "non_degenerate"}


def test_hf_sampled_decoding_with_a_seed_repeats_across_actor_counts(make_spec, tiny_model, rows):
    over = dict(model=_hf(tiny_model), generation={"max_new_tokens": 6, "temperature": 1.0}, repeats=2)
    one = evaluate(make_spec("c", execution={"shard_size": 8, "generation_actors": 1}, **over))
    two = evaluate(make_spec("d", execution={"shard_size": 8, "generation_actors": 2}, **over))
    assert rows(one) == rows(two)
    texts = [r[2] for r in rows(one)]
    assert len(texts) == 80
    # the two repeats of a sample draw differently (different derived seeds)
    assert sum(texts[i] != texts[i + 1] for i in range(0, 80, 2)) > 10


def test_evaluate_many_loads_the_model_once_per_actor_across_datasets(make_spec, tiny_model, tmp_path):
    import json

    from auditkit_ray.api import evaluate_many, samples_table

    other = tmp_path / "other.jsonl"
    other.write_text(
        "".join(
            json.dumps({"id": f"o{i}", "question": f"What is {i} plus 1?", "answer": str(i + 1)}) + "\n"
            for i in range(12)
        )
    )
    base = make_spec(
        model=_hf(tiny_model), generation={"max_new_tokens": 4}, execution={"shard_size": 8, "generation_actors": 1}
    )
    results = evaluate_many(base, [base.dataset.path, str(other)])
    assert [r.perf.samples for r in results] == [40, 12]
    assert results[0].fingerprint != results[1].fingerprint
    pids = {json.loads(w)["pid"] for r in results for w in samples_table(r).column("worker").to_pylist()}
    assert len(pids) == 1, "one generation actor served both datasets (one model load)"


PROMPTS = ["What is 3 plus 4? Answer:", "Hello", "The quick brown fox", "x"]


def _generate(model_dir: str) -> dict:
    import sys

    from auditkit_ray.backends.base import Request
    from auditkit_ray.backends.hf import HFBackend
    from auditkit_ray.backends.hf import HFSettings as HFSpec
    from auditkit_ray.config.models import GenerationSettings

    backend = HFBackend(
        HFSpec(type="hf", path=model_dir, device="cpu", batch_size=2), GenerationSettings(max_new_tokens=8), 0
    )
    backend.load()
    gens = backend.generate([Request(sample_id=f"s{i}", prompt=p) for i, p in enumerate(PROMPTS)])
    import transformers.utils

    return {
        "texts": [g.raw_text for g in gens],
        "errors": [g.error for g in gens],
        "sklearn_imported": "sklearn" in sys.modules,
        "transformers_sees_sklearn": transformers.utils.is_sklearn_available(),
    }


def test_a_generation_actor_loads_transformers_without_scikit_learn_and_generates_the_same(tiny_model):
    # transformers imports scikit-learn (and much of SciPy) only for assisted decoding, which the backend never
    # uses: a fresh actor skips it, and its greedy output is the one this (non-actor) process gives, where
    # scikit-learn stays visible to transformers
    pytest.importorskip("sklearn", reason="scikit-learn is not installed here, so there is nothing to skip")
    import ray

    @ray.remote(num_cpus=0)
    class Actor:
        def run(self, model_dir: str) -> dict:
            return _generate(model_dir)

    actor = Actor.remote()
    try:
        in_actor = ray.get(actor.run.remote(str(tiny_model)), timeout=300)
    finally:
        ray.kill(actor)
    here = _generate(str(tiny_model))
    assert in_actor["sklearn_imported"] is False and in_actor["transformers_sees_sklearn"] is False
    assert here["transformers_sees_sklearn"] is True
    assert in_actor["errors"] == here["errors"] == [None] * len(PROMPTS)
    assert in_actor["texts"] == here["texts"]
