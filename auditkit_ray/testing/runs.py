"""Stored runs and sweeps written directly, without Ray: what a finished evaluation leaves in a result store.

The stored layout is a contract the comparisons, the reports and the viewer read, and that a user's own tests
need in order to test code that reads results (a gate, a dashboard, a custom report) without running a model::

    <run dir>/result.json                    the RunResult (metric summaries, perf, tokens, config)
    <run dir>/<samples dir>/shard-00000.parquet ...   per-sample rows in the run table's column layout
    <store>/runs/<run fp>/                   a run dir inside a result store (samples dir ``s<shard size>``)
    <store>/sweeps/<sweep fp>/sweep.json, manifest.json   a finished sweep and the state of its runs

``write_run`` is the builder: per-sample rows (sample id, prompt, target, output, scores...) in, a run out, its
metric summaries computed from the rows' scores by the package's own aggregation (``core.aggregate``), so a
summary is what the pipeline would have written for those scores. ``build_run`` is a front end for tests that
think per metric (``{"acc": {"values": {"q1": 1.0, "q2": None}}}``), and ``write_sweep`` lists runs as a
finished sweep. pyarrow (the ``view`` extra) loads inside the functions that write shards.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.aggregate import MeanStats, summarize
from ..core.result import MetricSummary, Perf, RunResult, TokenUsage
from ..core.types import Score, Status

__all__ = ["build_run", "write_run", "write_sweep"]

#: the keys a row may carry (``sample_id`` and ``scores`` are the ones that matter; the rest have defaults)
ROW_KEYS = frozenset({"sample_id", "repeat", "prompt", "target", "text", "raw_text", "error", "annotations",
                      "latency_s", "scores"})
#: the keys of a metric's entry in ``write_run(metrics=...)``
METRIC_KEYS = frozenset({"direction", "aggregation", "finalize", "cls", "version", "params", "identity"})


def _score(name: str, value: Any) -> Score:
    """A score from the shorthand of a ``scores`` mapping: a number is scored, None is unknown, a status
    name (``"error"``, ``"not_tested"``, ``"unknown"``) is that status."""
    if isinstance(value, Score):
        return value
    if value is None:
        return Score(name=name, status=Status.UNKNOWN)
    if isinstance(value, str):
        return Score(name=name, status=Status(value))
    return Score.scored(name, float(value))


def _scores(row: Mapping[str, Any]) -> list[tuple[Score, dict[str, Any]]]:
    """A row's scores as (the Score the summaries count, the dict the ``scores`` column stores)."""
    given = row.get("scores") or []
    out = []
    items = given.items() if isinstance(given, Mapping) else ((None, s) for s in given)
    for name, s in items:
        if isinstance(s, Mapping) and name is None:  # stored exactly as given (a hand-written reason, say)
            out.append((Score.model_validate(dict(s)), dict(s)))
        else:
            score = s if isinstance(s, Score) else _score(str(name), s)
            out.append((score, score.model_dump(mode="json")))
    return out


def _identity(name: str, spec: Mapping[str, Any], direction: str) -> dict[str, Any]:
    if "identity" in spec:
        return dict(spec["identity"] or {})
    return {"name": name, "class": spec.get("cls", f"fixtures:{name}"), "version": spec.get("version", "1"),
            "direction": direction, "params": dict(spec.get("params", {}))}


def _summaries(scored: list[list[tuple[Score, dict]]], metrics: Mapping[str, Mapping[str, Any]]
               ) -> dict[str, MetricSummary]:
    """Every metric's summary, the listed metrics first (a listed metric no row scores is summarized too)."""
    names = list(metrics) + [s.name for row in scored for s, _ in row if s.name not in metrics]
    stats = {name: MeanStats() for name in dict.fromkeys(names)}
    corpus: dict[str, list[float] | None] = {name: None for name in stats}
    for row in scored:
        for s, _ in row:
            stats[s.name].add(s)
            st = s.metadata.get("stats")
            if s.status is Status.SCORED and st is not None:
                total = corpus[s.name]
                corpus[s.name] = list(st) if total is None else [a + b for a, b in zip(total, st)]
    out = {}
    for name, ms in stats.items():
        spec = metrics.get(name, {})
        unknown = set(spec) - METRIC_KEYS
        if unknown:
            raise TypeError(f"metric {name!r}: unknown keys {sorted(unknown)} (known: {sorted(METRIC_KEYS)})")
        direction = spec.get("direction", "maximize")
        aggregation = spec.get("aggregation", "mean")
        summ = summarize(ms)
        if aggregation == "corpus":
            finalize: Callable[[list[float]], float] | None = spec.get("finalize")
            if finalize is None:
                raise TypeError(f"metric {name!r}: aggregation 'corpus' needs 'finalize' (summed stats -> value)")
            total = corpus[name]
            # a corpus metric's value is finalized from the summed statistics; it has no per-sample interval
            summ.update(mean=finalize(total) if total else None, stderr=None, ci_low=None, ci_high=None,
                        ci_method=None)
        out[name] = MetricSummary(name=name, direction=direction, aggregation=aggregation,
                                  identity=_identity(name, spec, direction), **summ)
    return out


def _table(shard: int, rows: Sequence[Mapping[str, Any]], stored: Sequence[list[dict]], indexes: Sequence[int],
           annotations: bool, latency: bool):
    import pyarrow as pa

    n = len(rows)
    cols: dict[str, Any] = {
        "shard": pa.array([shard] * n, pa.int32()),
        "index": pa.array(list(indexes), pa.int32()),
        "sample_id": pa.array([str(r["sample_id"]) for r in rows], pa.string()),
        "repeat": pa.array([int(r.get("repeat", 0)) for r in rows], pa.int32()),
        "prompt": pa.array([r.get("prompt", "") for r in rows], pa.string()),
        "target": pa.array([json.dumps(r.get("target")) for r in rows], pa.string()),
        "text": pa.array([r.get("text", "") for r in rows], pa.string()),
        "raw_text": pa.array([r.get("raw_text", r.get("text", "")) for r in rows], pa.string()),
        "error": pa.array([r.get("error") for r in rows], pa.string()),
    }
    if annotations:
        cols["annotations"] = pa.array([json.dumps(r.get("annotations") or {}) for r in rows], pa.string())
    cols["scores"] = pa.array([json.dumps(s) for s in stored], pa.string())
    if latency:
        cols["latency_s"] = pa.array([r.get("latency_s") for r in rows], pa.float64())
    return pa.table(cols)


def write_run(
    rows: Iterable[Mapping[str, Any]],
    *,
    name: str,
    store: str | Path | None = None,
    run_dir: str | Path | None = None,
    fingerprint: str | None = None,
    metrics: Mapping[str, Mapping[str, Any]] | None = None,
    shard_size: int | None = None,
    samples_dir: str | None = None,
    samples: bool = True,
    typed: bool = False,
    duplicates: Sequence[Mapping[str, Any]] = (),
    perf: Mapping[str, Any] | None = None,
    tokens: Mapping[str, Any] | None = None,
    **result: Any,
) -> Path:
    """Write a finished run: ``result.json`` and its per-sample Parquet shards. Returns the result.json path.

    ``rows``: one mapping per (sample, repeat), in order: ``sample_id`` (required), ``repeat`` (0), ``prompt``,
    ``target`` (any JSON value), ``text``, ``raw_text`` (the text), ``error`` (None), ``annotations`` (a dict),
    ``latency_s`` and ``scores``: a list of ``Score`` objects or score dicts (stored as given), or a mapping
    ``{metric: value}`` where a number is scored, None is unknown and a status name is that status.
    The ``annotations`` and ``latency_s`` columns are written when some row has them.

    Where: ``store`` writes ``<store>/runs/<fingerprint>/`` (the layout a result store has), ``run_dir`` that
    folder. ``fingerprint`` defaults to the sha256 of the name (give one per run when a store holds two runs of
    one name); ``run_id`` (a ``RunResult`` field) to its first 16 characters.

    ``metrics``: per metric name, ``direction`` ("maximize" | "minimize"), ``aggregation`` ("mean" |
    "corpus", with ``finalize``: summed ``metadata["stats"]`` of the scored rows -> the value), and the
    identity (``cls``, ``version``, ``params``; or ``identity``, the whole dict, ``{}`` for none). A metric
    the rows score but ``metrics`` does not list is a mean, higher is better. Summaries come from
    ``core.aggregate`` over the rows' scores, the first copy of each row only.

    ``shard_size`` rows per shard (all in one when None), in ``samples_dir`` (``s<shard_size>`` with a size,
    else ``samples``); ``samples=False`` writes no shards (a result without its table). ``typed`` also writes
    the typed score columns the scoring stage writes. ``duplicates``: rows stored a second time at the end of
    the first shard (as a retried shard can leave them), under the index of their first copy, not counted.
    ``perf`` and ``tokens`` are ``Perf``/``TokenUsage`` fields; any other keyword is a ``RunResult`` field
    (``dataset_fingerprint``, ``config``, ``backend``, ``created_at``, ``seed``, ...). ``error_count``
    defaults to the rows with an error.
    """
    rows = list(rows)
    for k, row in enumerate(rows):
        unknown = set(row) - ROW_KEYS
        if unknown or "sample_id" not in row:
            raise TypeError(f"row {k}: unknown keys {sorted(unknown)}" if unknown else f"row {k}: no sample_id")
    if (store is None) == (run_dir is None):
        raise TypeError("write_run: give store (a result store) or run_dir (a run folder), not both")
    fp = fingerprint or hashlib.sha256(name.encode()).hexdigest()
    where = Path(store) / "runs" / fp if store is not None else Path(run_dir)  # type: ignore[arg-type]
    where.mkdir(parents=True, exist_ok=True)
    scored = [_scores(row) for row in rows]
    summaries = _summaries(scored, metrics or {})
    shards_dir = where / (samples_dir or (f"s{shard_size}" if shard_size else "samples"))
    if samples:
        _write_shards(shards_dir, rows, scored, shard_size, typed, duplicates)
    result.setdefault("run_id", fp[:16])
    result.setdefault("error_count", sum(1 for r in rows if r.get("error") is not None))
    run = RunResult(name=name, fingerprint=fp, metrics=summaries, perf=Perf(**(perf or {})),
                    tokens=TokenUsage(**(tokens or {})), samples_path=str(shards_dir) if samples else None, **result)
    return run.save(where / "result.json")


def _write_shards(shards_dir: Path, rows: list[Mapping[str, Any]], scored: list[list[tuple[Score, dict]]],
                  shard_size: int | None, typed: bool, duplicates: Sequence[Mapping[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    shards_dir.mkdir(parents=True, exist_ok=True)
    per = max(1, shard_size or len(rows))
    annotations = any("annotations" in r for r in [*rows, *duplicates])
    latency = any("latency_s" in r for r in [*rows, *duplicates])
    for sh in range(max(1, math.ceil(len(rows) / per))):  # a run of no rows still has its (empty) first shard
        part = rows[sh * per:(sh + 1) * per]
        stored = [[d for _, d in row] for row in scored[sh * per:(sh + 1) * per]]
        table = _table(sh, part, stored, range(len(part)), annotations, latency)
        if duplicates and sh == 0:
            first = {(str(r["sample_id"]), int(r.get("repeat", 0))): k for k, r in enumerate(part)}
            again = [first[(str(r["sample_id"]), int(r.get("repeat", 0)))] for r in duplicates]
            table = pa.concat_tables([table, _table(0, duplicates, [[d for _, d in _scores(r)] for r in duplicates],
                                                    again, annotations, latency)])
        if typed:  # the typed score columns the scoring stage writes beside the JSON
            from ..store.columns import mark_typed, score_columns

            for column, values in score_columns([json.loads(b) for b in table.column("scores").to_pylist()]).items():
                table = table.append_column(column, values)
            table = mark_typed(table)
        pq.write_table(table, shards_dir / f"shard-{sh:05d}.parquet")


def _key(k: Any) -> tuple[str, int]:
    return (k, 0) if isinstance(k, str) else (str(k[0]), int(k[1]))


def build_run(
    root: str | Path,
    name: str,
    metrics: Mapping[str, Mapping[str, Any]],
    *,
    dataset: str | None = "d" * 64,
    perf: Mapping[str, Any] | None = None,
    tokens: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    samples: bool = True,
    shards: int = 1,
    typed: bool = False,
    duplicate: int = 0,
) -> Path:
    """A run in ``root/<name>/`` (shards in ``samples/``) from values given per metric; returns result.json.

    ``metrics`` maps a metric name to ``{"values": {sample_id or (sample_id, repeat): value}}`` where a value
    is a number, None (unknown) or a status name (``"error"``, ``"not_tested"``, ``"unknown"``), plus
    ``direction``, ``aggregation``/``finalize``, ``cls``/``version``/``params`` (the identity; ``no_identity``
    for none) as in ``write_run``, ``stats`` ({key: [floats]}, a corpus metric's per-sample statistics) and
    ``cluster`` ({key: id}). Rows are the keys in first-seen order, ``shards`` shards of equal size; each row's
    prompt is ``q <id>``, target ``"t"`` and output ``x``. ``duplicate=k`` stores the first k rows a second
    time with each value ``v`` as ``1 - v`` (readers count the first copy). The fingerprint and run id are
    the name's hex; ``dataset`` is the dataset fingerprint.
    """
    keys: list[tuple[str, int]] = []
    for spec in metrics.values():
        for k in spec.get("values", {}):
            if _key(k) not in keys:
                keys.append(_key(k))
    scores: dict[tuple[str, int], list[Score]] = {k: [] for k in keys}
    specs: dict[str, dict[str, Any]] = {}
    for mname, spec in metrics.items():
        for k, v in spec.get("values", {}).items():
            meta: dict[str, Any] = {}
            if k in spec.get("stats", {}):
                meta["stats"] = list(spec["stats"][k])
            if k in spec.get("cluster", {}):
                meta["cluster"] = spec["cluster"][k]
            if isinstance(v, str):
                s = Score(name=mname, status=Status(v), reason="fixture", metadata=meta)
            elif v is None:
                s = Score(name=mname, status=Status.UNKNOWN, reason="fixture", metadata=meta)
            else:
                s = Score.scored(mname, float(v), metadata=meta)
            scores[_key(k)].append(s)
        specs[mname] = {k: spec[k] for k in ("direction", "aggregation", "finalize", "cls", "version", "params")
                        if k in spec}
        if spec.get("no_identity"):
            specs[mname]["identity"] = {}
    rows = [{"sample_id": sid, "repeat": rep, "prompt": f"q {sid}", "target": "t", "text": "x", "raw_text": "x",
             "scores": scores[(sid, rep)]} for sid, rep in keys]
    per = max(1, math.ceil(len(keys) / shards))
    again = [{**row, "scores": [_flipped(s.model_dump(mode="json")) for s in row["scores"]]}
             for row in rows[:min(duplicate, per)]]
    return write_run(rows, name=name, run_dir=Path(root) / name, fingerprint=(name.encode().hex() + "f" * 64)[:64],
                     run_id=run_id or (name.encode().hex() + "0" * 16)[:16], metrics=specs, shard_size=per,
                     samples_dir="samples", samples=samples, typed=typed, duplicates=again, perf=perf, tokens=tokens,
                     dataset_fingerprint=dataset)


def _flipped(score: dict[str, Any]) -> dict[str, Any]:
    return {**score, "value": 1.0 - score["value"]} if score.get("value") is not None else score


def write_sweep(
    store: str | Path,
    name: str,
    runs: Sequence[Mapping[str, Any]],
    *,
    fingerprint: str | None = None,
    decision: Mapping[str, Any] | None = None,
    cells: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """A finished sweep of runs already in ``store``: ``<store>/sweeps/<fingerprint>/sweep.json`` (what a sweep
    writes at its end) and ``manifest.json`` (each run's cell, state and result). Returns the sweep folder.

    ``runs``: ``{"name", "fingerprint"}`` per run, in the sweep's order, optionally with ``state`` (default
    "complete"), ``cell`` (default "-") and ``reason``; a run's ``result`` is its result.json when the store
    has one. ``decision`` is the sweep's decision rule (``decision:`` in its file), ``cells`` the cell entries
    (a failed cell's name, state and reason, say). ``fingerprint`` defaults to a hash of the name and runs.
    While a run is still ``pending`` or ``running`` the sweep has no sweep.json yet, as a running sweep.
    """
    store = Path(store)
    fps = [str(r["fingerprint"]) for r in runs]
    sfp = fingerprint or hashlib.sha256(json.dumps(["sweep", name, fps]).encode()).hexdigest()
    sdir = store / "sweeps" / sfp
    sdir.mkdir(parents=True, exist_ok=True)
    entries = []
    for r in runs:
        result = store / "runs" / str(r["fingerprint"]) / "result.json"
        entries.append({"name": r["name"], "fingerprint": str(r["fingerprint"]), "cell": r.get("cell", "-"),
                        "state": r.get("state", "complete"), "result": str(result) if result.is_file() else None,
                        "reason": r.get("reason")})
    head = {"name": name, "fingerprint": sfp}
    finished = all(e["state"] in ("complete", "failed", "skipped") for e in entries)
    rule = dict(decision) if decision is not None else None
    (sdir / "manifest.json").write_text(json.dumps(
        {**head, "state": "complete" if finished else "running", "decision": rule, "runs": entries,
         "cells": [dict(c) for c in cells]}, indent=2))
    if finished:  # a sweep writes sweep.json at its end; until then a reader has only the manifest
        (sdir / "sweep.json").write_text(json.dumps(
            {**head, "cells": [dict(c) for c in cells], "decision": rule,
             "runs": [{"name": e["name"], "fingerprint": e["fingerprint"]} for e in entries]}, indent=2))
    return sdir
