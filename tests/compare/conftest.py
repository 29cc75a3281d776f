"""Fixtures: stored runs written directly (no Ray) by ``auditkit_ray.testing.runs.build_run``.

``make_run(root, name, metrics, ...)`` writes ``root/<name>/result.json`` and
``root/<name>/samples/shard-00000.parquet`` (the run_table column layout) and
returns the result.json path. ``metrics`` maps a metric name to a spec:

    {"direction": "maximize" | "minimize",     # default maximize
     "values": {sample_id or (sample_id, repeat): float | None | "error" | "not_tested" | "unknown"},
     "params": {...}, "version": "1", "cls": "module:Class",   # the identity
     "aggregation": "mean" | "corpus", "finalize": callable (corpus: mean from summed stats),
     "stats": {key: [floats]}, "cluster": {key: id}}

``typed=True`` also writes the typed score columns the scoring stage writes (``store.columns``);
``duplicate=k`` stores the first k rows a second time (with other values).
"""

from __future__ import annotations

import pytest

from auditkit_ray.testing.runs import build_run


@pytest.fixture(scope="session")
def make_run():
    return build_run
