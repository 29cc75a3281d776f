"""``list``: every registered backend, metric, annotator, judge and oracle, with its direction, required
fields and the pip extra it needs (``auditkit-ray list [KIND] [--json]``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import api
from ..errors import EXIT_OK, ConfigError
from .output import emit


def _text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "nothing registered"
    lines: list[str] = []
    kind = None
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        if r["kind"] != kind:
            kind = r["kind"]
            lines += ([""] if lines else []) + [f"{kind}s:"]
        direction = {"maximize": "↑", "minimize": "↓"}.get(r["direction"] or "", " ")
        req = f"  requires {', '.join(r['requires'])}" if r["requires"] else ""
        extra = f"  [{r['extra']}]" if r["extra"] else ""
        lines.append(f"  {r['name']:<{width}}  {direction}  {r['description']}{req}{extra}")
    lines.append("")
    lines.append("↑ higher is better, ↓ lower is better; [extra]: pip install 'auditkit-ray[extra]'")
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    """``auditkit-ray list [KIND] [--kind KIND] [--json]``."""
    if args.what and args.kind and args.what.rstrip("s") != args.kind.rstrip("s"):
        raise ConfigError(f"list {args.what} --kind {args.kind}: give the kind once")
    rows = api.catalogue(args.kind or args.what)
    emit(json.dumps(rows, indent=2) if args.json else _text(rows))
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    kinds = ", ".join(api.catalogue_kinds())
    p = sub.add_parser("list", help="every registered backend, metric, annotator, judge and oracle")
    p.add_argument("what", nargs="?", metavar="KIND", help=f"only this kind ({kinds}; plural too: 'list metrics')")
    p.add_argument("--kind", help="only this kind (as KIND)")
    p.add_argument("--json", action="store_true", help="the catalogue as a JSON list")
    p.set_defaults(handler=cmd_list)
