"""``cache stats|clear``: the generation cache of a result store and the API/judge response cache."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import api
from ..errors import EXIT_OK, ConfigError
from .output import emit


def _size(n: int | None) -> str:
    v = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} GiB"


def _age(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.1f}{unit}"
    return f"{max(s, 0):.0f}s"


def _pct(r: float | None) -> str:
    return "-" if r is None else f"{r:.0%}"


def _stats_text(st: dict[str, Any]) -> str:
    g, r = st["generations"], st["responses"]
    lines = [f"generation cache ({st['store']}): {g['entries']} entries, {g['files']} shards, {_size(g['bytes'])}, "
             f"newest {_age(g['newest_age_s'])} old, oldest {_age(g['oldest_age_s'])} old; "
             f"hit rate of recent runs {_pct(g['hit_rate'])}"]
    for e in g["list"]:
        lines.append(f"  {e['fingerprint'][:16]}  {e['files']} shards  {_size(e['bytes'])}  {_age(e['age_s'])} old  "
                     f"runs {', '.join(x[:12] for x in e['runs']) or '-'}")
    if r["exists"]:
        lines.append(f"response cache ({r['path']}): {r['entries']} entries, {_size(r['bytes'])}; "
                     f"hit rate of recent api runs {_pct(r['hit_rate'])}")
    else:
        lines.append(f"response cache ({r['path']}): none yet")
    lines.append(f"recent runs ({len(st['recent_runs'])}):")
    for run in st["recent_runs"]:
        resp = f"  responses {run['response_hits']}/{run['samples']}" if run["caches_responses"] else ""
        lines.append(f"  {run['fingerprint'][:12]}  {run['created_at'] or '-':<25}  {run['name'] or '-'}  "
                     f"generations {run['generation_hits']}/{run['samples']} from cache"
                     f" ({_pct(run['generation_hit_rate'])}){resp}")
    return "\n".join(lines)


def cmd_cache(args: argparse.Namespace) -> int:
    """``auditkit-ray cache stats|clear``."""
    where = {"endpoint_url": args.endpoint_url, "region": args.region, "response_cache": args.response_cache}
    if args.recent < 1:
        raise ConfigError("--recent must be at least 1")
    if args.action == "stats":
        st = api.cache_stats(args.store, recent=args.recent, **where)
        emit(json.dumps(st, indent=2, default=str) if args.json else _stats_text(st))
        return EXIT_OK
    store = None if args.only == "responses" else args.store  # the response cache is not in a store
    out = api.cache_clear(store, everything=args.all, fingerprint=args.fingerprint, older_than=args.older_than,
                          generations=args.only in (None, "generations"), responses=args.only in (None, "responses"),
                          **where)
    if args.json:
        emit(json.dumps(out, indent=2))
    else:
        print(f"removed {len(out['generations'])} generation entries ({out['files']} shards, {_size(out['bytes'])}) "
              f"from {out['store'] or 'no store'} and {out['responses']} cached responses")
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``: ``cache stats`` and ``cache clear``,
    each with its own options (``cache clear --help`` lists clear's)."""
    import argparse as _argparse

    where = _argparse.ArgumentParser(add_help=False)
    where.add_argument("--store", default="results", help="result store (local directory or s3://bucket/prefix)")
    where.add_argument("--endpoint-url", help="S3 endpoint (default: $AWS_ENDPOINT_URL)")
    where.add_argument("--region", help="S3 region")
    where.add_argument("--response-cache", metavar="FILE",
                       help="the API/judge response cache (default: $AUDITKIT_RAY_API_CACHE or "
                       "~/.cache/auditkit-ray/api-cache.sqlite)")
    where.add_argument("--json", action="store_true", help="print JSON")
    c = sub.add_parser("cache", help="generation and response caches: stats, clear",
                       description="The generation cache (in the result store) and the API/judge response cache.")
    actions = c.add_subparsers(dest="action", required=True, metavar="{stats,clear}", parser_class=type(c))
    st = actions.add_parser("stats", parents=[where], help="sizes, entries and hit rates of both caches",
                            description="Sizes, entries and hit rates of the generation and response caches.")
    st.add_argument("--recent", type=int, default=10, help="how many of the newest runs to show (10)")
    st.set_defaults(handler=cmd_cache)
    cl = actions.add_parser("clear", parents=[where], help="remove cache entries (say which)",
                            description="Remove cache entries: all of them, a run's, or those older than an age.")
    cl.add_argument("--all", action="store_true", help="every entry")
    cl.add_argument("--fingerprint", metavar="PREFIX",
                    help="the generation entries of this generation or run fingerprint prefix")
    cl.add_argument("--older-than", metavar="AGE", help="entries not written for AGE (7d, 12h, 30m, 2w)")
    cl.add_argument("--only", choices=["generations", "responses"], help="only this cache")
    cl.set_defaults(handler=cmd_cache, recent=10)
