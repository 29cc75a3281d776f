"""The direct pipeline (issue 50): a small run's shards go straight to the generation actors and are scored in
the driver, without Ray Data. Its outputs, stored shards and merged numbers are those of the Ray Data pipeline to
the last bit, on actors, inline (``echo``) and from stored outputs; ``execution.direct`` chooses either way."""

import pytest

from auditkit_ray.api import evaluate

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _both(make_spec, rows, numbers, name: str, **over):
    """(rows, numbers) of the same run through Ray Data and through the direct pipeline, each in its own store."""
    execution = over.pop("execution", {})
    via_data = evaluate(make_spec(f"{name}-data", execution={**execution, "direct": False}, **over))
    direct = evaluate(make_spec(f"{name}-direct", execution={**execution, "direct": True}, **over))
    assert via_data.fingerprint == direct.fingerprint
    return (rows(via_data), numbers(via_data)), (rows(direct), numbers(direct)), via_data, direct


def test_the_direct_pipeline_gives_ray_datas_results_on_generation_actors(make_spec, rows, numbers):
    model = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target", "fail_ids": ["q007"]}
    a, b, via_data, direct = _both(make_spec, rows, numbers, "sim", model=model,
                                   execution={"shard_size": 4, "generation_actors": 2})
    assert a == b and len(a[0]) == 40
    assert direct.error_count == via_data.error_count == 1
    assert direct.perf.generated == via_data.perf.generated == 40


def test_the_direct_pipeline_gives_ray_datas_results_with_hf(make_spec, rows, numbers, tiny_model):
    a, b, _, direct = _both(make_spec, rows, numbers, "hf", model={"type": "hf", "path": str(tiny_model),
                                                                 "batch_size": 4},
                            generation={"max_new_tokens": 5}, execution={"shard_size": 8})
    assert a == b and len(a[0]) == 40 and direct.tokens.completion > 0


def test_the_direct_pipeline_gives_ray_datas_results_inline_and_from_stored_outputs(make_spec, rows, numbers):
    a, b, _, _ = _both(make_spec, rows, numbers, "echo", model={"type": "echo", "field": "target"})
    assert a == b and len(a[0]) == 40
    # stored outputs re-scored (a metric added): no backend at all, the scoring stage reads the cache
    model = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "prompt"}
    for path in (False, True):
        first = evaluate(make_spec(f"cache-{path}", model=model, execution={"direct": path}))
        again = evaluate(make_spec(f"cache-{path}", model=model, execution={"direct": path},
                                   metrics=["exact_match", "token_f1", "contains"]))
        assert first.perf.generated == 40 and again.perf.generated == 0
    assert rows(evaluate(make_spec("cache-False", model=model, metrics=["exact_match", "token_f1", "contains"]))) == \
        rows(evaluate(make_spec("cache-True", model=model, metrics=["exact_match", "token_f1", "contains"])))


def test_a_small_run_takes_the_direct_pipeline_and_scores_in_the_driver(make_spec):
    import json
    import os

    from auditkit_ray.api import samples_table

    res = evaluate(make_spec("small"))  # 40 samples of deterministic checks: direct by default
    by = {json.loads(w)["scored_by"] for w in samples_table(res).column("worker").to_pylist()}
    assert by == {os.getpid()}, by
    res = evaluate(make_spec("forced", execution={"direct": False}))
    by = {json.loads(w)["scored_by"] for w in samples_table(res).column("worker").to_pylist()}
    assert os.getpid() not in by, by


def test_an_interrupted_direct_run_ends_its_threads_before_it_returns(make_spec):
    # the interrupt lands between two shards (here: in the driver's per-shard callback, where a SIGTERM or a
    # Ctrl-C can land too): the run ends with Interrupted, and none of its threads is left in a Ray call that
    # the process's exit would shut Ray down under (a SIGSEGV at exit, seen once in CI)
    import threading

    from auditkit_ray.errors import Interrupted
    from auditkit_ray.pipeline.driver import run_pipeline
    from auditkit_ray.pipeline.plan import build_plans

    model = {"type": "simulated", "fixed_cost_s": 3.0, "per_token_s": 0.0, "output": "target"}
    spec = make_spec("interrupted", model=model, execution={"shard_size": 2, "generation_actors": 2})
    seen = []

    def interrupt(out):
        seen.append(out)
        raise KeyboardInterrupt()

    with pytest.raises(Interrupted, match="shards are stored") as caught:
        run_pipeline(build_plans([spec]), None, False, on_shard=interrupt)
    left = [t.name for t in threading.enumerate() if t.name.startswith("auditkit-direct-") and t.is_alive()]
    assert seen and left == [], left
    assert caught.value is not None  # the traceback (and the run's frames) still held while the threads are looked at
