"""Which checkpoint to ship (compare/decision.py) over stored runs written directly (no Ray): the verdicts,
Holm across candidates, the recommendation by the preference order with its savings, the direction, unscored
samples excluded and counted, and cells without a result."""

from __future__ import annotations

import math
import random

import pytest

from auditkit_ray.compare import stats as st
from auditkit_ray.compare.decision import DecisionRule, decide, merge_rule
from auditkit_ray.compare.noninferiority import noninferiority
from auditkit_ray.core.metric import Direction
from auditkit_ray.errors import ConfigError

pytest.importorskip("scipy")
M = "exact_match@number"


def _ids(n: int) -> list[str]:
    return [f"s{i:04d}" for i in range(n)]


def _grid(make_run, root, n: int = 400, *, seed: int = 5):
    """A baseline (400 MB) and its pruned and quantized cells on ``n`` problems: p25 differs from it on a few
    samples either way (non-inferior within 0.05 at this n) and is 300 MB; bf16 is as good and as big; int8 is
    100 MB and clearly worse; p50 is 200 MB and a little worse."""
    rng = random.Random(seed)
    ids = _ids(n)
    base = {s: float(rng.random() < 0.75) for s in ids}

    def flip(worse: float, better: float) -> dict[str, float]:
        out = {}
        for s, v in base.items():
            u = rng.random()
            out[s] = 0.0 if v == 1.0 and u < worse else 1.0 if v == 0.0 and u < better else v
        return out

    cells = {"fp32/path=base": (base, 400e6, 0.040), "fp32/path=p25": (flip(0.03, 0.06), 300e6, 0.034),
             "bf16/path=base": (flip(0.02, 0.06), 400e6, 0.038), "int8/path=base": (flip(0.30, 0.02), 100e6, 0.025),
             "fp32/path=p50": (flip(0.10, 0.04), 200e6, 0.030)}
    return [make_run(root, name, {M: {"values": vals}}, perf={"model_size_bytes": size, "latency_p50_s": lat})
            for name, (vals, size, lat) in cells.items()]


def test_a_pruned_cell_that_is_non_inferior_and_smaller_is_recommended(make_run, tmp_path):
    runs = _grid(make_run, tmp_path)
    d = decide(runs, {"metric": M, "baseline": "fp32/path=base", "margin": 0.05})
    verdicts = {c.run: c.verdict for c in d.candidates}
    assert verdicts == {"fp32/path=p25": "non-inferior", "bf16/path=base": "non-inferior",
                        "int8/path=base": "inferior", "fp32/path=p50": "inconclusive"}, d.format()
    assert d.recommended == "fp32/path=p25"  # the smaller of the two that qualify (prefer size first)
    p25 = d.candidate("fp32/path=p25")
    assert p25.savings["size"] == pytest.approx(0.25) and p25.savings["latency"] == pytest.approx(0.15)
    assert p25.bound > -0.05 and p25.p_holm <= 0.05 and p25.method == "tango" and p25.n_paired == 400
    line = d.headline()
    assert line.startswith("decision: ship fp32/path=p25 instead of fp32/path=base: non-inferior on "
                           "exact_match@number ↑ within 0.05: delta ")
    assert "25% smaller" in line and "15% lower latency" in line and "Tango score test" in line
    # Holm across the four tested candidates, each verdict read from its adjusted p
    tested = [c for c in d.candidates if c.p_value is not None]
    assert [c.p_holm for c in tested] == st.holm([c.p_value for c in tested])
    # latency first picks the int8 cell? no: it is inferior; among the qualifying, p25 is also the faster one
    assert decide(runs, {"metric": M, "baseline": "fp32/path=base", "margin": 0.05,
                         "prefer": ["quality"]}).recommended in ("fp32/path=p25", "bf16/path=base")


def test_a_tightened_margin_no_longer_recommends_the_pruned_cell(make_run, tmp_path):
    runs = _grid(make_run, tmp_path)
    d = decide(runs, {"metric": M, "baseline": "fp32/path=base", "margin": 0.005})
    assert d.candidate("fp32/path=p25").verdict != "non-inferior"
    assert d.recommended is None and not d.ok
    near = d.closest
    assert near is not None and near.bound < -0.005
    assert d.headline() == (f"decision: keep fp32/path=base: no candidate is non-inferior on exact_match@number ↑ "
                            f"within 0.005; the closest, {near.run}, has a 95% bound of {near.bound:+.4f} "
                            "against a margin of -0.005")


def test_at_small_n_the_verdict_is_inconclusive_with_the_n_needed(make_run, tmp_path):
    """20 problems: the pruned cell differs from the baseline on two, once better and once worse: not enough to
    show non-inferiority within 0.1; the n it names is enough for the same proportions to decide."""
    def runs_at(n: int, root):
        ids = _ids(n)
        base = {s: float(i % 4 != 0) for i, s in enumerate(ids)}
        cand = dict(base)
        for i in range(0, n, 20):  # in every twenty: one the pruned cell gets right and one it gets wrong
            cand[ids[i]], cand[ids[i + 1]] = 1.0, 0.0
        return [make_run(root, "base", {M: {"values": base}}, perf={"model_size_bytes": 4e8}),
                make_run(root, "p25", {M: {"values": cand}}, perf={"model_size_bytes": 3e8})]

    rule = {"metric": M, "baseline": "base", "margin": 0.1}
    small = decide(runs_at(20, tmp_path / "n20"), rule)
    c = small.candidate("p25")
    assert c.verdict == "inconclusive" and c.n_paired == 20 and c.p_value > 0.05
    assert c.n_needed is not None and 20 < c.n_needed < 200, c
    assert f"{c.n_needed}" in small.format() and small.recommended is None
    n = 20 * math.ceil(c.n_needed / 20)  # the same proportions at the n it names
    big = decide(runs_at(n, tmp_path / "big"), rule)
    assert big.candidate("p25").verdict == "non-inferior" and big.recommended == "p25"


def test_a_lower_is_better_primary_metric_reads_its_direction(make_run, tmp_path):
    rng = random.Random(2)
    ids = _ids(200)
    base = {s: float(rng.randint(8, 30)) for s in ids}
    shorter = {s: v - rng.choice([0.0, 1.0, 2.0]) for s, v in base.items()}
    longer = {s: v + rng.choice([3.0, 4.0, 6.0]) for s, v in base.items()}
    spec = lambda vals: {"output_length": {"direction": "minimize", "values": vals}}  # noqa: E731
    runs = [make_run(tmp_path, "base", spec(base), perf={"model_size_bytes": 4e8}),
            make_run(tmp_path, "short", spec(shorter), perf={"model_size_bytes": 2e8}),
            make_run(tmp_path, "long", spec(longer), perf={"model_size_bytes": 1e8})]
    d = decide(runs, {"metric": "output_length", "baseline": "base", "margin": 1.0})
    assert d.direction is Direction.MINIMIZE
    short, long_ = d.candidate("short"), d.candidate("long")
    assert short.verdict == "non-inferior" and short.delta < 0 < short.advantage
    assert long_.verdict == "inferior" and long_.delta > 0 > long_.advantage
    assert d.recommended == "short"  # the smaller "long" is worse on a metric where lower is better
    # the bound is on the worse side in the metric's units: above the baseline for a lower-is-better metric
    assert long_.bound > 1.0 and short.bound < 1.0 and d.margin_text() == "+1"
    assert short.method == "bootstrap-t" and "studentized bootstrap" in d.headline()


def test_unscored_samples_on_one_side_are_excluded_and_counted(make_run, tmp_path):
    rng = random.Random(9)
    ids = _ids(300)
    base = {s: float(rng.random() < 0.7) for s in ids}
    cand = {s: (v if rng.random() > 0.05 else 1.0 - v) for s, v in base.items()}
    gone = ids[:12]
    cand_scored = {s: ("unknown" if s in gone else v) for s, v in cand.items()}
    base_scored = {s: ("error" if s in ids[290:] else v) for s, v in base.items()}
    runs = [make_run(tmp_path, "base", {M: {"values": base_scored}}),
            make_run(tmp_path, "cand", {M: {"values": cand_scored}})]
    c = decide(runs, {"metric": M, "baseline": "base", "margin": 0.05}).candidate("cand")
    assert (c.excluded_candidate_unscored, c.excluded_baseline_unscored, c.excluded_both_unscored) == (12, 10, 0)
    assert c.n_paired == 300 - 12 - 10 and c.excluded == 22
    kept = [s for s in ids if s not in gone and s not in ids[290:]]
    ref = noninferiority([base[s] for s in kept], [cand[s] for s in kept], margin=0.05)
    assert c.p_value == ref.p_value and c.lower == ref.lower and c.delta == pytest.approx(ref.difference)


def test_cells_without_a_result_and_other_data_are_not_comparable(make_run, tmp_path):
    ids = _ids(50)
    vals = {s: float(i % 3 != 0) for i, s in enumerate(ids)}
    runs = [make_run(tmp_path, "base", {M: {"values": vals}}),
            make_run(tmp_path, "other-data", {M: {"values": vals}}, dataset="e" * 64),
            make_run(tmp_path, "no-metric", {"token_f1": {"values": vals}})]
    cells = [{"name": "broken", "state": "failed", "reason": "model load failed: HeaderTooLarge", "runs": ["broken"]}]
    d = decide(runs, {"metric": M, "baseline": "base", "margin": 0.05}, failed_cells=cells)
    why = {c.run: (c.verdict, c.reason) for c in d.candidates}
    assert why["other-data"][0] == "not comparable" and "dataset fingerprints differ" in why["other-data"][1]
    assert why["no-metric"] == ("not comparable", "exact_match@number is not a metric of this run")
    assert why["broken"][0] == "not comparable" and "HeaderTooLarge" in why["broken"][1]
    assert d.recommended is None and d.closest is None
    assert "no candidate is non-inferior" in d.headline()
    # a baseline whose own cell failed leaves no decision, said so
    gone = decide(runs[1:], {"metric": M, "baseline": "broken", "margin": 0.05}, failed_cells=cells)
    assert gone.headline() == ("decision: none: the baseline broken has no result (its cell failed: model load "
                               "failed: HeaderTooLarge)")


def test_rules_are_checked_and_flags_go_over_a_stored_rule(make_run, tmp_path):
    with pytest.raises(ConfigError, match="decision.prefer: 'speed' is not one of"):
        DecisionRule.parse({"metric": M, "margin": 0.02, "prefer": "size,speed"})
    with pytest.raises(ConfigError, match="decision.margin"):
        DecisionRule.parse({"metric": M, "margin": "-2%"})
    with pytest.raises(ConfigError, match="needs --margin X"):
        merge_rule(None, metric=M)
    assert merge_rule(None, baseline="x") is None
    rule = merge_rule({"metric": M, "margin": "2%", "baseline": "a"}, margin=0.01, prefer="latency,size")
    assert (rule.limit.value, rule.limit.relative, rule.prefer, rule.baseline) == (0.01, False, ["latency", "size"],
                                                                                   "a")
    ids = _ids(100)
    runs = [make_run(tmp_path, "a", {M: {"values": {s: 0.8 for s in ids}}}),
            make_run(tmp_path, "b", {M: {"values": {s: 0.8 for s in ids}}})]
    d = decide(runs, {"metric": M, "baseline": "a", "margin": "5%"})
    assert d.margin == pytest.approx(0.04) and d.margin_spec == "5%" and "5% of the baseline" in d.margin_text()
    with pytest.raises(ConfigError, match="not a metric of the baseline a"):
        decide(runs, {"metric": "bleu", "baseline": "a", "margin": 0.1})
    with pytest.raises(ConfigError, match="'zzz': not a run among a, b"):
        decide(runs, {"metric": M, "baseline": "zzz", "margin": 0.1})
