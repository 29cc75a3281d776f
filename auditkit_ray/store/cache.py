"""The caches a run reuses, measured and cleared (``auditkit-ray cache stats|clear``).

Two caches:

* the **generation cache** of a result store: ``generations/<generation
  fingerprint>/s<shard size>/shard-*.parquet``, the outputs a run with the
  same generation fingerprint reads instead of generating again. An entry is
  one generation fingerprint (all its shard sizes).
* the **response cache** of the ``api`` backend, which judges and
  model-based annotators share: one SQLite file (``responses`` table, key ->
  JSON, ``created``), ``$AUDITKIT_RAY_API_CACHE`` or
  ``~/.cache/auditkit-ray/api-cache.sqlite`` by default.

The hit rates of recent runs come from their stored results: a run's
generation hits are its samples it did not generate (``perf.samples -
perf.generated``: outputs read from the generation cache or from shards an
earlier attempt finished), its response-cache hits the outputs its API
backend served from the cache (``perf.cached``). A judge's requests go
through the same response cache; they are not counted per run.

Clearing removes generation entries (all, those whose generation
fingerprint or run fingerprint starts with a prefix, or those not written
for a given age) and response-cache rows (all, or older than the age). Run
results (``runs/``) are never removed: a run whose generations were cleared
is still there to read and compare, and running it again generates anew.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.backends import settings_class
from ..errors import ConfigError
from .interface import ResultStore

GENERATIONS = "generations"
RUNS = "runs"

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"2w"`` as seconds; ConfigError otherwise."""
    m = _AGE.match(str(text))
    if not m:
        raise ConfigError(f"--older-than {text!r}: write a number and a unit, such as 7d, 12h, 30m, 90s or 2w")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def response_cache_path(path: str | os.PathLike | None = None) -> Path:
    """The response cache's file: ``path``, else the api backend's default."""
    if path:
        return Path(path).expanduser()
    from ..backends.api import default_cache_path

    return default_cache_path()


@dataclass
class GenerationEntry:
    fingerprint: str
    files: int
    bytes: int
    oldest: float
    newest: float
    #: the runs of the store that read this entry (their fingerprints)
    runs: list[str] = field(default_factory=list)


def _entries(store: ResultStore) -> tuple[dict[str, GenerationEntry], dict[str, list[str]]]:
    entries: dict[str, GenerationEntry] = {}
    files: dict[str, list[str]] = {}
    for rel, size, mtime in store.walk(GENERATIONS):
        parts = rel.split("/")
        if len(parts) < 3:
            continue
        fp = parts[1]
        e = entries.get(fp)
        if e is None:
            e = entries[fp] = GenerationEntry(fp, 0, 0, mtime, mtime)
            files[fp] = []
        e.files += 1
        e.bytes += size
        e.oldest, e.newest = min(e.oldest, mtime), max(e.newest, mtime)
        files[fp].append(rel)
    return entries, files


def _runs(store: ResultStore) -> list[dict[str, Any]]:
    """The store's finished runs, newest first: what their results say about cache use."""
    out = []
    for fp in store.list_dirs(RUNS):
        try:
            r = json.loads(store.read_bytes(f"{RUNS}/{fp}/result.json"))
        except (FileNotFoundError, ValueError):
            continue  # unfinished, or not a run
        perf = r.get("perf") or {}
        samples, generated = int(perf.get("samples") or 0), int(perf.get("generated") or 0)
        backend = (r.get("backend") or {}).get("backend") or ((r.get("config") or {}).get("model") or {}).get("type")
        settings = settings_class(backend) if isinstance(backend, str) else None
        replays = bool(settings and settings.replays_generations())
        out.append({
            "fingerprint": r.get("fingerprint") or fp, "name": r.get("name"), "created_at": r.get("created_at"),
            "generation_fingerprint": r.get("generation_fingerprint"), "backend": backend, "samples": samples,
            "generated": generated,
            # a precomputed run reads stored outputs by design: not the generation cache
            "replays": replays,
            "generation_hits": max(0, samples - generated) if not replays else 0,
            "caches_responses": bool(settings and settings.caches_responses()),
            "response_hits": int(perf.get("cached") or 0),
        })
    out.sort(key=lambda r: r["created_at"] or "", reverse=True)
    return out


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None


def response_cache_stats(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Entries, bytes and age of the response cache (``exists`` False when there is none yet)."""
    p = response_cache_path(path)
    if not p.is_file():
        return {"path": str(p), "exists": False, "entries": 0, "bytes": 0, "oldest": None, "newest": None}
    con = _connect(p)
    try:
        n, size, lo, hi = con.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(key) + LENGTH(value)), 0), MIN(created), MAX(created) "
            "FROM responses").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{p}: not a response cache ({exc})") from None
    finally:
        con.close()
    disk = sum(q.stat().st_size for q in (p, p.with_name(p.name + "-wal")) if q.is_file())
    return {"path": str(p), "exists": True, "entries": int(n), "bytes": disk, "data_bytes": int(size),
            "oldest": lo, "newest": hi}


def _connect(p: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(str(p), timeout=60, isolation_level=None)
    except sqlite3.Error as exc:
        raise ConfigError(f"{p}: cannot open the response cache ({exc})") from None


def cache_stats(store: ResultStore, *, response_cache: str | os.PathLike | None = None,
                recent: int = 10, now: float | None = None) -> dict[str, Any]:
    """The generation cache of ``store`` (entries, bytes, age), the response cache, and the cache hits of the
    store's ``recent`` newest runs with their hit rates."""
    now = time.time() if now is None else now
    entries, _ = _entries(store)
    runs = _runs(store)
    for r in runs:
        e = entries.get(r["generation_fingerprint"] or "")
        if e is not None:
            e.runs.append(r["fingerprint"])
    shown = runs[:recent]
    for r in shown:
        r["generation_hit_rate"] = _rate(r["generation_hits"], r["samples"])
        r["response_hit_rate"] = _rate(r["response_hits"], r["samples"]) if r["caches_responses"] else None
    gen_total = sum(r["samples"] for r in shown if not r["replays"])
    api_runs = [r for r in shown if r["caches_responses"]]
    ents = sorted(entries.values(), key=lambda e: e.newest, reverse=True)
    return {
        "store": store.uri(),
        "generations": {
            "entries": len(ents), "files": sum(e.files for e in ents), "bytes": sum(e.bytes for e in ents),
            "oldest_age_s": now - min(e.oldest for e in ents) if ents else None,
            "newest_age_s": now - max(e.newest for e in ents) if ents else None,
            "hit_rate": _rate(sum(r["generation_hits"] for r in shown), gen_total),
            "list": [asdict(e) | {"age_s": now - e.newest} for e in ents],
        },
        "responses": response_cache_stats(response_cache) | {
            "hit_rate": _rate(sum(r["response_hits"] for r in api_runs), sum(r["samples"] for r in api_runs))},
        "recent_runs": shown,
    }


def cache_clear(store: ResultStore | None, *, everything: bool = False, fingerprint: str | None = None,
                older_than: str | float | None = None, generations: bool = True, responses: bool = True,
                response_cache: str | os.PathLike | None = None, now: float | None = None) -> dict[str, Any]:
    """Remove cache entries: every one (``everything``), the generation entries of a fingerprint prefix
    (a generation fingerprint, or a run's, whose generation entry goes), or those not written for
    ``older_than`` (``"7d"`` or seconds). The response cache has no fingerprints: a ``fingerprint`` clear
    leaves it alone. Returns what was removed."""
    chosen = sum(bool(x) for x in (everything, fingerprint, older_than is not None))
    if chosen != 1:
        raise ConfigError("cache clear: give exactly one of --all, --fingerprint PREFIX or --older-than AGE")
    if fingerprint is not None and not re.fullmatch(r"[0-9a-fA-F]{4,}", fingerprint):
        raise ConfigError(f"--fingerprint {fingerprint!r}: give at least 4 hex digits of a fingerprint")
    now = time.time() if now is None else now
    age = (parse_age(older_than) if isinstance(older_than, str) else float(older_than)) \
        if older_than is not None else None
    out: dict[str, Any] = {"store": store.uri() if store is not None else None, "generations": [], "files": 0,
                           "bytes": 0, "responses": 0}
    if generations and store is not None:
        entries, files = _entries(store)
        if fingerprint is not None:
            fp = fingerprint.lower()
            wanted = {g for g in entries if g.startswith(fp)}
            wanted |= {r["generation_fingerprint"] for r in _runs(store)
                       if r["fingerprint"].startswith(fp) and r["generation_fingerprint"] in entries}
            if not wanted:
                raise ConfigError(f"--fingerprint {fingerprint}: no generation entry or run with that fingerprint "
                                  f"in {store.uri()}")
        elif age is not None:
            wanted = {g for g, e in entries.items() if now - e.newest > age}
        else:
            wanted = set(entries)
        for g in sorted(wanted):
            out["files"] += store.delete(files[g])
            out["bytes"] += entries[g].bytes
            out["generations"].append(g)
    if responses and fingerprint is None:
        p = response_cache_path(response_cache)
        if p.is_file():
            con = _connect(p)
            try:
                if age is not None:
                    cur = con.execute("DELETE FROM responses WHERE created < ?", (now - age,))
                else:
                    cur = con.execute("DELETE FROM responses")
                out["responses"] = cur.rowcount
            except sqlite3.DatabaseError as exc:
                raise ConfigError(f"{p}: not a response cache ({exc})") from None
            finally:
                con.close()
    return out
