"""Outcome oracles: verdicts, the Metric adapter, and the headline rule."""

import hashlib

import pytest

from auditkit_ray import ConfigError, Direction, Generation, Sample, Status
from auditkit_ray.core.fingerprint import fingerprint
from auditkit_ray.core.metric import MissingEvidence
from auditkit_ray.core.registry import build_metric, resolve_metric
from auditkit_ray.core.summary import Accumulator
from auditkit_ray.oracles import Oracle, Outcome, Verdict, oracle_metric

EXPECTED = {"accounts": {"checking": 50, "savings": 150}}


def one(name, sample, gen, **params):
    scores = build_metric(name, params).evaluate(sample, gen, {})
    return {s.name: s for s in scores}


def test_final_state_is_compared_canonically_in_subset_and_equal_modes():
    s = Sample(id="s", input="q", expected_state=EXPECTED)
    state = {"accounts": {"savings": 150.0, "checking": 50, "credit": 0}, "log": ["t1"]}
    g = Generation(metadata={"final_state": state})
    assert one("final_state", s, g)["final_state"].value == 1.0
    equal = one("final_state", s, g, mode="equal")["final_state"]
    assert equal.value == 0.0 and "$.accounts.credit: unexpected" in equal.metadata["evidence"]["differences"]
    wrong = one("final_state", s, Generation(metadata={"final_state": {"accounts": {"checking": 0, "savings": 200}}}))[
        "final_state"
    ]
    assert wrong.value == 0.0 and "$.accounts.checking: expected 50, got 0" in wrong.reason
    bools = one(
        "final_state",
        Sample(id="s", input="q", expected_state={"on": 1}),
        Generation(metadata={"final_state": {"on": True}}),
    )
    assert bools["final_state"].value == 0.0
    assert one("final_state", Sample(id="s", input="q"), g)["final_state"].status is Status.NOT_TESTED


def test_missing_final_state_is_unknown_and_the_summary_counts_it_unscored():
    m = build_metric("final_state")
    s = Sample(id="s", input="q", expected_state=EXPECTED)
    acc = Accumulator([m])
    acc.add_all(m.evaluate(s, Generation(metadata={"final_state": {"accounts": {"checking": 50, "savings": 150}}}), {}))
    acc.add_all(m.evaluate(s, Generation(metadata={"final_state": {"accounts": {"checking": 0, "savings": 200}}}), {}))
    [unk] = m.evaluate(s, Generation(text="done", tool_calls=[]), {})
    assert unk.status is Status.UNKNOWN and "final state was not recorded" in unk.reason
    acc.add(unk)
    summ = acc.summaries()["final_state"]
    assert summ.counts["unknown"] == 1 and summ.unscored == 1 and summ.n == 2 and summ.mean == 0.5
    assert summ.family == "oracle" and summ.direction == Direction.MAXIMIZE


def test_wrong_final_state_with_a_judge_saying_complete_is_a_failure_headline():
    s = Sample(id="s", input="Move 50 from checking to savings", expected_state=EXPECTED, target="Moved 50")
    g = Generation(text="Moved 50", metadata={"final_state": {"accounts": {"checking": 0, "savings": 200}},
                                              "judge_verdict": "complete"})
    got = one("agent_outcome", s, g)
    head = got["agent_outcome"]
    assert head.status is Status.SCORED and head.value == 0.0
    assert head.metadata["verdict"] == "failure" and head.metadata["headline_source"] == "state"
    assert head.metadata["judge"] == "success" and head.metadata["judge_agrees"] is False
    judge = got["agent_outcome.judge"]
    assert judge.value == 1.0 and judge.metadata["diagnostic"] is True
    # the judge's own metric is diagnostic
    jm = resolve_metric("judge_assertion")
    assert jm.family == "oracle-diagnostic"
    assert one("judge_assertion", s, g)["judge_assertion"].value == 1.0


def test_agent_outcome_falls_back_to_the_answer_check_then_unknown():
    s = Sample(id="s", input="q", expected_state=EXPECTED, target="92 EUR")
    # state expected but not recorded: the answer decides
    head = one("agent_outcome", s, Generation(text="92 eur."))["agent_outcome"]
    assert head.value == 1.0 and head.metadata["headline_source"] == "answer"
    # neither state nor answer evidence: unknown (never a judge verdict)
    s2 = Sample(id="s", input="q", expected_state=EXPECTED)
    got = one("agent_outcome", s2, Generation(text="done", metadata={"judge_verdict": "complete"}))
    assert got["agent_outcome"].status is Status.UNKNOWN and got["agent_outcome.judge"].value == 1.0
    # a recorded, correct state beats a wrong answer
    head = one("agent_outcome", s, Generation(text="I failed", metadata={"final_state": EXPECTED}))["agent_outcome"]
    assert head.value == 1.0 and head.metadata["headline_source"] == "state"


def test_answer_check_modes():
    s = Sample(id="s", input="q", target="The Eiffel Tower")
    g = Generation(text="the eiffel tower!")
    assert one("answer_check", s, g, mode="exact")["answer_check"].value == 0.0
    assert one("answer_check", s, g, mode="normalized")["answer_check"].value == 1.0
    assert (
        one("answer_check", s, Generation(text="It is the Eiffel Tower, in Paris."), mode="contains")[
            "answer_check"
        ].value
        == 1.0
    )
    assert one("answer_check", s, Generation(text="Eiffel Towering"), mode="contains")["answer_check"].value == 0.0
    assert one("answer_check", Sample(id="s", input="q"), g)["answer_check"].status is Status.NOT_TESTED
    assert (
        one("answer_check", s, Generation(metadata={"output_missing": True}))["answer_check"].status is Status.UNKNOWN
    )


def test_artifact_check_exists_content_and_digest(tmp_path):
    report = "total: 42\n"
    digest = hashlib.sha256(report.encode()).hexdigest()
    p = tmp_path / "r.txt"
    p.write_text(report)
    s = Sample(id="s", input="q", metadata={"expected_artifacts": {"report.txt": {"sha256": digest, "contains": "42"}}})
    ok = one("artifact_check", s, Generation(metadata={"artifacts": {"report.txt": report}}))["artifact_check"]
    assert ok.value == 1.0
    assert (
        one("artifact_check", s, Generation(metadata={"artifacts": {"report.txt": {"path": str(p)}}}))[
            "artifact_check"
        ].value
        == 1.0
    )
    bad = one("artifact_check", s, Generation(metadata={"artifacts": {"report.txt": "total: 41\n"}}))["artifact_check"]
    assert bad.value == 0.0 and "sha256" in bad.reason
    gone = one("artifact_check", s, Generation(metadata={"artifacts": {}}))["artifact_check"]
    assert gone.value == 0.0 and "does not exist" in gone.reason
    assert one("artifact_check", s, Generation())["artifact_check"].status is Status.UNKNOWN
    only_digest = Generation(metadata={"artifacts": {"report.txt": {"sha256": digest}}})
    assert (
        one("artifact_check", s, only_digest)["artifact_check"].status is Status.UNKNOWN
    )  # 'contains' needs the content
    assert (
        one("artifact_check", Sample(id="s", input="q"), only_digest, artifact="report.txt", sha256=digest)[
            "artifact_check"
        ].value
        == 1.0
    )


def test_custom_predicate_requires_a_version_that_enters_the_fingerprint(agents_examples):
    with pytest.raises(ConfigError, match="version"):
        build_metric("custom_predicate", {"predicate": "predicates:booking_made"})
    from auditkit_ray.oracles.builtin import CustomPredicate

    with pytest.raises(TypeError, match="version"):
        CustomPredicate(predicate="predicates:booking_made")
    v1 = build_metric("custom_predicate", {"predicate": "predicates:booking_made", "version": "1"})
    v2 = build_metric("custom_predicate", {"predicate": "predicates:booking_made", "version": "2"})
    assert fingerprint(v1.identity()) != fingerprint(v2.identity())
    assert v1.identity()["oracle"]["predicate_version"] == "1"
    s = Sample(id="s", input="q")
    assert (
        v1.evaluate(s, Generation(metadata={"final_state": {"bookings": [{"flight_id": "UA100"}]}}), {})[0].value == 1.0
    )
    assert v1.evaluate(s, Generation(metadata={"final_state": {"bookings": []}}), {})[0].value == 0.0
    assert v1.evaluate(s, Generation(), {})[0].status is Status.UNKNOWN
    other = build_metric(
        "custom_predicate", {"predicate": "predicates:booking_made", "version": "1", "kwargs": {"flight_id": "X"}}
    )
    assert (
        other.evaluate(s, Generation(metadata={"final_state": {"bookings": [{"flight_id": "UA100"}]}}), {})[0].value
        == 0.0
    )


class Flaky(Oracle):
    version = "3"

    def verdict(self, sample, generation, context):
        mode = generation.text
        if mode == "boom":
            raise RuntimeError("environment down")
        if mode == "gap":
            raise MissingEvidence("no log")
        if mode == "bad":
            return "yes"
        return Verdict(status=Outcome(mode), reason=mode)


def test_any_oracle_as_a_metric_maps_verdicts_to_score_statuses():
    m = oracle_metric(Flaky)()
    assert m.name == "flaky" and m.direction is Direction.MAXIMIZE and m.family == "oracle"
    s = Sample(id="s", input="q")
    got = {
        mode: m.evaluate(s, Generation(text=mode), {})[0]
        for mode in ("success", "failure", "unknown", "error", "boom", "gap", "bad")
    }
    assert (got["success"].value, got["failure"].value) == (1.0, 0.0)
    assert got["unknown"].status is Status.UNKNOWN and got["gap"].status is Status.UNKNOWN
    assert (
        got["error"].status is Status.ERROR
        and got["boom"].status is Status.ERROR
        and "environment down" in got["boom"].reason
    )
    assert got["bad"].status is Status.ERROR
    assert m.identity()["oracle"]["version"] == "3"


def test_generic_oracle_metric_loads_a_user_oracle_by_module_path(agents_examples, tmp_path, monkeypatch):
    (tmp_path / "my_oracles.py").write_text(
        "from auditkit_ray.oracles import Oracle, Verdict\n"
        "class HasText(Oracle):\n"
        "    def __init__(self, *, word):\n"
        "        super().__init__(word=word)\n"
        "    def verdict(self, sample, generation, context):\n"
        "        return Verdict.success() if self.params['word'] in generation.text else Verdict.failure('no word')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # user code is imported from the working directory (or installed packages)
    monkeypatch.delenv("AUDITKIT_RAY_WORKDIR", raising=False)
    m = build_metric("oracle", {"oracle": "my_oracles:HasText", "word": "ok"})
    assert m.output_name == "has_text"
    assert m.evaluate(Sample(id="s", input="q"), Generation(text="ok!"), {})[0].value == 1.0
    with pytest.raises(ConfigError):
        build_metric("oracle", {"oracle": "my_oracles:Nope"})
