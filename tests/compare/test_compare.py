"""compare(): direction-aware deltas, grades with reasons, comparability, pairing."""

import random
import textwrap

import pytest

from auditkit_ray import ConfigError, GateFailed
from auditkit_ray.compare import compare, retention
from auditkit_ray.core.metric import Direction

pytest.importorskip("scipy")
pytest.importorskip("pyarrow")

IDS = [f"q{i:03d}" for i in range(60)]


def _binary(rng, p):
    return {i: float(rng.random() < p) for i in IDS}


def test_different_dataset_fingerprints_make_every_metric_not_comparable_with_the_reason(tmp_path, make_run):
    rng = random.Random(0)
    a = make_run(
        tmp_path, "a", {"exact_match": {"values": _binary(rng, 0.5)}, "f1": {"values": {i: rng.random() for i in IDS}}}
    )
    b = make_run(
        tmp_path,
        "b",
        {"exact_match": {"values": _binary(rng, 0.5)}, "f1": {"values": {i: rng.random() for i in IDS}}},
        dataset="e" * 64,
    )
    c = compare(a, b, n_resamples=200)
    assert not c.dataset_comparable
    for m in c.metrics.values():
        assert not m.comparable and m.grade == "not comparable" and m.paired is None
        assert any(
            "dataset fingerprints differ" in r and "dddddddddddd" in r and "eeeeeeeeeeee" in r for r in m.reasons
        )
    assert "NOT COMPARABLE: dataset fingerprints differ" in c.format()
    assert c.to_dict()["metrics"]["f1"]["grade"] == "not comparable"


def test_different_metric_params_make_that_metric_not_comparable_and_name_the_param(tmp_path, make_run):
    vals = _binary(random.Random(1), 0.6)
    a = make_run(
        tmp_path, "a", {"exact_match": {"values": vals, "params": {"ignore_case": False}}, "f1": {"values": vals}}
    )
    b = make_run(
        tmp_path, "b", {"exact_match": {"values": vals, "params": {"ignore_case": True}}, "f1": {"values": vals}}
    )
    c = compare(a, b, n_resamples=200)
    em = c.metrics["exact_match"]
    assert not em.comparable and em.grade == "not comparable"
    assert em.reasons == ["metric params differ (ignore_case: false vs true)"]
    assert c.metrics["f1"].comparable and c.metrics["f1"].grade == "pass"


def test_metric_version_class_and_direction_mismatches_are_reasons(tmp_path, make_run):
    vals = {i: 0.5 for i in IDS}
    a = make_run(tmp_path, "a", {"m": {"values": vals, "version": "1", "cls": "x:A"}})
    b = make_run(tmp_path, "b", {"m": {"values": vals, "version": "2", "cls": "x:B", "direction": "minimize"}})
    reasons = compare(a, b, n_resamples=50).metrics["m"].reasons
    assert "direction differs (maximize vs minimize)" in reasons
    assert "metric class differs (x:A vs x:B)" in reasons and "metric version differs (1 vs 2)" in reasons


def test_missing_fingerprint_on_one_side_is_not_comparable_on_neither_side_a_note(tmp_path, make_run):
    vals = {i: 1.0 for i in IDS}
    a = make_run(tmp_path, "a", {"m": {"values": vals}}, dataset=None)
    b = make_run(tmp_path, "b", {"m": {"values": vals}})
    c = make_run(tmp_path, "c", {"m": {"values": vals}}, dataset=None)
    one = compare(a, b, n_resamples=50).metrics["m"]
    assert not one.comparable and "dataset fingerprint missing in the baseline run" in one.reasons[0]
    both = compare(a, c, n_resamples=50)
    assert both.metrics["m"].comparable and "not verified" in both.notes[0]


def test_a_metric_in_one_run_only_is_not_comparable(tmp_path, make_run):
    vals = {i: 1.0 for i in IDS}
    a = make_run(tmp_path, "a", {"m": {"values": vals}})
    b = make_run(tmp_path, "b", {"m": {"values": vals}, "new": {"values": vals}})
    c = compare(a, b, n_resamples=50, max_regression=0.0)
    assert c.metrics["new"].reasons == ["metric missing in the baseline run"]
    assert c.ok  # a new metric has nothing to regress from
    back = compare(b, a, n_resamples=50, max_regression=0.0)
    assert back.metrics["new"].reasons == ["metric missing in the candidate run"]
    assert not back.ok and "not comparable" in back.failures[0]


def test_regression_is_read_through_direction_for_a_lower_is_better_metric(tmp_path, make_run):
    rng = random.Random(2)
    base = {i: float(rng.randint(5, 15)) for i in IDS}
    worse = {i: v + 3 for i, v in base.items()}
    a = make_run(tmp_path, "a", {"length": {"direction": "minimize", "values": base}})
    b = make_run(tmp_path, "b", {"length": {"direction": "minimize", "values": worse}})
    m = compare(a, b, n_resamples=500).metrics["length"]
    assert m.delta == pytest.approx(3) and m.improvement == pytest.approx(-3) and m.regression == pytest.approx(3)
    assert m.candidate_worse and not m.candidate_better
    assert m.grade == "fail" and "regressed by 3.0000" in m.reasons[0]
    assert m.retention == pytest.approx(m.baseline_mean / m.candidate_mean) and m.retention < 1
    assert m.paired.worse == 60 and m.paired.better == 0 and m.paired.p_value < 0.01
    better = compare(b, a, n_resamples=500).metrics["length"]
    assert better.grade == "pass" and better.candidate_better and better.retention > 1


def test_grades_follow_configurable_absolute_and_relative_thresholds(tmp_path, make_run):
    vals = {i: 0.5 for i in IDS}
    a = make_run(tmp_path, "a", {"s": {"values": vals}})
    b = make_run(tmp_path, "b", {"s": {"values": {i: 0.47 for i in IDS}}})  # 0.03 worse = 6% relative
    assert compare(a, b, n_resamples=50).metrics["s"].grade == "fail"
    assert compare(a, b, n_resamples=50, warn_at=0.02, fail_at=0.05).metrics["s"].grade == "warn"
    assert compare(a, b, n_resamples=50, warn_at="10%", fail_at="20%").metrics["s"].grade == "warn"  # significant
    c = compare(a, b, n_resamples=50, warn_at="10%", fail_at="20%")
    assert "significant" in c.metrics["s"].reasons[0]
    with pytest.raises(ConfigError, match="warn_at"):
        compare(a, b, warn_at="lots")


def test_retention_definition_and_baseline_zero():
    assert retention(0.8, 0.6, Direction.MAXIMIZE) == (pytest.approx(0.75), None)
    assert retention(10.0, 20.0, Direction.MINIMIZE) == (pytest.approx(0.5), None)  # inverted
    assert retention(0.0, 0.0, Direction.MAXIMIZE) == (1.0, None)
    r, note = retention(0.0, 0.3, Direction.MAXIMIZE)
    assert r is None and "baseline mean is 0" in note
    assert retention(0.0, 2.0, Direction.MINIMIZE) == (0.0, None)
    r, note = retention(2.0, 0.0, Direction.MINIMIZE)
    assert r is None and "candidate mean is 0" in note
    assert retention(-1.0, 1.0, Direction.MAXIMIZE)[0] is None


def test_unscored_in_one_run_is_not_paired_and_counted(tmp_path, make_run):
    vals = {i: 1.0 for i in IDS}
    other = dict(vals)
    other["q000"] = None        # unknown
    other["q001"] = "error"
    a = make_run(tmp_path, "a", {"m": {"values": vals}})
    b = make_run(tmp_path, "b", {"m": {"values": other}})
    m = compare(a, b, n_resamples=50).metrics["m"]
    assert m.paired.n_paired == 58 and m.paired.unpaired == 2 and m.paired.scored_only_baseline == 2
    assert "2 sample(s) scored in one run only (not paired)" in m.notes
    assert m.candidate_n == 58 and m.baseline_n == 60


def test_binary_diff_reads_direction_and_pairs_by_sample_and_repeat(tmp_path, make_run):
    # a lower-is-better binary metric ("hallucinated"): 0 is right
    a_vals = {("s1", 0): 0.0, ("s1", 1): 1.0, ("s2", 0): 0.0, ("s2", 1): 1.0, ("s3", 0): 0.0}
    b_vals = {("s1", 0): 1.0, ("s1", 1): 0.0, ("s2", 0): 0.0, ("s2", 1): 1.0, ("s4", 0): 0.0}
    a = make_run(tmp_path, "a", {"hall": {"direction": "minimize", "values": a_vals}})
    b = make_run(tmp_path, "b", {"hall": {"direction": "minimize", "values": b_vals}})
    p = compare(a, b, n_resamples=50).metrics["hall"].paired
    assert p.binary and p.test == "mcnemar exact" and p.n_paired == 4
    assert p.diff.newly_wrong == [("s1", 0)] and p.diff.newly_right == [("s1", 1)]
    assert p.diff.still_right == 1 and p.diff.still_wrong == 1
    assert p.only_in_baseline == 1 and p.only_in_candidate == 1 and p.unpaired == 2
    assert p.p_value == 1.0


def test_mcnemar_p_value_flows_into_the_comparison(tmp_path, make_run):
    # 10 newly wrong, 3 newly right, 20 still right, 7 still wrong
    a_vals, b_vals = {}, {}
    for i in range(40):
        x, y = (1, 0) if i < 10 else (0, 1) if i < 13 else (1, 1) if i < 33 else (0, 0)
        a_vals[f"s{i:02d}"], b_vals[f"s{i:02d}"] = float(x), float(y)
    a = make_run(tmp_path, "a", {"em": {"values": a_vals}})
    b = make_run(tmp_path, "b", {"em": {"values": b_vals}})
    m = compare(a, b, n_resamples=50).metrics["em"]
    assert m.paired.p_value == pytest.approx(0.0923, abs=5e-5) and m.significant is False
    assert len(m.paired.diff.newly_wrong) == 10 and len(m.paired.diff.newly_right) == 3
    # regressed by 0.175, far over 5%, but McNemar p = 0.09 is not significant: n.s., not a failure
    assert m.grade == "n.s." and "not significant" in m.reasons[0]
    text = compare(a, b, n_resamples=50).format()
    assert "10 newly wrong, 3 newly right, 20 still right, 7 still wrong" in text


def test_shard_layout_does_not_change_the_statistics(tmp_path, make_run):
    rng = random.Random(4)
    va = {i: rng.random() for i in IDS}
    vb = {i: v + rng.gauss(0.02, 0.1) for i, v in va.items()}
    one = compare(
        make_run(tmp_path / "1", "a", {"m": {"values": va}}),
        make_run(tmp_path / "1", "b", {"m": {"values": vb}}),
        n_resamples=300,
    )
    items = list(vb.items())
    rng.shuffle(items)
    three = compare(make_run(tmp_path / "3", "a", {"m": {"values": va}}, shards=3),
                    make_run(tmp_path / "3", "b", {"m": {"values": dict(items)}}, shards=3), n_resamples=300)
    assert one.metrics["m"].paired.p_value == three.metrics["m"].paired.p_value
    assert one.metrics["m"].paired.delta_ci == pytest.approx(three.metrics["m"].paired.delta_ci)


def test_without_a_per_sample_table_the_comparison_runs_on_summaries_with_a_note(tmp_path, make_run):
    vals = {i: 1.0 for i in IDS}
    a = make_run(tmp_path, "a", {"m": {"values": vals}}, samples=False)
    b = make_run(tmp_path, "b", {"m": {"values": vals}})
    m = compare(a, b).metrics["m"]
    assert m.comparable and m.paired is None and m.grade == "pass"
    assert any("no paired test" in n and "no per-sample table" in n for n in m.notes)


def test_gates_fail_with_reasons_and_raise_gate_failed(tmp_path, make_run):
    a = make_run(
        tmp_path,
        "a",
        {"em": {"values": {i: 1.0 for i in IDS}}, "len": {"direction": "minimize", "values": {i: 5.0 for i in IDS}}},
    )
    b = make_run(tmp_path, "b", {"em": {"values": {i: float(k % 10 != 0) for k, i in enumerate(IDS)}},
                                 "len": {"direction": "minimize", "values": {i: 6.0 for i in IDS}}})
    c = compare(
        a,
        b,
        n_resamples=50,
        warn_at=1,
        fail_at=1,
        fail_under={"em": 0.95},
        fail_over={"len": 5.5},
        max_regression={"em": 0.05},
    )
    failed = [g.reason for g in c.gates if not g.passed]
    assert any("em = 0.9000 is under 0.95 [--fail-under em=0.95]" in r for r in failed)
    assert any("len = 6.0000 is over 5.5 [--fail-over len=5.5]" in r for r in failed)
    assert any("em regressed by 0.1000" in r and "over the limit 0.05" in r for r in failed)
    with pytest.raises(GateFailed, match="3 check"):
        c.raise_for_failures()
    with pytest.raises(ConfigError, match="use --fail-over len=VALUE"):
        compare(a, b, fail_under={"len": 5})
    with pytest.raises(ConfigError, match="use --fail-under em=VALUE"):
        compare(a, b, fail_over={"em": 0.5})
    ok = compare(a, a, fail_under={"em": 0.95}, max_regression="0%")
    assert ok.ok and ok.clean and all(g.passed for g in ok.gates)


def test_corpus_metric_paired_test_rebuilds_finalize_from_identity(tmp_path, make_run, monkeypatch):
    (tmp_path / "aukr_corpus_fixture.py").write_text(textwrap.dedent('''
        from auditkit_ray import Direction, Metric
        class CharRatio(Metric):
            direction = Direction.MAXIMIZE
            aggregation = "corpus"
            def score(self, sample, generation, context):
                raise NotImplementedError
            def finalize(self, stats):
                return stats[0] / stats[1] if stats[1] else None
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("AUDITKIT_RAY_TRUSTED_PATHS", str(tmp_path))  # user code outside the working directory
    rng = random.Random(5)
    tot = {i: rng.randint(5, 20) for i in IDS}
    hits_a = {i: rng.randint(0, t) for i, t in tot.items()}
    hits_b = {i: min(tot[i], h + rng.randint(0, 3)) for i, h in hits_a.items()}

    def spec(hits, cls="aukr_corpus_fixture:CharRatio"):
        return {"cr": {"aggregation": "corpus", "cls": cls, "finalize": lambda s: s[0] / s[1],
                       "values": {i: hits[i] / tot[i] for i in IDS}, "stats": {i: [hits[i], tot[i]] for i in IDS}}}

    a, b = make_run(tmp_path, "a", spec(hits_a)), make_run(tmp_path, "b", spec(hits_b))
    m = compare(a, b, n_resamples=400).metrics["cr"]
    assert m.paired.test == "paired approximate randomization (corpus)" and m.paired.p_value < 0.05
    assert m.paired.delta == pytest.approx(m.delta)  # every sample shared: paired corpus delta = summary delta
    assert m.paired.n_resamples == 400 and m.paired.seed == 0 and m.candidate_better
    assert compare(a, a, n_resamples=400).metrics["cr"].paired.p_value == 1.0
    a2, b2 = (
        make_run(tmp_path, "a2", spec(hits_a, "nowhere_module:Nope")),
        make_run(tmp_path, "b2", spec(hits_b, "nowhere_module:Nope")),
    )
    m2 = compare(a2, b2, n_resamples=50).metrics["cr"]
    assert m2.paired.p_value is None and "cannot rebuild metric nowhere_module:Nope" in m2.paired.reason
    assert m2.grade == "pass" and any("no paired test" in n for n in m2.notes)


def test_unknown_metric_selection_is_a_usage_error(tmp_path, make_run):
    a = make_run(tmp_path, "a", {"m": {"values": {"x": 1.0}}})
    with pytest.raises(ConfigError, match="nope"):
        compare(a, a, metrics=["nope"])


def test_facade_compare_works_before_and_after_importing_the_package(tmp_path, make_run):
    import importlib
    import subprocess
    import sys

    p = make_run(tmp_path, "a", {"m": {"values": {i: 1.0 for i in IDS}}})
    code = (
        "import auditkit_ray as ak; c1 = ak.compare({p!r}, {p!r}, n_resamples=10);"
        "import auditkit_ray.compare; c2 = ak.compare({p!r}, {p!r}, n_resamples=10);"
        "from auditkit_ray import compare as f; c3 = f({p!r}, {p!r}, n_resamples=10);"
        "print(c1.clean and c2.clean and c3.clean)"
    ).format(p=str(p))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "True", out.stderr
    assert importlib.import_module("auditkit_ray").compare(p, p, n_resamples=10).clean


def test_importing_the_compare_package_loads_no_numpy_scipy_or_pyarrow():
    import subprocess
    import sys

    code = ("import sys, auditkit_ray, auditkit_ray.compare, auditkit_ray.cli;"
            "print(','.join(m for m in ('numpy', 'scipy', 'pyarrow', 'ray', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_regression_is_graded_by_its_size_and_its_paired_test(tmp_path, make_run):
    """#37: a change that is not significant is not graded like one that is."""
    base = {f"s{i:02d}": 1.0 for i in range(60)}
    big = {k: (0.0 if i < 30 else 1.0) for i, k in enumerate(base)}  # 30 newly wrong: significant
    small = {k: (0.0 if i < 3 else 1.0) for i, k in enumerate(base)}  # 3 newly wrong: 5% worse, p = 0.25
    a = make_run(tmp_path, "a", {"em": {"values": base}})
    sig = compare(a, make_run(tmp_path, "big", {"em": {"values": big}}), n_resamples=50).metrics["em"]
    assert sig.significant and sig.grade == "fail" and "significant (p < 0.05)" in sig.reasons[0]
    ns = compare(a, make_run(tmp_path, "small", {"em": {"values": small}}), n_resamples=50, fail_at="10%")
    m = ns.metrics["em"]
    assert m.significant is False and m.grade == "n.s." and "over the warn threshold 1%" in m.reasons[0]
    assert ns.ok and "n.s." in ns.format()  # n.s. is reported, never a failure
    # without a per-sample table there is no paired test: the threshold alone decides, and the reason says so
    bare = make_run(tmp_path / "bare", "small", {"em": {"values": small}}, samples=False)
    m = compare(make_run(tmp_path / "bare", "a", {"em": {"values": base}}, samples=False), bare,
                fail_at="10%").metrics["em"]
    assert m.paired is None and m.grade == "warn" and "graded on the threshold alone" in m.reasons[0]
    assert "each only when the paired test is significant" in ns.format()
