"""``lmeval``: lm-evaluation-harness tasks as auditkit-ray runs.

Runs the tasks (``api.lmeval``) and prints one result per task (or their
JSON). Without the ``lmeval`` extra it prints one line naming the
``pip install`` (exit 2). What lm-eval, transformers and Ray write on stderr
while the tasks run (progress bars, log lines, warnings) goes to the
command's log file, named in one line at the end; only our own lines reach
the terminal (``--verbose`` shows theirs).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import api
from ..errors import EXIT_OK
from .noise import library_output_to_log, log_path
from .output import emit, print_run


def _seed(value: str | None) -> Any:
    if value is None:
        return None
    parts = [int(p) for p in str(value).split(",")]
    return parts[0] if len(parts) == 1 else tuple(parts)


def cmd_lmeval(args: argparse.Namespace) -> int:
    """``auditkit-ray lmeval``: lm-eval tasks as stored runs, one result per task."""
    with library_output_to_log():
        results = api.lmeval(
            args.tasks, args.model, engine=args.engine, include_path=args.include_path,
            num_fewshot=args.num_fewshot, limit=args.limit, seed=_seed(args.seed), batch_size=args.batch_size,
            device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code, store=args.store,
            bootstrap_iters=args.bootstrap_iters, index=not args.no_index, address=args.address,
            shard_size=args.shard_size, generation_actors=args.generation_actors, data_dir=args.data_dir,
            progress=not args.quiet,
        )
    if log_path() and not args.quiet:
        print(f"(lm-eval's own output: {log_path()})", file=sys.stderr)
    if args.json:
        emit(json.dumps([json.loads(r.to_json()) for r in results], indent=2))
        return EXIT_OK
    if args.quiet:
        return EXIT_OK
    for r in results:
        print_run(r)
    return EXIT_OK


def _limit(value: str) -> int | float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return int(v) if v >= 1 else v


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    p = sub.add_parser(
        "lmeval", help="run lm-evaluation-harness tasks (directly, or sharded on the Ray pipeline) into the result "
                       "store",
        description="Evaluate a local HF checkpoint on lm-eval tasks. Each task becomes a RunResult in the result "
                    "store (per-sample table included), so `compare` and `leaderboard` work on it. Needs the lmeval "
                    "extra: pip install 'auditkit-ray[lmeval]'.")
    p.add_argument("--tasks", required=True, help="comma-separated lm-eval task names (the tasks in "
                                                  "auditkit_ray/lmeval/tasks are always found)")
    p.add_argument("--model", required=True, help="local HF-format checkpoint directory")
    p.add_argument("--engine", choices=["lm_eval", "pipeline"], default="lm_eval",
                   help="lm_eval: lm_eval.simple_evaluate in this process (default); pipeline: the task's requests "
                        "sharded over the Ray generation actors, scored by lm-eval's own metric functions")
    p.add_argument("--include-path", action="append", default=[], metavar="DIR",
                   help="more task YAML folders (repeatable)")
    p.add_argument("--num-fewshot", type=int, default=None)
    p.add_argument("--limit", type=_limit, default=None, help="docs per task (a fraction below 1)")
    p.add_argument("--seed", default=None, help="one integer, or four comma-separated (python,numpy,torch,fewshot); "
                                                "default lm-eval's 0,1234,1234,1234")
    p.add_argument("--batch-size", type=int, default=None, help="default 1 (lm_eval) or 8 (pipeline)")
    p.add_argument("--device", default=None, help="default cpu (lm_eval) or auto (pipeline)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"])
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--store", default="results", help="result store root (default: results)")
    p.add_argument("--bootstrap-iters", type=int, default=100_000, help="lm-eval's stderr bootstrap (0: none)")
    p.add_argument("--no-index", action="store_true", help="do not record the runs in the ExperimentDB")
    p.add_argument("--address", default=None,
                   help="pipeline: Ray cluster address (default: RAY_ADDRESS, else a local Ray)")
    p.add_argument("--shard-size", type=int, default=64, help="pipeline: docs per shard")
    p.add_argument("--generation-actors", type=int, default=1, help="pipeline: generation actors (GPUs)")
    p.add_argument("--data-dir", default=None, help="pipeline: where task docs are written as JSONL "
                                                    "(default ~/.cache/auditkit-ray/lmeval)")
    p.add_argument("--quiet", action="store_true", help="no progress lines and no summary table")
    p.add_argument("--json", action="store_true", help="print the RunResults as JSON")
    p.set_defaults(handler=cmd_lmeval)
