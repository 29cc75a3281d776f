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
    other.write_text("".join(json.dumps({"id": f"o{i}", "question": f"What is {i} plus 1?", "answer": str(i + 1)}) + "\n" for i in range(12)))
    base = make_spec(model=_hf(tiny_model), generation={"max_new_tokens": 4}, execution={"shard_size": 8, "generation_actors": 1})
    results = evaluate_many(base, [base.dataset.path, str(other)])
    assert [r.perf.samples for r in results] == [40, 12]
    assert results[0].fingerprint != results[1].fingerprint
    pids = {json.loads(w)["pid"] for r in results for w in samples_table(r).column("worker").to_pylist()}
    assert len(pids) == 1, "one generation actor served both datasets (one model load)"
