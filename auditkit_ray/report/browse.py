"""Read-only browsing of result stores, for the viewer (``auditkit-ray view``).

A :class:`ResultsBrowser` answers the viewer's questions over the configured
stores (local directories or ``s3://``) and, optionally, an ExperimentDB: the
run history with filters, one run's summary, a page of its per-sample table
(filtered server-side), the diff of two runs and a sweep's leaderboard and
report, led by the decision the sweep ran with (its ``decision`` rule, when it has one). Every answer is a plain
JSON-able value with secrets redacted.

A run's per-sample table is paged (``store.paging``): a page reads only the
files that hold it, and a filter is worked out a file at a time, so opening a
run of ten million samples costs what opening one of a thousand does.

Runs are addressed by fingerprint only (hex, matched against the stores'
listings), never by a path from the caller, so nothing outside the stores is
reachable. Listings are re-read on every call (a running sweep appears and
fills in); what is cached (parsed result.json, per-sample tables) is keyed by
the stored bytes of the run's result.json, so a rewritten run is re-read.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compare import compare, leaderboard
from ..compare.decision import decide
from ..compare.report import jsonable
from ..core.result import RunResult
from ..core.secrets import MASK, is_secret_key, redact, remember_secret, scrub_text
from ..errors import ConfigError
from ..store.base import open_store
from ..store.layout import run_result
from ..store.paging import PagedTable, metric_cells
from ..store.samples import samples_location, table_store
from ..store.sweeps import sweep_docs
from .loader import build_report
from .render import render

FINGERPRINT = re.compile(r"^[0-9a-f]{4,64}$")
#: per-sample columns a page shows
COLUMNS = ("sample_id", "repeat", "prompt", "target", "text", "raw_text", "annotations", "scores", "error",
           "latency_s")
STATUSES = ("scored", "unknown", "not_tested", "error")
MAX_PAGE = 500
#: per-sample tables kept parsed (each may be large)
TABLE_CACHE = 4
#: resamples of the paired tests the viewer runs (the CLI's default is 10,000: this answers a click)
RESAMPLES = 2000


class NotFound(ConfigError):
    """A run or sweep no configured store holds."""

    #: what an HTTP front end answers
    http_status = 404


def _remember_secrets(obj: Any) -> None:
    """Values stored under secret-looking keys, so they are scrubbed from every text, not only masked in place."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and is_secret_key(k) and isinstance(v, str) and v != MASK:
                remember_secret(v)
            else:
                _remember_secrets(v)
    elif isinstance(obj, list):
        for v in obj:
            _remember_secrets(v)


def safe(obj: Any) -> Any:
    """``obj`` as JSON values with every secret masked (by key, and every remembered secret value)."""
    return redact(jsonable(obj))


class _Table:
    """A run's per-sample table, paged (``store.paging``): a page reads the files that hold it; a filter is
    worked out a file at a time into the positions that match, kept for the next pages of the same filter."""

    def __init__(self, paged: PagedTable, metrics: list[str]) -> None:
        self.paged = paged
        self.metrics = metrics
        self._lock = threading.Lock()
        self._matches: OrderedDict[tuple, Any] = OrderedDict()

    def matching(self, search: str | None, status: str | None, metric: str | None, lo: float | None,
                 hi: float | None) -> Any:
        """Positions (an int64 array, in sample order) of the rows that pass the filters."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        key = (search, status, metric, lo, hi)
        with self._lock:
            if key in self._matches:
                self._matches.move_to_end(key)
                return self._matches[key]
        found = []
        metrics = ([metric] if metric else self.metrics) if status else ([metric] if metric else [])
        ranged = metric and (lo is not None or hi is not None)
        for k in range(len(self.paged.names)):
            start = int(self.paged.starts()[k])
            n = int(self.paged.starts()[k + 1]) - start
            keep = np.ones(n, bool)
            if search:
                t = self.paged.read_file(k, ("sample_id", "prompt", "raw_text", "text"))
                hit = np.zeros(n, bool)
                needle = search.lower()
                for name in t.column_names:
                    col = pc.utf8_lower(pc.cast(t.column(name), pa.string()))
                    hit |= np.asarray(pc.fill_null(pc.match_substring(col, needle), False))
                keep &= hit
            if (status or ranged) and keep.any():
                cells = metric_cells(self.paged, k, metrics)
                if status:
                    keep &= np.logical_or.reduce([np.asarray(pc.fill_null(pc.equal(cells[m][0], status), False))
                                                  for m in metrics]) if metrics else False
                if ranged:
                    v = cells[metric][1]
                    ok = ~np.isnan(v)
                    if lo is not None:
                        ok &= v >= lo
                    if hi is not None:
                        ok &= v <= hi
                    keep &= ok
            found.append(np.nonzero(keep)[0] + start)
        idx = np.concatenate(found) if found else np.empty(0, np.int64)
        with self._lock:
            self._matches[key] = idx
            while len(self._matches) > 8:
                self._matches.popitem(last=False)
        return idx


@dataclass
class _Run:
    store: str
    result: RunResult
    digest: str


class ResultsBrowser:
    def __init__(self, stores: list[str], *, db: Any = None, endpoint_url: str | None = None,
                 region: str | None = None) -> None:
        if not stores and db is None:
            raise ConfigError("view: give at least one --store (a directory or s3://bucket/prefix) or --db")
        for s in stores:
            if "://" not in s and not Path(s).is_dir():
                raise ConfigError(f"--store {s}: no such result store (a directory, or s3://bucket/prefix)")
        self.stores = [open_store(s, endpoint_url, region) for s in stores]
        self.db = db
        self._results: dict[tuple[str, str], _Run] = {}
        self._tables: OrderedDict[str, _Table] = OrderedDict()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reading
    def _read_run(self, store: Any, fp: str) -> _Run | None:
        rel = run_result(fp)
        try:
            data = store.read_bytes(rel)
        except (FileNotFoundError, OSError):
            return None
        digest = hashlib.sha256(data).hexdigest()
        key = (store.uri(), fp)
        cached = self._results.get(key)
        if cached is not None and cached.digest == digest:
            return cached
        try:
            result = RunResult.from_dict(json.loads(data), source=store.uri(rel))
        except (ConfigError, ValueError):
            return None  # a result.json being written, or not one: left out of the listing
        _remember_secrets(result.config)
        run = _Run(store.uri(), result, digest)
        self._results[key] = run
        return run

    @staticmethod
    def _unfinished(store: Any, fp: str, in_sweep: str | None) -> tuple[str | None, str]:
        """(name, state) of a run with no result: ``interrupted`` when its manifest says it stopped on a signal
        (``pipeline.plan.mark_interrupted``), else its state in its sweep's manifest when that says it stopped
        (failed, interrupted, skipped), else ``running``."""
        try:
            doc = json.loads(store.read_bytes(f"runs/{fp}/manifest.json"))
        except (FileNotFoundError, OSError, ValueError):
            doc = None
        name = doc.get("name") if isinstance(doc, dict) and isinstance(doc.get("name"), str) else None
        if isinstance(doc, dict) and doc.get("state") == "interrupted":
            return name, "interrupted"
        if in_sweep in ("failed", "interrupted", "skipped"):
            return name, in_sweep
        return name, "running"

    def _listing(self) -> list[tuple[Any, str]]:
        """``(store, fingerprint)`` of every run directory; a run whose result.json does not read is running."""
        return [(store, fp) for store in self.stores for fp in store.list_dirs("runs") if FINGERPRINT.match(fp)]

    def _sweep_docs(self) -> list[tuple[Any, str, dict]]:
        return [(store, sfp, doc) for store in self.stores for sfp, doc in sweep_docs(store)]

    def _find(self, ref: str) -> _Run:
        if not FINGERPRINT.match(ref or ""):
            raise NotFound(f"{ref!r} is not a run fingerprint")
        hits = [(fp, run) for fp, run in ((fp, self._read_run(s, fp)) for s, fp in self._listing()
                                          if fp.startswith(ref)) if run is not None]
        if not hits and self.db is not None:
            return self._find_in_db(ref)
        if not hits:
            raise NotFound(f"no finished run {ref} in the configured stores")
        if len({fp for fp, _ in hits}) > 1:
            raise NotFound(f"{ref} matches {len(hits)} runs; give more of the fingerprint")
        return hits[0][1]

    def _find_in_db(self, ref: str) -> _Run:
        row = self.db.get(ref)
        uri = row.get("result_uri")
        if not uri:
            raise NotFound(f"run {ref}: the ExperimentDB does not know where its result.json is")
        run_dir = uri.rsplit("/", 1)[0]
        fp = run_dir.rsplit("/", 1)[1]
        store = open_store(run_dir.rsplit("/", 2)[0])
        run = self._read_run(store, fp)
        if run is None:
            raise NotFound(f"run {ref}: {uri} is unreadable")
        return run

    def _table(self, run: _Run) -> _Table:
        with self._lock:
            cached = self._tables.get(run.digest)
            if cached is not None:
                self._tables.move_to_end(run.digest)
                return cached
        path = samples_location(run.result)
        store = table_store(run.result, path)
        paged = PagedTable(path if store is not None else path.removeprefix("file://"), store)
        if not paged.names:
            raise ConfigError(f"per-sample table {path} does not exist")
        table = _Table(paged, sorted(run.result.metrics))
        with self._lock:
            self._tables[run.digest] = table
            while len(self._tables) > TABLE_CACHE:
                self._tables.popitem(last=False)
        return table

    # ------------------------------------------------------------------ answers
    def runs(self, *, name: str | None = None, model: str | None = None, dataset: str | None = None,
             sweep: str | None = None, since: str | None = None, until: str | None = None,
             fingerprint: str | None = None, offset: int = 0, limit: int | None = None) -> dict[str, Any]:
        """The run history, newest first, with every filter applied (substrings; dates as ISO prefixes), runs
        of every state alike (complete, running, interrupted, failed); ``offset``/``limit`` page the matches.
        ``total`` counts every run, ``matched`` those the filters keep."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ConfigError(f"offset={offset}, limit={limit}: neither may be negative")
        member: dict[str, list[str]] = {}
        sweep_state: dict[str, str] = {}  # a run's state in its sweep's manifest (failed, interrupted, skipped...)
        sweep_name: dict[str, str] = {}  # and its name there (a run that stopped early may have written none)
        sweeps = []
        for _, sfp, doc in self._sweep_docs():
            sname = str(doc.get("name") or sfp)
            sweeps.append({"fingerprint": sfp, "name": sname, "runs": len(doc["runs"]),
                           "done": sum(1 for r in doc["runs"] if isinstance(r, dict) and r.get("state") == "complete")})
            for r in doc["runs"]:
                if isinstance(r, dict) and r.get("fingerprint"):
                    member.setdefault(str(r["fingerprint"]), []).append(sname)
                    if isinstance(r.get("state"), str):
                        sweep_state[str(r["fingerprint"])] = r["state"]
                    if isinstance(r.get("name"), str):
                        sweep_name[str(r["fingerprint"])] = r["name"]
        rows: dict[str, dict[str, Any]] = {}
        for store, fp in self._listing():
            run = self._read_run(store, fp)
            if run is None:  # its own names: the filters' (name, ...) stay what the caller asked
                run_name, state = self._unfinished(store, fp, sweep_state.get(fp))
                rows.setdefault(fp, {"fingerprint": fp, "name": run_name or sweep_name.get(fp), "state": state,
                                     "store": store.uri(),
                                     "sweeps": member.get(fp, []), "metrics": {}})
                continue
            r = run.result
            cfg = r.config or {}
            m = cfg.get("model") or {}
            d = cfg.get("dataset") or {}
            rows[fp] = {"fingerprint": fp, "name": r.name, "state": "complete", "store": store.uri(),
                        "model": m.get("path") or m.get("model") or m.get("type"), "backend": m.get("type"),
                        "dataset": d.get("path") or d.get("hub"), "created_at": r.created_at,
                        "samples": r.perf.samples, "errors": r.error_count, "sweeps": member.get(fp, []),
                        "metrics": {k: {"mean": s.mean, "ci_low": s.ci_low, "ci_high": s.ci_high, "n": s.n,
                                        "direction": s.direction} for k, s in sorted(r.metrics.items())}}
        if self.db is not None:
            for row in self.db.query():
                if row["fingerprint"] not in rows:
                    rows[row["fingerprint"]] = {
                        "fingerprint": row["fingerprint"], "name": row["name"], "state": row["status"],
                        "store": row.get("store_uri"), "model": row["model"], "backend": row["model_backend"],
                        "dataset": row["dataset"], "created_at": row["created_at"], "samples": row["n_samples"],
                        "errors": row["error_count"], "sweeps": member.get(row["fingerprint"], []),
                        "metrics": row["metrics"]}

        def keep(r: dict[str, Any]) -> bool:
            for key, want in (("name", name), ("model", model), ("dataset", dataset)):
                if want and want.lower() not in str(r.get(key) or "").lower():
                    return False
            if sweep and not any(sweep.lower() in s.lower() for s in r["sweeps"]) and not any(
                    s["fingerprint"].startswith(sweep) and s["name"] in r["sweeps"] for s in sweeps):
                return False
            if fingerprint and not r["fingerprint"].startswith(fingerprint.lower()):
                return False
            created = str(r.get("created_at") or "")
            if since and created[:len(since)] < since:
                return False
            return not (until and created[:len(until)] > until)

        found = sorted((r for r in rows.values() if keep(r)), key=lambda r: (str(r.get("created_at") or "~"),
                                                                               r["fingerprint"]), reverse=True)
        page = found[offset:] if limit is None else found[offset:offset + limit]
        return safe({"runs": page, "total": len(rows), "matched": len(found), "offset": offset, "limit": limit,
                     "sweeps": sweeps})

    def run(self, ref: str) -> dict[str, Any]:
        """One run: summary (intervals, status counts), configuration (redacted), performance, tokens, cost."""
        run = self._find(ref)
        r = run.result
        return safe({"fingerprint": r.fingerprint, "run_id": r.run_id, "name": r.name, "store": run.store,
                     "created_at": r.created_at, "package_version": r.package_version, "seed": r.seed,
                     "repeat": r.repeat, "generation_fingerprint": r.generation_fingerprint,
                     "dataset_fingerprint": r.dataset_fingerprint,
                     "metrics": {k: s.model_dump(mode="json") for k, s in sorted(r.metrics.items())},
                     "perf": r.perf.model_dump(mode="json"), "tokens": r.tokens.model_dump(mode="json"),
                     "errors": [e.model_dump(mode="json") for e in r.errors[:50]], "error_count": r.error_count,
                     "backend": r.backend, "config": redact(r.config or {})})

    def samples(self, ref: str, *, offset: int = 0, limit: int = 50, search: str | None = None,
                status: str | None = None, metric: str | None = None, score_min: float | None = None,
                score_max: float | None = None) -> dict[str, Any]:
        """A page of a run's per-sample table: rows ``offset`` to ``offset + limit`` of those matching the
        filters (``search`` in id, prompt and output; ``status`` of ``metric``, or of any metric; the score
        of ``metric`` within ``[score_min, score_max]``)."""
        if status and status not in STATUSES:
            raise ConfigError(f"status {status!r}: one of {', '.join(STATUSES)}")
        limit = max(1, min(int(limit), MAX_PAGE))
        offset = max(0, int(offset))
        run = self._find(ref)
        t = self._table(run)
        if metric and metric not in t.metrics:
            raise ConfigError(f"metric {metric!r}: this run has {', '.join(t.metrics) or 'no metric'}")
        total = t.paged.total
        if search or status or (metric and (score_min is not None or score_max is not None)):
            idx = t.matching(search, status, metric, score_min, score_max)
        else:
            idx = range(total)
        matched = len(idx)
        page = list(idx[offset:offset + limit])
        rows = t.paged.rows(page, COLUMNS) if page else []
        return safe({"fingerprint": run.result.fingerprint, "total": total, "matched": matched,
                     "offset": offset, "limit": limit, "metrics": t.metrics, "rows": [_row(x) for x in rows]})

    def diff(self, a: str, b: str) -> dict[str, Any]:
        """Baseline ``a`` against candidate ``b``: per-metric paired tests, and the samples newly right and
        newly wrong (binary metrics) with both runs' outputs side by side."""
        ra, rb = self._find(a), self._find(b)
        cmp = compare(ra.result, rb.result, n_resamples=RESAMPLES)
        out = cmp.to_dict()
        ta, tb = self._table(ra), self._table(rb)
        shown = [tuple(k) for mc in cmp.metrics.values() if mc.paired is not None and mc.paired.diff is not None
                 for keys in (mc.paired.diff.newly_right, mc.paired.diff.newly_wrong) for k in keys[:100]]
        pos_a, pos_b = ta.paged.positions_of(shown), tb.paged.positions_of(shown)
        changed: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for name, mc in cmp.metrics.items():
            d = mc.paired.diff if mc.paired is not None else None
            if d is None:
                continue
            changed[name] = {}
            for kind, keys in (("newly_right", d.newly_right), ("newly_wrong", d.newly_wrong)):
                pairs = []
                for key in keys[:100]:
                    ia, ib = pos_a.get(tuple(key)), pos_b.get(tuple(key))
                    pairs.append({"sample_id": key[0], "repeat": key[1],
                                  "baseline": _row(ta.paged.rows([ia], COLUMNS)[0]) if ia is not None else None,
                                  "candidate": _row(tb.paged.rows([ib], COLUMNS)[0]) if ib is not None else None})
                changed[name][kind] = pairs
                changed[name][kind + "_count"] = len(keys)  # type: ignore[assignment]
        out["samples"] = changed
        out["baseline_name"], out["candidate_name"] = ra.result.name, rb.result.name
        return safe(out)

    def _sweep(self, ref: str) -> tuple[str, dict, list[RunResult], list[dict]]:
        if not FINGERPRINT.match(ref or ""):
            raise NotFound(f"{ref!r} is not a sweep fingerprint")
        hits = [(s, sfp, doc) for s, sfp, doc in self._sweep_docs() if sfp.startswith(ref)]
        if len(hits) != 1:
            raise NotFound(f"no sweep {ref} in the configured stores" if not hits
                           else f"{ref} matches {len(hits)} sweeps; give more of the fingerprint")
        store, sfp, doc = hits[0]
        results, cells = [], []
        for entry in doc["runs"]:
            fp = str(entry.get("fingerprint") or "") if isinstance(entry, dict) else ""
            run = self._read_run(store, fp) if FINGERPRINT.match(fp) else None
            cells.append({"name": entry.get("name"), "fingerprint": fp, "state": entry.get("state") if run is None
                          else "complete", "reason": entry.get("reason")})
            if run is not None:
                results.append(_redacted(run.result))
        return sfp, doc, results, cells

    def sweep(self, ref: str) -> dict[str, Any]:
        """A sweep's cells and, once a run has finished, its leaderboard (intervals, winners, paired tests, cost),
        the primary metric first, and the decision (``compare.decision``) when the sweep ran with a rule."""
        sfp, doc, results, cells = self._sweep(ref)
        rule = doc.get("decision") if isinstance(doc.get("decision"), dict) else None
        metrics = None
        if rule and results:
            have = list(dict.fromkeys(m for r in results for m in r.metrics))
            if rule.get("metric") in have:
                metrics = [rule["metric"]] + [m for m in have if m != rule["metric"]]
        board = leaderboard(results, n_resamples=RESAMPLES, metrics=metrics).to_dict() if results else None
        decision = None
        if rule and results:
            try:
                decision = decide(results, rule, n_resamples=RESAMPLES, failed_cells=doc.get("cells")).to_dict()
            except ConfigError as exc:  # a rule the runs cannot answer (its baseline missing): said, not a 500
                decision = {"headline": f"decision: none: {exc}", "candidates": [], "ok": False}
        return safe({"fingerprint": sfp, "name": doc.get("name") or sfp, "cells": cells, "leaderboard": board,
                     "decision": decision})

    def sweep_report(self, ref: str) -> str:
        """The sweep's HTML report (the one ``auditkit-ray report --format html`` writes), over redacted runs."""
        sfp, doc, results, _ = self._sweep(ref)
        if not results:
            raise NotFound(f"sweep {sfp[:12]} has no finished run yet")
        rule = doc.get("decision") if isinstance(doc.get("decision"), dict) else None
        report = build_report(results, title=str(doc.get("name") or sfp), n_resamples=RESAMPLES,
                              decision=rule or False)
        return scrub_text(render(report, "html"))


def _redacted(result: RunResult) -> RunResult:
    return result.model_copy(update={"config": redact(result.config or {})})


def _loads(text: Any, default: Any) -> Any:
    if not isinstance(text, str):
        return default if text is None else text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _row(x: dict[str, Any]) -> dict[str, Any]:
    """A per-sample row for display: raw output, extracted answer (annotations), every score with its reason."""
    return {"sample_id": x.get("sample_id"), "repeat": x.get("repeat") or 0, "prompt": x.get("prompt"),
            "target": _loads(x.get("target"), None), "raw_text": x.get("raw_text"), "text": x.get("text"),
            "extracted": _loads(x.get("annotations"), {}), "error": x.get("error"), "latency_s": x.get("latency_s"),
            "scores": [{"name": s.get("name"), "status": s.get("status"), "value": s.get("value"),
                        "reason": s.get("reason")} for s in _loads(x.get("scores"), []) or []]}
