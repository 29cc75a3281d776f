"""Property tests (hypothesis): self-compare is clean, A>B iff B<A, and a
direction swap reverses the ranking."""

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from auditkit_ray.compare import compare, leaderboard, pareto_front
from auditkit_ray.core.metric import Direction
from auditkit_ray.core.result import load_run

pytest.importorskip("scipy")
pytest.importorskip("pyarrow")

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

cell = hs.one_of(hs.floats(0, 1, allow_nan=False), hs.sampled_from([None, "error"]))
binary_cell = hs.one_of(hs.sampled_from([0.0, 1.0]), hs.just(None))


@hs.composite
def runs(draw, n_runs=2):
    """Per-sample values for a binary and a continuous metric, each with a direction."""
    n = draw(hs.integers(1, 25))
    ids = [f"s{i}" for i in range(n)]
    dirs = {
        "bin": draw(hs.sampled_from(["maximize", "minimize"])),
        "cont": draw(hs.sampled_from(["maximize", "minimize"])),
    }
    out = []
    for _ in range(n_runs):
        bins = draw(hs.lists(binary_cell, min_size=n, max_size=n))
        conts = draw(hs.lists(cell, min_size=n, max_size=n))
        out.append({"bin": {"direction": dirs["bin"], "values": dict(zip(ids, bins))},
                    "cont": {"direction": dirs["cont"], "values": dict(zip(ids, conts))}})
    return out


@SETTINGS
@given(spec=runs(n_runs=1))
def test_comparing_a_run_with_itself_is_clean(make_run, spec):
    with tempfile.TemporaryDirectory() as d:
        p = make_run(Path(d), "a", spec[0])
        c = compare(p, p, n_resamples=200)
        assert c.ok and not c.failures
        for m in c.metrics.values():
            if m.baseline_mean is None:  # nothing scored: not comparable, never a regression
                assert m.grade == "not comparable" and m.regression is None
                continue
            assert m.comparable and m.grade == "pass"
            assert m.delta == 0 and m.regression == 0 and not m.candidate_worse and not m.candidate_better
            assert m.paired.p_value == 1.0 and m.paired.unpaired == 0 and m.paired.worse == m.paired.better == 0
            if m.paired.diff is not None:
                assert not m.paired.diff.newly_wrong and not m.paired.diff.newly_right
            if m.retention is not None:
                assert m.retention == 1.0


@SETTINGS
@given(spec=runs(n_runs=2))
def test_a_better_than_b_iff_b_worse_than_a(make_run, spec):
    with tempfile.TemporaryDirectory() as d:
        a, b = make_run(Path(d), "a", spec[0]), make_run(Path(d), "b", spec[1])
        ab, ba = compare(a, b, n_resamples=200), compare(b, a, n_resamples=200)
        for name in ab.metrics:
            x, y = ab.metrics[name], ba.metrics[name]
            assert x.candidate_better == y.candidate_worse
            assert x.candidate_worse == y.candidate_better
            assert x.comparable == y.comparable
            if x.comparable:
                assert x.delta == -y.delta
                assert (x.regression > 0) == (y.improvement > 0)
                if x.paired is not None:
                    assert x.paired.p_value == y.paired.p_value
                    assert x.paired.n_paired == y.paired.n_paired and x.paired.unpaired == y.paired.unpaired
                    assert x.paired.better == y.paired.worse
                    if x.paired.diff is not None:
                        assert x.paired.diff.newly_wrong == y.paired.diff.newly_right


def _flip(path: Path) -> None:
    r = load_run(path)
    for s in r.metrics.values():
        s.direction = Direction.MINIMIZE if s.direction is Direction.MAXIMIZE else Direction.MAXIMIZE
        s.identity["direction"] = s.direction.value
    r.save(path)


@SETTINGS
@given(cents=hs.lists(hs.integers(1, 99), min_size=2, max_size=6, unique=True),
       direction=hs.sampled_from(["maximize", "minimize"]))
def test_swapping_the_direction_of_a_metric_reverses_its_ranking(make_run, cents, direction):
    # distinct means a hundredth apart: floats one ulp apart (0.99 and 0.9899999999999999, found by
    # hypothesis) give equal means after summing, a tie ranked by name in both directions
    means = [c / 100 for c in cents]
    with tempfile.TemporaryDirectory() as d:
        paths = [make_run(Path(d), f"r{i}", {"m": {"direction": direction, "values": {f"s{j}": mu for j in range(3)}}})
                 for i, mu in enumerate(means)]
        before = leaderboard(paths, n_resamples=50, pairwise=False).metrics["m"].order()
        expected = [
            f"r{i}" for i in sorted(range(len(means)), key=lambda i: -means[i] if direction == "maximize" else means[i])
        ]
        assert before == expected
        for p in paths:
            _flip(p)
        after = leaderboard(paths, n_resamples=50, pairwise=False).metrics["m"].order()
        assert after == list(reversed(before))


@settings(max_examples=200, deadline=None)
@given(points=hs.lists(hs.tuples(hs.integers(0, 10), hs.integers(0, 10)), min_size=1, max_size=12),
       direction=hs.sampled_from(list(Direction)))
def test_pareto_front_members_are_undominated_and_every_other_run_is_dominated_by_one(points, direction):
    pts = [(f"r{i}", float(q), float(c)) for i, (q, c) in enumerate(points)]
    front, dominated = pareto_front(pts, direction)
    by = {lab: (q, c) for lab, q, c in pts}

    def dominates(x, y):
        (qx, cx), (qy, cy) = by[x], by[y]
        at_least = qx >= qy if direction is Direction.MAXIMIZE else qx <= qy
        return at_least and cx <= cy and (direction.better(qx, qy) or cx < cy)

    assert set(front) | set(dominated) == set(by) and not set(front) & set(dominated)
    for f in front:
        assert not any(dominates(o, f) for o in by if o != f)
    for lab, dom in dominated.items():
        assert dominates(dom, lab)
