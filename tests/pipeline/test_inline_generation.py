"""Where a shard's outputs are made: a backend with no model (``echo``) runs
in the first scoring pool's actors; stored outputs are read there too. On a
real local Ray (2 CPUs, 4 logical GPUs)."""

import json

import pytest

from auditkit_ray.actors.score import ScoreStage
from auditkit_ray.api import evaluate, samples_table

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _workers(result) -> list[dict]:
    return [json.loads(w) for w in samples_table(result).column("worker").to_pylist()]


def test_a_backend_without_a_model_generates_in_the_scoring_actors_with_the_same_scores(make_spec, tmp_path, rows):
    echo = evaluate(
        make_spec("echo", model={"type": "echo", "field": "target"}, execution={"shard_size": 8, "scoring_actors": 2})
    )
    assert echo.perf.generated == 40 and echo.metrics["exact_match"].mean == 1.0
    # each shard's outputs were made by the process that scored it: no generation actor
    assert all(w["pid"] == w["scored_by"] for w in _workers(echo))
    # ... and cached as a generation actor would have: the outputs of every shard are stored
    assert len(list((tmp_path / "echo" / "generations").rglob("shard-*.parquet"))) == 5
    # a model backend still has generation actors of its own (the check above can fail)
    sim = evaluate(make_spec("sim", execution={"shard_size": 8, "scoring_actors": 2}))
    assert all(w["pid"] != w["scored_by"] for w in _workers(sim))
    # the same outputs, wherever they were made, score the same
    assert [(r[0], r[1], r[2], r[3]) for r in rows(echo)] == [(r[0], r[1], r[2], r[3]) for r in rows(sim)]
    assert {k: (m.mean, m.n) for k, m in echo.metrics.items()} == {k: (m.mean, m.n) for k, m in sim.metrics.items()}


def test_rescoring_stored_outputs_reads_them_in_the_scoring_actors_without_generating(make_spec):
    first = evaluate(make_spec(execution={"shard_size": 8}))
    more = evaluate(make_spec(metrics=["exact_match", "contains"], execution={"shard_size": 8}))
    assert more.generation_fingerprint == first.generation_fingerprint
    assert more.perf.generated == 0 and more.metrics["contains"].n == 40
    # read where they were scored: no generation actor, no separate task per shard
    assert all(w["pid"] == w["scored_by"] for w in _workers(more))
    # and they are the first run's outputs
    assert samples_table(more).column("text").to_pylist() == samples_table(first).column("text").to_pylist()


def test_an_unknown_generation_mode_for_a_scoring_stage_is_refused():
    with pytest.raises(ValueError, match="generation must be one of"):
        ScoreStage({}, generation="elsewhere")


def test_a_backend_without_a_model_generates_in_the_first_pool_when_judges_and_oracles_have_their_own(make_spec):
    res = evaluate(
        make_spec(
            "pools",
            model={"type": "echo", "field": "target"},
            metrics=["exact_match", "tests_support_metrics:SlowJudge", "tests_support_metrics:PidOracle"],
            execution={"shard_size": 8, "judge_actors": 1, "oracle_actors": 1},
        )
    )
    assert res.perf.generated == 40 and res.error_count == 0
    assert res.metrics["exact_match"].mean == 1.0
    assert res.metrics["slow_judge"].n == 40 and res.metrics["pid_oracle"].n == 40
    later_pools = {s["metadata"].get("pid") for row in samples_table(res).to_pylist() for s in json.loads(row["scores"])
                   if s["name"] in ("slow_judge", "pid_oracle")}
    makers = {w["pid"] for w in _workers(res)}
    # the outputs were made in the checks pool's actor, which neither the judge nor the oracle pool is
    assert makers and makers.isdisjoint(later_pools)
    assert all(w["scored_by"] not in makers for w in _workers(res))  # the last pool (oracles) wrote the rows
