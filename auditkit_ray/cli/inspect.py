"""``inspect``: read-only inspection of an agent trace (turns, tool calls, eligible metrics, oracle needs).

No model is called and nothing is written."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import api
from ..errors import EXIT_OK
from .output import emit


def cmd_inspect(args: argparse.Namespace) -> int:
    """``auditkit-ray inspect TRACE_FILE [--dataset FILE] [--episode ID] [--metric NAME] [--json]``."""
    report = api.inspect_trace(args.trace, dataset=args.dataset, episode=args.episode, metrics=args.metric or None)
    emit(json.dumps(report, indent=2, ensure_ascii=False, default=str) if args.json else api.format_inspection(report))
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    p = sub.add_parser("inspect", help="inspect an agent trace: turns, tool calls, eligible metrics (read-only)")
    p.add_argument("trace", metavar="TRACE_FILE", help="a JSONL agent trace (docs/agents.md: trace format)")
    p.add_argument("--dataset", help="the tool-calling samples the episodes answer (JSONL, matched by id): "
                   "references, tools, expected state")
    p.add_argument("--episode", help="only this episode")
    p.add_argument("--metric", action="append", default=[], help="only these metrics (repeatable)")
    p.add_argument("--json", action="store_true", help="the inspection as JSON")
    p.set_defaults(handler=cmd_inspect)
