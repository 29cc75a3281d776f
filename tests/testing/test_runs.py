"""``auditkit_ray.testing.runs`` writes what a finished run leaves in a result store: the package's own readers
(``load_run``, the per-sample table reader, the report loader, ``compare``) load it, and its metric summaries
are what its per-sample rows say."""

from __future__ import annotations

import json
import math
import random

import pytest

from auditkit_ray import load_run
from auditkit_ray.testing import write_run, write_sweep

METRICS = ("exact_match", "token_f1", "length")
N = 30


def _rows(seed: int) -> list[dict]:
    """Random scores; token_f1 unknown on every 9th sample, length an error on every 11th (in both runs)."""
    rng = random.Random(seed)
    return [{"sample_id": f"q{i:03d}", "prompt": f"question {i}", "target": str(i), "text": f"answer {i}",
             "scores": {"exact_match": float(rng.random() < 0.7),
                        "token_f1": round(rng.random(), 3) if i % 9 else None,
                        "length": float(rng.randint(3, 40)) if i % 11 else "error"}}
            for i in range(N)]


def test_a_run_the_builder_writes_loads_with_the_package_loaders_and_its_summaries_are_the_per_sample_means(
        tmp_path):
    pytest.importorskip("pyarrow", reason="the per-sample tables are Parquet: the 'view' extra")
    from auditkit_ray.compare import compare
    from auditkit_ray.report.loader import expand_inputs
    from auditkit_ray.store.samples import read_samples_table

    store = tmp_path / "store"
    rows = {"base": _rows(1), "cand": _rows(2)}
    paths = {name: write_run(r, name=name, store=store, metrics={"length": {"direction": "minimize"}}, shard_size=8)
             for name, r in rows.items()}
    scored = {}  # (run, metric) -> the values the rows gave, in sample order
    for name, path in paths.items():
        assert path == store / "runs" / path.parent.name / "result.json"
        result = load_run(path)
        table = read_samples_table(path)
        assert table.column("sample_id").to_pylist() == [r["sample_id"] for r in rows[name]]
        assert sorted(set(table.column("shard").to_pylist())) == [0, 1, 2, 3]  # 30 rows, 8 a shard
        stored = [json.loads(s) for s in table.column("scores").to_pylist()]
        for metric in METRICS:
            given = [v for r in rows[name] if isinstance(v := r["scores"][metric], float)]
            assert [s["value"] for row in stored for s in row if s["name"] == metric and s["status"] == "scored"] \
                == given
            summary = result.metrics[metric]
            assert (summary.n, summary.total) == (len(given), N), metric
            assert summary.mean == pytest.approx(math.fsum(given) / len(given), rel=1e-12), metric
            scored[name, metric] = given
        assert result.metrics["token_f1"].counts["unknown"] == len([i for i in range(N) if i % 9 == 0])
        assert result.metrics["length"].counts["error"] == len([i for i in range(N) if i % 11 == 0])
        assert [result.metrics[m].direction for m in METRICS] == ["maximize", "maximize", "minimize"]

    sweep = write_sweep(store, "base-vs-cand", [{"name": n, "fingerprint": p.parent.name} for n, p in paths.items()])
    loaded = expand_inputs([sweep])
    assert [r.result.name for r in loaded.runs] == ["base", "cand"] and not loaded.notes
    assert [r.result.metrics for r in loaded.runs] == [load_run(p).metrics for p in paths.values()]

    cmp = compare(paths["base"], paths["cand"], n_resamples=200)
    for metric in METRICS:
        mc = cmp.metrics[metric]
        assert mc.comparable, (metric, mc.reasons)
        # every sample a metric scores is scored in both runs: the paired means are the per-sample means
        assert mc.paired.n_paired == len(scored["base", metric]) == len(scored["cand", metric])
        for side in ("base", "cand"):
            mean = mc.paired.baseline_mean if side == "base" else mc.paired.candidate_mean
            assert mean == pytest.approx(math.fsum(scored[side, metric]) / len(scored[side, metric]), rel=1e-12)


def test_a_corpus_metric_is_finalized_from_the_summed_statistics_and_a_duplicate_row_is_not_counted(tmp_path):
    pytest.importorskip("pyarrow", reason="the per-sample tables are Parquet: the 'view' extra")
    from auditkit_ray.core.types import Score
    from auditkit_ray.store.samples import read_samples_table

    stats = [[1.0, 2.0], [3.0, 5.0], [0.0, 1.0]]
    rows = [{"sample_id": f"s{i}", "scores": [Score.scored("ratio", st[0] / st[1], metadata={"stats": st})]}
            for i, st in enumerate(stats)]
    again = [{"sample_id": "s0", "scores": {"ratio": 0.0}}]
    path = write_run(rows, name="corpus", run_dir=tmp_path / "run", duplicates=again, typed=True,
                     metrics={"ratio": {"aggregation": "corpus", "finalize": lambda t: t[0] / t[1]}})
    summary = load_run(path).metrics["ratio"]
    assert summary.aggregation == "corpus" and summary.n == len(stats)
    assert summary.mean == pytest.approx(sum(s[0] for s in stats) / sum(s[1] for s in stats))
    table = read_samples_table(path)
    assert table.column("sample_id").to_pylist().count("s0") == 2  # stored twice, counted once
    assert "value:ratio" in table.column_names  # the typed score columns the scoring stage writes
