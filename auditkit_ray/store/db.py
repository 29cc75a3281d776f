"""ExperimentDB: a SQLite index of runs, rebuildable from result stores.

The result store stays the source of truth; this index answers "which runs
of model X on dataset Y scored above Z since Monday" without reading every
result file. ``sync`` rebuilds it from a store, so it is never the only copy.
Default location: ``$AUDITKIT_RAY_DB`` or ``~/.auditkit-ray/experiments.sqlite``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from ..core.result import RunResult
from ..errors import ConfigError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  fingerprint TEXT PRIMARY KEY,
  run_id TEXT, name TEXT, experiment TEXT, status TEXT,
  model_backend TEXT, model TEXT, dataset TEXT, dataset_fingerprint TEXT,
  generation_fingerprint TEXT, created_at TEXT, result_uri TEXT, store_uri TEXT,
  package_version TEXT, n_samples INTEGER, error_count INTEGER, config TEXT
);
CREATE TABLE IF NOT EXISTS metrics (
  fingerprint TEXT, metric TEXT, direction TEXT, mean REAL, n INTEGER,
  ci_low REAL, ci_high REAL, aggregation TEXT,
  PRIMARY KEY (fingerprint, metric)
);
CREATE TABLE IF NOT EXISTS tags (fingerprint TEXT, key TEXT, value TEXT, PRIMARY KEY (fingerprint, key));
CREATE INDEX IF NOT EXISTS runs_model ON runs(model);
CREATE INDEX IF NOT EXISTS runs_dataset ON runs(dataset);
"""

_COND = re.compile(r"^\s*([\w.@:/-]+)\s*(>=|<=|>|<|==|=)\s*(-?[\d.eE+-]+)\s*$")


def default_path() -> Path:
    return Path(os.environ.get("AUDITKIT_RAY_DB") or Path.home() / ".auditkit-ray" / "experiments.sqlite")


class ExperimentDB:
    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as con:
            con.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=30)
        con.row_factory = sqlite3.Row
        return con

    # ------------------------------------------------------------------ write
    def record(self, result: RunResult, result_uri: str | None = None, store_uri: str | None = None,
               status: str = "complete") -> None:
        cfg = result.config or {}
        model = cfg.get("model") or {}
        dataset = cfg.get("dataset") or {}
        exp = (result.metadata.get("experiment") or {}) if isinstance(result.metadata, dict) else {}
        row = (
            result.fingerprint, result.run_id, result.name, exp.get("name"), status,
            model.get("type"), model.get("path") or model.get("model") or model.get("type"),
            dataset.get("path") or dataset.get("hub"), result.dataset_fingerprint, result.generation_fingerprint,
            result.created_at,
            result_uri, store_uri, result.package_version, result.perf.samples, result.error_count,
            json.dumps(cfg, sort_keys=True),
        )
        with closing(self._connect()) as con, con:
            con.execute("DELETE FROM metrics WHERE fingerprint = ?", (result.fingerprint,))
            con.execute("DELETE FROM tags WHERE fingerprint = ?", (result.fingerprint,))
            con.execute(f"INSERT OR REPLACE INTO runs VALUES ({','.join('?' * len(row))})", row)
            con.executemany(
                "INSERT INTO metrics VALUES (?,?,?,?,?,?,?,?)",
                [(result.fingerprint, m.name, m.direction.value, m.mean, m.n, m.ci_low, m.ci_high, m.aggregation)
                 for m in result.metrics.values()],
            )
            con.executemany("INSERT INTO tags VALUES (?,?,?)",
                            [(result.fingerprint, k, str(v)) for k, v in (exp.get("tags") or {}).items()])

    def record_failed(self, fingerprint: str, name: str, reason: str, config: dict[str, Any] | None = None,
                      store_uri: str | None = None) -> None:
        """A run that failed (a sweep cell that could not finish it): status ``failed``, the one-line reason in
        the tag ``auditkit.failure``. A run that completes later replaces the row (``record``)."""
        import time

        cfg = config or {}
        model = cfg.get("model") or {}
        dataset = cfg.get("dataset") or {}
        row = (fingerprint, None, name, None, "failed", model.get("type"),
               model.get("path") or model.get("model") or model.get("type"), dataset.get("path"), None, None,
               time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), None, store_uri, None, 0, 0,
               json.dumps(cfg, sort_keys=True))
        with closing(self._connect()) as con, con:
            con.execute("DELETE FROM metrics WHERE fingerprint = ?", (fingerprint,))
            con.execute("DELETE FROM tags WHERE fingerprint = ?", (fingerprint,))
            con.execute(f"INSERT OR REPLACE INTO runs VALUES ({','.join('?' * len(row))})", row)
            con.execute("INSERT INTO tags VALUES (?,?,?)", (fingerprint, "auditkit.failure", reason))

    def sync(self, store: Any) -> int:
        """Index every run found in a result store; returns how many."""
        n = 0
        for fp in store.list_dirs("runs"):
            rel = f"runs/{fp}/result.json"
            if not store.exists(rel):
                continue  # a run that never finished
            result = RunResult.from_dict(json.loads(store.read_bytes(rel)), source=store.uri(rel))
            self.record(result, result_uri=store.uri(rel), store_uri=store.uri())
            n += 1
        return n

    # ------------------------------------------------------------------ read
    def query(
        self, *, model: str | None = None, dataset: str | None = None, name: str | None = None,
        experiment: str | None = None, tags: dict[str, str] | None = None, metrics: list[str] | None = None,
        since: str | None = None, until: str | None = None,
    ) -> list[dict[str, Any]]:
        """Runs matching every filter; ``metrics`` are conditions like
        ``exact_match>=0.5``; ``model``/``dataset``/``name`` match substrings."""
        where, args = [], []
        for col, val in (("model", model), ("dataset", dataset), ("name", name)):
            if val:
                where.append(f"r.{col} LIKE ?")
                args.append(f"%{val}%")
        if experiment:
            where.append("r.experiment = ?")
            args.append(experiment)
        if since:
            where.append("r.created_at >= ?")
            args.append(since)
        if until:
            where.append("r.created_at < ?")
            args.append(until)
        for k, v in (tags or {}).items():
            where.append(
                "EXISTS (SELECT 1 FROM tags t WHERE t.fingerprint = r.fingerprint AND t.key = ? AND t.value = ?)")
            args += [k, v]
        known: set[str] | None = None
        for cond in metrics or []:
            m = _COND.match(cond)
            if not m:
                raise ConfigError(f"metric filter {cond!r}: write METRIC>VALUE (>, >=, <, <=, =)")
            if known is None:
                with closing(self._connect()) as con:
                    known = {r[0] for r in con.execute("SELECT DISTINCT metric FROM metrics")}
            if known and m.group(1) not in known:  # a typo would otherwise find "no runs"
                from ..core.suggest import did_you_mean

                raise ConfigError(f"metric filter {cond!r}: no run in {self.path} has a metric {m.group(1)!r}"
                                  f"{did_you_mean(m.group(1), known)}")
            op = "=" if m.group(2) == "==" else m.group(2)
            where.append("EXISTS (SELECT 1 FROM metrics x WHERE x.fingerprint = r.fingerprint AND x.metric = ? "
                         f"AND x.mean {op} ?)")
            args += [m.group(1), float(m.group(3))]
        sql = ("SELECT r.* FROM runs r" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY r.created_at, r.fingerprint")
        with closing(self._connect()) as con:
            rows = [dict(r) for r in con.execute(sql, args)]
            for r in rows:
                r["metrics"] = {m["metric"]: {"mean": m["mean"], "n": m["n"], "direction": m["direction"],
                                              "ci_low": m["ci_low"], "ci_high": m["ci_high"]}
                                for m in con.execute("SELECT * FROM metrics WHERE fingerprint = ? ORDER BY metric",
                                                     (r["fingerprint"],))}
                r["tags"] = {t["key"]: t["value"] for t in con.execute("SELECT * FROM tags WHERE fingerprint = ?",
                                                                       (r["fingerprint"],))}
                r.pop("config", None)
        return rows

    def matches(self, ref: str) -> list[dict[str, Any]]:
        """The runs ``ref`` names, each row with ``exact``: its whole fingerprint, run id or name is ``ref``
        (True), or its fingerprint starts with ``ref`` (False); exact ones first, then by date."""
        with closing(self._connect()) as con:
            rows = [dict(r) for r in con.execute(
                "SELECT * FROM runs WHERE substr(fingerprint, 1, ?) = ? OR run_id = ? OR name = ?",
                (len(ref), ref, ref, ref))]
        for r in rows:
            r["exact"] = ref in (r["fingerprint"], r["run_id"], r["name"])
        return sorted(rows, key=lambda r: (not r["exact"], r["created_at"] or "", r["fingerprint"]))

    def stores(self) -> list[str]:
        """Every result store the index has a run of (as its runs recorded it), in order."""
        with closing(self._connect()) as con:
            return sorted(r[0] for r in con.execute("SELECT DISTINCT store_uri FROM runs WHERE store_uri IS NOT NULL"))

    def get(self, prefix: str) -> dict[str, Any]:
        rows = self.matches(prefix)
        if any(r["exact"] for r in rows):
            rows = [r for r in rows if r["exact"]]
        if not rows:
            raise ConfigError(f"no run matches {prefix!r} in {self.path}")
        if len(rows) > 1:
            listed = "; ".join(f"{r['fingerprint'][:12]} {r['name']} ({r['created_at']})" for r in rows[:8])
            raise ConfigError(f"{prefix!r} matches {len(rows)} runs in {self.path}: {listed}"
                              f"{'; ...' if len(rows) > 8 else ''}; give more of the fingerprint")
        full = self.query()
        found = next(r for r in full if r["fingerprint"] == rows[0]["fingerprint"])
        return found | {"config": json.loads(rows[0]["config"] or "{}")}
