"""leaderboard(): direction-aware ranking, intervals, ties, Holm, quality vs cost."""

import random
import textwrap

import pytest

from auditkit_ray import ConfigError
from auditkit_ray.compare import leaderboard
from auditkit_ray.compare import stats as st

scipy_stats = pytest.importorskip("scipy.stats")
pytest.importorskip("pyarrow")

IDS = [f"q{i:03d}" for i in range(200)]


def _rate(k, n=200):
    return {f"q{i:03d}": float(i < k) for i in range(n)}


def test_lower_is_better_ranks_ascending_and_higher_is_better_descending(tmp_path, make_run):
    runs = [
        make_run(
            tmp_path,
            name,
            {"acc": {"values": _rate(k)}, "len": {"direction": "minimize", "values": {i: float(L) for i in IDS}}},
        )
        for name, k, L in (("small", 100, 5), ("big", 180, 20), ("mid", 140, 12))
    ]
    lb = leaderboard(runs, n_resamples=200)
    assert lb.metrics["acc"].order() == ["big", "mid", "small"]
    assert lb.metrics["len"].order() == ["small", "mid", "big"]
    assert lb.metrics["acc"].winners == ["big"] and not lb.metrics["acc"].tie
    assert lb.metrics["len"].winners == ["small"]
    assert [e.rank for e in lb.metrics["acc"].entries] == [1, 2, 3]


def test_wilson_or_clopper_pearson_intervals_on_binary_means(tmp_path, make_run):
    a = make_run(tmp_path, "a", {"acc": {"values": _rate(7, 10)}})
    w = leaderboard([a], n_resamples=50).metrics["acc"].entries[0]
    assert w.ci_method == "wilson" and (w.ci_low, w.ci_high) == pytest.approx(st.wilson(7, 10))
    cp = leaderboard([a], binary_ci="clopper-pearson", n_resamples=50).metrics["acc"].entries[0]
    ref = scipy_stats.binomtest(7, 10).proportion_ci(method="exact")
    assert cp.ci_method == "clopper-pearson" and (cp.ci_low, cp.ci_high) == pytest.approx((ref.low, ref.high))
    with pytest.raises(ConfigError, match="binary_ci"):
        leaderboard([a], binary_ci="agresti")


def test_overlapping_intervals_are_declared_a_tie(tmp_path, make_run):
    a = make_run(tmp_path, "a", {"acc": {"values": _rate(120)}})
    b = make_run(tmp_path, "b", {"acc": {"values": _rate(116)}})
    c = make_run(tmp_path, "c", {"acc": {"values": _rate(60)}})
    board = leaderboard([a, b, c], n_resamples=200).metrics["acc"]
    assert board.tie and board.winners == ["a", "b"]
    entries = {e.run: e for e in board.entries}
    assert entries["b"].tied_with_best and not entries["c"].tied_with_best
    assert "tie: a, b (intervals overlap: marked *)" in leaderboard([a, b, c], n_resamples=200).format()


def test_pairwise_matrix_is_holm_adjusted_and_direction_aware(tmp_path, make_run):
    rng = random.Random(3)
    base = {i: rng.random() for i in IDS}
    runs = [
        make_run(
            tmp_path,
            f"r{k}",
            {
                "loss": {
                    "direction": "minimize",
                    "values": {i: v + 0.05 * k + rng.gauss(0, 0.01) for i, v in base.items()},
                }
            },
        )
        for k in range(3)
    ]
    board = leaderboard(runs, n_resamples=500).metrics["loss"]
    assert board.order() == ["r0", "r1", "r2"]
    cells = board.pairwise
    assert [(c.a, c.b) for c in cells] == [("r0", "r1"), ("r0", "r2"), ("r1", "r2")]
    assert [c.p_holm for c in cells] == pytest.approx(st.holm([c.p_value for c in cells]))
    assert all(c.significant and c.n_paired == 200 and c.test == "paired permutation" and c.seed == 0 for c in cells)
    assert [c.better for c in cells] == ["r0", "r0", "r1"]


def test_clustered_errors_when_samples_carry_a_cluster_id_or_repeat(tmp_path, make_run):
    vals = {f"q{i:02d}": float(i % 10 < 5) for i in range(60)}
    clusters = {k: f"doc{int(k[1:]) // 10}" for k in vals}  # 6 clusters of 10: each cluster half right
    a = make_run(tmp_path, "a", {"acc": {"values": vals, "cluster": clusters}})
    e = leaderboard([a], n_resamples=50).metrics["acc"].entries[0]
    se, g = st.clustered_se(list(vals.values()), list(clusters.values()))
    assert (
        e.ci_method.startswith("clustered t (6 clusters")
        and e.n_clusters == 6
        and e.clustered_stderr == pytest.approx(se)
    )
    t = scipy_stats.t.ppf(0.975, 5)
    assert (e.ci_low, e.ci_high) == pytest.approx((max(0, 0.5 - t * se), min(1, 0.5 + t * se)))
    reps = {(f"s{i}", r): float((i + r) % 3 == 0) for i in range(20) for r in range(3)}
    e2 = leaderboard([make_run(tmp_path, "b", {"acc": {"values": reps}})], n_resamples=50).metrics["acc"].entries[0]
    assert "repeats clustered by sample_id" in e2.ci_method and e2.n_clusters == 20


def test_a_continuous_mean_gets_the_run_summarys_interval(tmp_path, make_run):
    # one interval per metric and run (issue 30): the leaderboard's is the one the run printed
    from auditkit_ray.core.aggregate import MeanStats, summarize
    from auditkit_ray.core.types import Score

    rng = random.Random(9)
    values = {i: rng.random() for i in IDS}
    a = make_run(tmp_path, "a", {"f1": {"values": values}})
    e1 = leaderboard([a], n_resamples=300, seed=4).metrics["f1"].entries[0]
    st = MeanStats()
    for v in values.values():
        st.add(Score.scored("f1", v))
    s = summarize(st)
    assert e1.ci_method == "normal" and e1.ci_low < e1.mean < e1.ci_high
    assert (e1.ci_low, e1.ci_high) == pytest.approx((s["ci_low"], s["ci_high"]), abs=1e-12)


def test_corpus_metric_interval_uses_finalize_or_is_skipped_with_a_reason(tmp_path, make_run, monkeypatch):
    (tmp_path / "aukr_lb_corpus.py").write_text(textwrap.dedent('''
        from auditkit_ray import Direction, Metric
        class Ratio(Metric):
            direction = Direction.MAXIMIZE
            aggregation = "corpus"
            def score(self, sample, generation, context):
                raise NotImplementedError
            def finalize(self, stats):
                return stats[0] / stats[1] if stats[1] else None
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("AUDITKIT_RAY_TRUSTED_PATHS", str(tmp_path))  # user code outside the working directory
    rng = random.Random(1)
    tot = {i: rng.randint(1, 30) for i in IDS}
    hit = {i: rng.randint(0, t) for i, t in tot.items()}

    def spec(cls):
        return {"r": {"aggregation": "corpus", "cls": cls, "finalize": lambda s: s[0] / s[1],
                      "values": {i: hit[i] / tot[i] for i in IDS}, "stats": {i: [hit[i], tot[i]] for i in IDS}}}

    good = leaderboard([make_run(tmp_path, "a", spec("aukr_lb_corpus:Ratio"))], n_resamples=300).metrics["r"].entries[0]
    assert good.mean == pytest.approx(sum(hit.values()) / sum(tot.values()))
    assert (
        good.ci_method.startswith("bootstrap percentile over corpus statistics")
        and good.ci_low < good.mean < good.ci_high
    )
    bad = leaderboard([make_run(tmp_path, "b", spec("no_such_mod:Ratio"))], n_resamples=300).metrics["r"].entries[0]
    assert bad.ci_low is None and "no interval: cannot rebuild metric no_such_mod:Ratio" in bad.ci_note


def test_incomparable_runs_are_excluded_from_the_ranking_with_the_reason(tmp_path, make_run):
    a = make_run(tmp_path, "a", {"acc": {"values": _rate(100)}})
    b = make_run(tmp_path, "b", {"acc": {"values": _rate(150)}})
    c = make_run(tmp_path, "c", {"acc": {"values": _rate(190)}}, dataset="e" * 64)
    d = make_run(tmp_path, "d", {"acc": {"values": _rate(195), "params": {"strict": True}}})
    board = leaderboard([a, b, c, d], n_resamples=50).metrics["acc"]
    assert board.order() == ["b", "a"]
    excl = {e.run: e.excluded for e in board.entries if e.excluded}
    assert "dataset fingerprints differ" in excl["c"] and "metric params differ (strict" in excl["d"]


def test_quality_vs_cost_table_and_direction_aware_pareto_front(tmp_path, make_run):
    specs = {  # name: (accuracy k of 200, mean length, cost, p50 latency)
        "cheap": (100, 5.0, 1.0, 0.1),
        "strong": (180, 9.0, 10.0, 0.9),
        "waste": (110, 30.0, 12.0, 1.0),
        "mid": (150, 12.0, 4.0, 0.4),
    }
    runs = [
        make_run(
            tmp_path,
            n,
            {"acc": {"values": _rate(k)}, "len": {"direction": "minimize", "values": {i: L for i in IDS}}},
            perf={
                "cost": c,
                "latency_p50_s": lat,
                "latency_p95_s": lat * 2,
                "throughput_samples_per_s": 1 / lat,
                "model_size_bytes": int(c * 1e9),
            },
            tokens={"prompt": 1000, "completion": 200},
        )
        for n, (k, L, c, lat) in specs.items()
    ]
    lb = leaderboard(runs, n_resamples=50)
    assert lb.cost_axis == "cost"
    assert lb.pareto["acc"].front == ["cheap", "mid", "strong"] and lb.pareto["acc"].dominated["waste"] in (
        "strong",
        "mid",
    )
    assert lb.pareto["len"].front == ["cheap"]  # shortest and cheapest: dominates the rest
    row = {r.run: r for r in lb.cost}["mid"]
    assert (
        row.metrics == {"acc": 0.75, "len": 12.0}
        and row.latency_p50_s == 0.4
        and row.cost == 4.0
        and row.prompt_tokens == 1000
    )
    lat = leaderboard(runs, n_resamples=50, cost_axis="latency_p95_s", quality=["acc"])
    assert list(lat.pareto) == ["acc"] and lat.pareto["acc"].axis == "latency_p95_s"
    text = lb.format()
    assert "Pareto front, acc ↑ vs cost ↓: cheap, mid, strong" in text and "quality vs cost" in text
    with pytest.raises(ConfigError, match="unknown cost axis"):
        leaderboard(runs, cost_axis="vibes")


def test_leaderboard_gates_against_a_baseline(tmp_path, make_run):
    base = make_run(tmp_path, "base", {"acc": {"values": _rate(150)}})
    a = make_run(tmp_path, "a", {"acc": {"values": _rate(149)}})
    b = make_run(tmp_path, "b", {"acc": {"values": _rate(120)}})
    lb = leaderboard([a, b], baseline=base, max_regression=0.02, fail_under={"acc": 0.7}, n_resamples=50)
    failed = lb.failures
    assert len(failed) == 2
    assert any("b: acc = 0.6000 is under 0.7" in f for f in failed)
    assert any("b: acc regressed by 0.1500" in f for f in failed)
    assert lb.comparisons["a"].metrics["acc"].grade == "pass"
    with pytest.raises(ConfigError, match="needs --baseline"):
        leaderboard([a], max_regression=0.02)
