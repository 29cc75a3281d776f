"""``view``: a local, read-only web app over stored results (``auditkit-ray view --store DIR|s3://... [--db PATH]
[--host H] [--port N] [--token T]``); needs the ``view`` extra."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import EXIT_OK, ConfigError


def cmd_view(args: argparse.Namespace) -> int:
    try:
        from ..viewer import serve  # aiohttp loads only for this command
    except ImportError as exc:
        raise ConfigError(f"view needs aiohttp ({exc.name} is missing): pip install 'auditkit-ray[view]'") from None
    stores = args.store or ([] if args.db else ["results"])
    serve(stores, db=args.db, host=args.host, port=args.port, token=args.token, endpoint_url=args.endpoint_url,
          region=args.region, log_requests=args.log_requests)
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    p = sub.add_parser("view", help="a local read-only web app over the run history, runs, diffs and sweeps")
    p.add_argument("--store", action="append", metavar="URI",
                   help="a result store: a directory or s3://bucket/prefix (repeatable; default: results)")
    p.add_argument("--db", metavar="PATH", help="also list the runs of this ExperimentDB")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs the token printed at start)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--token", help="the token every request must carry (default: random when --host is not local)")
    p.add_argument("--endpoint-url", help="S3 endpoint of s3:// stores (default: $AWS_ENDPOINT_URL)")
    p.add_argument("--region", help="S3 region of s3:// stores")
    p.add_argument("--log-requests", action="store_true", help="log each request with its serve time to stderr")
    p.set_defaults(handler=cmd_view)
