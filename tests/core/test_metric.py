import textwrap

import pytest

from auditkit_ray import ConfigError, Direction, Generation, Metric, MissingEvidence, Sample, Score, Status
from auditkit_ray.core.registry import build_metric, register_metric, resolve_metric


def test_metric_subclass_without_direction_raises_type_error():
    with pytest.raises(TypeError, match="direction"):

        class NoDirection(Metric):
            def score(self, sample, generation, context):
                return Score.scored("x", 1.0)


def test_metric_subclass_with_wrong_direction_type_raises_type_error():
    with pytest.raises(TypeError):

        class Wrong(Metric):
            direction = "maximize"

            def score(self, sample, generation, context):
                return 1.0


class NeedsGold(Metric):
    name = "needs_gold"
    direction = Direction.MAXIMIZE
    requires = ("gold_evidence", "generation.text")

    def score(self, sample, generation, context):
        return Score.scored(self.name, 1.0)


def test_missing_required_field_gives_not_tested():
    m = NeedsGold()
    s = Sample(id="1", input="q")
    [score] = m.evaluate(s, Generation(text="x"), {})
    assert score.status is Status.NOT_TESTED and "gold_evidence" in score.reason
    [score] = m.evaluate(Sample(id="1", input="q", gold_evidence=["d1"]), Generation(text="x"), {})
    assert score.status is Status.SCORED and score.value == 1.0


def test_empty_generation_text_is_not_tested_for_a_metric_requiring_it():
    [score] = NeedsGold().evaluate(Sample(id="1", input="q", gold_evidence=["d"]), Generation(text=""), {})
    assert score.status is Status.NOT_TESTED


class Boom(Metric):
    direction = Direction.MINIMIZE

    def score(self, sample, generation, context):
        if sample.id == "bad":
            raise ValueError("kaboom")
        if sample.id == "missing":
            raise MissingEvidence("no trace")
        return 0.5


def test_exceptions_become_error_scores_and_missing_evidence_unknown():
    m = Boom()
    assert m.name == "boom"
    items = [(Sample(id=i, input="q"), Generation(text="t"), {}) for i in ("ok", "bad", "missing")]
    res = m.evaluate_batch(items)
    assert [r[0].status for r in res] == [Status.SCORED, Status.ERROR, Status.UNKNOWN]
    assert "kaboom" in res[1][0].reason and res[0][0].value == 0.5


def test_failed_generation_scores_error_not_zero():
    [score] = Boom().evaluate(Sample(id="ok", input="q"), Generation(error="engine died"), {})
    assert score.status is Status.ERROR and "engine died" in score.reason and score.value is None


def test_registry_resolves_builtin_names_and_module_class_refs():
    assert resolve_metric("exact_match").direction is Direction.MAXIMIZE
    assert resolve_metric("auditkit_ray.metrics.text:ExactMatch") is resolve_metric("exact_match")
    assert resolve_metric(f"{__name__}:NeedsGold") is NeedsGold


def test_registered_user_metric_is_used_like_a_builtin():
    @register_metric("my_len")
    class MyLen(Metric):
        direction = Direction.MINIMIZE

        def score(self, sample, generation, context):
            return float(len(generation.text))

    m = build_metric("my_len")
    assert m.evaluate(Sample(id="1", input="q"), Generation(text="abc"), {})[0].value == 3.0


@pytest.mark.parametrize("ref", ["nope", "auditkit_ray.metrics.text:Nope", "no_such_module_xyz:Cls", "json:dumps"])
def test_unresolvable_metric_refs_raise_config_error(ref):
    with pytest.raises(ConfigError):
        resolve_metric(ref)


def test_bad_metric_params_raise_config_error():
    with pytest.raises(ConfigError, match="bad parameters"):
        build_metric("exact_match", {"ignore_kase": True})


def test_identity_carries_params_and_direction():
    a = build_metric("exact_match", {"ignore_case": True}).identity()
    b = build_metric("exact_match").identity()
    assert a != b and a["direction"] == "maximize" and a["params"]["ignore_case"] is True


def test_metric_on_annotation_reads_the_extracted_value_and_names_itself():
    m = build_metric("exact_match", {"on": "extracted"})
    assert m.output_name == "exact_match@extracted"
    s = Sample(id="1", input="q", target="4")
    g = Generation(text="the answer is 4")
    [sc] = m.evaluate(s, g, {"annotations": {"extracted": "4"}})
    assert sc.value == 1.0 and sc.name == "exact_match@extracted"
    [sc] = m.evaluate(s, g, {"annotations": {}})
    assert sc.status is Status.UNKNOWN
    [raw] = build_metric("exact_match").evaluate(s, g, {"annotations": {"extracted": "4"}})
    assert raw.value == 0.0


def test_exact_match_normalisation_options():
    s = Sample(id="1", input="q", target="Paris.")
    g = Generation(text="  paris ")
    assert build_metric("exact_match").evaluate(s, g, {})[0].value == 0.0
    m = build_metric("exact_match", {"ignore_case": True, "ignore_punctuation": True})
    assert m.evaluate(s, g, {})[0].value == 1.0
    m = build_metric("exact_match", {"ignore_regexes": [r"\.$"], "ignore_case": True})
    assert m.evaluate(s, g, {})[0].value == 1.0


def test_token_f1_partial_credit():
    s = Sample(id="1", input="q", target="the cat sat")
    [sc] = build_metric("token_f1").evaluate(s, Generation(text="cat sat down"), {})
    assert sc.value == pytest.approx(2 * (2 / 3) * 1 / ((2 / 3) + 1))


def test_non_degenerate_flags_empty_and_repetitive_outputs():
    m = build_metric("non_degenerate")
    s = Sample(id="1", input="q")
    assert m.evaluate(s, Generation(text="a b c d e"), {})[0].value == 1.0
    assert m.evaluate(s, Generation(text="go go go go go go go go"), {})[0].value == 0.0
    assert m.evaluate(s, Generation(text=""), {})[0].value == 0.0


class AbstainsOnOdd(Metric):
    """Counts its calls; missing evidence for odd sample ids."""

    name = "abstains_on_odd"
    direction = Direction.MAXIMIZE

    def __init__(self, **params):
        super().__init__(**params)
        self.calls = []

    def score(self, sample, generation, context):
        self.calls.append(sample.id)
        if int(sample.id) % 2:
            raise MissingEvidence("odd")
        return Score.scored(self.name, 1.0)


def test_one_items_missing_evidence_does_not_score_the_rest_of_the_batch_again():
    m = AbstainsOnOdd()
    items = [(Sample(id=str(i), input="q"), Generation(text="x"), {}) for i in range(6)]
    out = m.evaluate_batch(items)
    assert m.calls == [str(i) for i in range(6)]  # each item once, in order
    assert [s.status for [s] in out] == [Status.SCORED, Status.UNKNOWN] * 3


def test_a_batch_with_missing_evidence_leaves_no_reference_cycle_holding_its_samples():
    import gc
    import weakref

    m = AbstainsOnOdd()
    gc.collect()
    was = gc.isenabled()
    gc.disable()  # as in the scoring stages: only reference counting may free the batch
    try:
        sample = Sample(id="1", input="q")
        ref = weakref.ref(sample)
        [[score]] = m.evaluate_batch([(sample, Generation(text="x"), {})])
        assert score.status is Status.UNKNOWN and score.reason == "odd"
        del sample
        assert ref() is None, "the caught exception's traceback keeps the sample alive until a cyclic collection"
    finally:
        if was:
            gc.enable()


class _Counting:
    """A field getter that counts its calls (wraps the compiled one)."""

    def __init__(self, path):
        from auditkit_ray.core import metric as core_metric

        self.path, self.calls = path, 0
        self.real = core_metric._field_getter(path)

    def __call__(self, s, g, c):
        self.calls += 1
        return self.real(s, g, c)


def test_required_fields_are_looked_up_once_per_item_for_all_the_metrics_sharing_a_batch(monkeypatch):
    from auditkit_ray.core import metric as core_metric

    class NeedsContexts(Metric):
        name = "needs_contexts"
        direction = Direction.MAXIMIZE
        requires = ("retrieved_contexts", "gold_evidence")

        def score(self, sample, generation, context):
            return Score.scored(self.output_name, float(len(sample.retrieved_contexts)))

    class AlsoNeedsContexts(NeedsContexts):
        name = "also_needs_contexts"
        requires = ("retrieved_contexts",)

    counters = {p: _Counting(p) for p in ("retrieved_contexts", "gold_evidence")}
    monkeypatch.setattr(core_metric, "_GETTERS", dict(counters))
    items = [
        (
            Sample(
                id=str(i), input="q", retrieved_contexts=[{"id": "d"}] * i or None, gold_evidence=["d"] if i % 3 else []
            ),
            Generation(text="x"),
            {},
        )
        for i in range(6)
    ]
    metrics = [NeedsContexts(), AlsoNeedsContexts(), NeedsContexts(as_name="third")]
    shared: dict = {}
    together = [m.evaluate_batch(items, absent=shared) for m in metrics]
    assert {p: c.calls for p, c in counters.items()} == {"retrieved_contexts": 6, "gold_evidence": 6}
    alone = [m.evaluate_batch(items) for m in metrics]  # no shared dict: each metric checks for itself
    assert counters["retrieved_contexts"].calls == 6 + 3 * 6
    assert together == alone
    statuses = [[s.status for [s] in out] for out in together]
    assert statuses[0] == [
        Status.NOT_TESTED,
        Status.SCORED,
        Status.SCORED,
        Status.NOT_TESTED,
        Status.SCORED,
        Status.SCORED,
    ]
    assert statuses[1] == [Status.NOT_TESTED] + [Status.SCORED] * 5  # needs no gold evidence
    assert together[0][0][0].reason == "missing retrieved_contexts, gold_evidence"


def test_a_score_under_another_name_or_a_number_is_normalised_on_the_batch_path():
    class Renamed(Metric):
        name = "renamed"
        direction = Direction.MAXIMIZE

        def score(self, sample, generation, context):
            return {"0": Score.scored("other", 1.0), "1": 0.5, "2": Score.scored("renamed", 0.25)}[sample.id]

    out = Renamed(as_name="mine").evaluate_batch(
        [(Sample(id=str(i), input="q"), Generation(text="x"), {}) for i in range(3)]
    )
    assert [(s.name, s.status, s.value) for [s] in out] == [("mine", Status.SCORED, 1.0), ("mine", Status.SCORED, 0.5),
                                                            ("mine", Status.SCORED, 0.25)]


def test_an_installed_package_names_its_metric_through_the_entry_point_group(tmp_path, monkeypatch):
    from auditkit_ray.core import registry

    (tmp_path / "ak_plugged_metric.py").write_text(textwrap.dedent("""
        from auditkit_ray import Direction, Metric, Score

        class Plugged(Metric):
            name = "plugged"
            direction = Direction.MAXIMIZE

            def score(self, sample, generation, context):
                return Score.scored(self.name, 1.0)
    """))
    dist = tmp_path / "ak_plugged_metric-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ak-plugged-metric\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[auditkit_ray.metrics]\nplugged = ak_plugged_metric:Plugged\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # user code is imported from the working directory or installed packages
    monkeypatch.setattr(registry, "_ENTRY_POINTS", {})
    monkeypatch.setattr(registry, "_entry_points_read", [])  # read them again, as a fresh process does
    assert "plugged" in registry.builtin_names()
    metric = registry.build_metric("plugged")
    assert type(metric).__name__ == "Plugged" and metric.direction is Direction.MAXIMIZE
