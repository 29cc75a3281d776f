"""Comparisons read the per-sample tables column-wise, into arrays; what they report must be what today's
row-by-row reading reports (``tests/support/rowwise_compare.py``), to the last bit: p-values, intervals,
grades, and the newly right and newly wrong samples, on tables with and without typed score columns."""

import dataclasses
import math
import random
import sys
import textwrap
from pathlib import Path

import pytest

from auditkit_ray.compare import compare, leaderboard

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from rowwise_compare import rowwise  # noqa: E402

IDS = [f"s{i:03d}" for i in range(150)]


def same(x, y, path="") -> list[str]:
    """Where two results differ (NaN equals NaN; floats compared exactly)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return same(dataclasses.asdict(x), dataclasses.asdict(y), path) if type(x) is type(y) else [path]
    if hasattr(x, "model_dump"):
        return same(x.model_dump(), y.model_dump(), path)
    if isinstance(x, dict) and isinstance(y, dict):
        if set(x) != set(y):
            return [f"{path}: keys {sorted(set(x) ^ set(y))}"]
        return [d for k in x for d in same(x[k], y[k], f"{path}.{k}")]
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        if len(x) != len(y):
            return [f"{path}: {len(x)} vs {len(y)} items"]
        return [d for i, (a, b) in enumerate(zip(x, y)) for d in same(a, b, f"{path}[{i}]")]
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return []
    return [] if x == y and (type(x) is type(y) or {type(x), type(y)} <= {int, float}) else [f"{path}: {x!r} vs {y!r}"]


@pytest.fixture
def corpus_class(tmp_path, monkeypatch):
    (tmp_path / "aukr_cols_fixture.py").write_text(textwrap.dedent('''
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
    monkeypatch.setenv("AUDITKIT_RAY_TRUSTED_PATHS", str(tmp_path))
    return "aukr_cols_fixture:Ratio"


def three_runs(make_run, root: Path, corpus_cls: str, **kw) -> list[Path]:
    """Three runs on one dataset: a binary metric with unscored samples of every kind, a continuous one, a
    lower-is-better binary one, a corpus metric with statistics, and one with cluster ids; the third run
    lacks some samples."""
    rng = random.Random(11)
    out = []
    skill = [0.55, 0.7, 0.6]
    for r in range(3):
        ids = IDS if r < 2 else IDS[10:140]
        acc, f1, loss, ratio, stats, grouped, clusters = {}, {}, {}, {}, {}, {}, {}
        for i in ids:
            u = rng.random()
            unscored = ["error", "unknown", "not_tested", None][int(u * 40)] if u < 0.1 else None
            acc[i] = unscored if u < 0.1 else float(rng.random() < skill[r])
            f1[i] = None if rng.random() < 0.05 else round(rng.random() * skill[r], 6)
            loss[i] = float(rng.random() < 1 - skill[r])
            tot = rng.randint(3, 12)
            hit = min(tot, int(rng.random() * tot * (skill[r] + 0.3)))
            ratio[i], stats[i] = hit / tot, [hit, tot]
            grouped[i] = float(rng.random() < skill[r])
            clusters[i] = f"doc{int(i[1:]) // 15}"
        spec = {"acc": {"values": acc}, "f1": {"values": f1}, "loss": {"values": loss, "direction": "minimize"},
                "ratio": {"aggregation": "corpus", "cls": corpus_cls, "finalize": lambda s: s[0] / s[1],
                          "values": ratio, "stats": stats},
                "grouped": {"values": grouped, "cluster": clusters}}
        out.append(make_run(root, f"run{r}", spec, shards=3, **kw))
    return out


@pytest.mark.parametrize("typed", [False, True], ids=["scores-json", "typed-columns"])
def test_a_comparison_read_column_wise_equals_todays_row_by_row_comparison(tmp_path, corpus_class, monkeypatch,
                                                                            make_run, typed):
    a, b, c = three_runs(make_run, tmp_path, corpus_class, typed=typed, duplicate=4)
    new = compare(b, a, n_resamples=300, warn_at="0.5%")  # a regression: graded
    short = compare(b, c, n_resamples=300)  # samples missing from one run: the only-in counts
    board = leaderboard([a, b, c], n_resamples=300)
    with rowwise(monkeypatch):
        old = compare(b, a, n_resamples=300, warn_at="0.5%")
        old_short = compare(b, c, n_resamples=300)
        old_board = leaderboard([a, b, c], n_resamples=300)
    assert same(new, old) == [] and same(short, old_short) == [] and same(board, old_board) == []
    # the comparison exercised what it had to: every kind of test, both diff lists, unscored and missing pairs
    acc = new.metrics["acc"].paired
    assert acc.test == "mcnemar exact" and acc.diff.newly_right and acc.diff.newly_wrong and acc.unpaired
    assert new.metrics["f1"].paired.test == "paired permutation" and new.metrics["f1"].paired.delta_ci
    assert new.metrics["ratio"].paired.test.startswith("paired approximate randomization")
    assert short.metrics["acc"].paired.only_in_baseline == 20 and new.metrics["loss"].paired.diff is not None
    assert {m.grade for m in new.metrics.values()} - {"pass"}, "some metric should be graded other than pass"
    grouped = next(e for e in board.metrics["grouped"].entries if e.run == "run0")
    assert grouped.ci_method.startswith("clustered t (10 clusters")
    ratio = next(e for e in board.metrics["ratio"].entries if e.run == "run0")
    assert ratio.ci_method.startswith("bootstrap percentile over corpus statistics")
    assert any(p.p_value is not None for p in board.metrics["acc"].pairwise)


def test_paired_values_are_arrays_of_eight_bytes_a_sample(tmp_path, corpus_class, make_run):
    # what paired tests take (and the non-inferiority test): float64 arrays, not lists of Python floats
    from auditkit_ray.compare.samples import load, pair

    a, b, _ = three_runs(make_run, tmp_path, corpus_class, typed=True)
    ra, rb = load(a), load(b)
    (sa, _), (sb, _) = ra.scores(), rb.scores()
    p = pair(sa, sb, "f1")
    assert p.a.dtype.name == p.b.dtype.name == "float64" and p.a.nbytes == 8 * p.n and p.n > 100
    assert sa.metric("acc").state.dtype.name == "int8"
