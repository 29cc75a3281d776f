"""CLI commands for stored runs: ``runs`` (ExperimentDB), ``generate`` and
``rescore``. Registered by ``auditkit_ray.cli``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .cli_output import emit
from .errors import EXIT_OK, ConfigError


def _print_runs(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        emit(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        print("no runs")
        return
    for r in rows:
        metrics = "  ".join(f"{k}={v['mean']:.4f}" for k, v in r["metrics"].items() if v["mean"] is not None)
        print(f"{r['fingerprint'][:12]}  {r['created_at'] or '-':<25}  {r['name']:<30}  {r['model'] or '-'}  {r['dataset'] or '-'}  {metrics}")


def _tags(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs or []:
        if "=" not in p:
            raise ConfigError(f"--tag {p!r}: write KEY=VALUE")
        k, v = p.split("=", 1)
        out[k] = v
    return out


def cmd_runs(args: argparse.Namespace) -> int:
    from .store.base import open_store
    from .store.db import ExperimentDB

    db = ExperimentDB(args.db)
    if args.action == "sync":
        n = db.sync(open_store(args.store))
        print(f"indexed {n} runs from {args.store} into {db.path}")
        return EXIT_OK
    if args.action == "show":
        if not args.run:
            raise ConfigError("runs show: give a fingerprint prefix, run id or name")
        emit(json.dumps(db.get(args.run), indent=2, default=str))
        return EXIT_OK
    rows = db.query(model=args.model, dataset=args.dataset, name=args.name, experiment=args.experiment,
                    tags=_tags(args.tag), metrics=args.metric, since=args.since, until=args.until)
    _print_runs(rows, args.json)
    return EXIT_OK


def cmd_generate(args: argparse.Namespace) -> int:
    from .api import evaluate
    from .config import load_run_spec

    spec = load_run_spec(args.file)
    spec = spec.model_copy(update={"metrics": [], "annotators": []})
    if args.store:
        spec.store.path = args.store
    result = evaluate(spec, address=args.address, progress=not args.quiet)
    run_dir = Path(result.samples_path).parent if not result.samples_path.startswith("s3://") else result.samples_path.rsplit("/", 1)[0]
    print(f"stored {result.perf.samples} outputs of '{result.name}' (generation fingerprint {result.generation_fingerprint[:12]})")
    print(f"rescore them with: auditkit-ray rescore {run_dir} --metric exact_match")
    return EXIT_OK


def rescore_spec(run: str, metrics: list[str] | None, config: str | None) -> Any:
    """A run spec that re-scores a stored run's outputs (precomputed backend)."""
    from .config import load_run_spec, run_spec_from_dict
    from .core.result import load_run

    p = Path(run)
    run_dir = p.parent if p.name == "result.json" else p
    result = load_run(run_dir)
    data = dict(result.config)
    data["model"] = {"type": "precomputed", "path": str(run_dir)}
    data["name"] = f"{result.name}/rescored"
    if run_dir.parent.name == "runs":
        data.setdefault("store", {})["path"] = str(run_dir.parent.parent)
    if config:
        other = load_run_spec(config)
        data["metrics"] = [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in other.metrics]
        data["annotators"] = [a.model_dump(mode="json") for a in other.annotators]
    if metrics:
        data["metrics"] = [{"name": m} for m in metrics]
    if not data.get("metrics"):
        raise ConfigError("rescore: give --metric NAME (repeatable) or --config FILE with metrics")
    return run_spec_from_dict(data, f"<rescore {run_dir}>")


def cmd_rescore(args: argparse.Namespace) -> int:
    from .api import evaluate
    from .report.terminal import print_run

    result = evaluate(rescore_spec(args.run, args.metric, args.config), address=args.address, progress=not args.quiet)
    if args.json:
        emit(result.to_json())
    else:
        print_run(result)
    return EXIT_OK


def cmd_sweep(args: argparse.Namespace) -> int:
    from .config import load_sweep_spec
    from .config.loader import read_document
    from .pipeline.sweep import describe, plan_sweep, run_sweep

    sweep = load_sweep_spec(args.file)
    if args.store:
        sweep.base.setdefault("store", {})["path"] = args.store
    _, lines = read_document(args.file)
    if args.dry_run:
        sweep_fp, cells = plan_sweep(sweep, source=args.file, lines=lines)
        gpus = None
        if args.address:
            from .pipeline.driver import init_ray

            gpus = float(init_ray(args.address, None).cluster_resources().get("GPU", 0))
        print(describe(sweep.name, sweep_fp, cells, gpus))
        return EXIT_OK
    result = run_sweep(sweep, address=args.address, progress=not args.quiet, source=args.file)
    if args.json:
        emit(json.dumps({"name": result.name, "fingerprint": result.fingerprint, "manifest": result.manifest_uri,
                          "cells": result.cells, "runs": [json.loads(r.to_json()) for r in result.runs]}, indent=2))
        return EXIT_OK
    print(f"sweep {result.name}: {len(result.runs)} runs, manifest {result.manifest_uri}")
    from .compare import leaderboard

    if len(result.runs) > 1:
        print(leaderboard(result.runs).format())
    else:
        from .report.terminal import print_run

        for r in result.runs:
            print_run(r)
    if args.report:
        from .report.loader import build_report, expand_inputs
        from .report.render import render

        run_dirs = [str(Path(r.samples_path).parent) for r in result.runs if not r.samples_path.startswith("s3://")]
        report = build_report(expand_inputs(run_dirs), baseline=args.baseline, title=f"sweep {result.name}")
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(render(report, "html"), encoding="utf-8")
        print(f"HTML report: {Path(args.report).resolve()}")
    return EXIT_OK


def cmd_k8s(args: argparse.Namespace) -> int:
    from . import k8s

    docs = k8s.render(args.file, image=args.image, store=args.store, namespace=args.namespace, name=args.name,
                      gpus_per_worker=args.gpus, workers=args.workers, max_workers=args.max_workers,
                      gpu_type=args.gpu_type, aws_secret=args.aws_secret)
    if args.action == "render":
        text = k8s.dump(docs)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
            print(f"wrote {args.output}")
        else:
            print(text)
        return EXIT_OK
    name = k8s.submit(docs, kubeconfig=args.kubeconfig, context=args.context)
    print(f"created RayJob {name} in namespace {args.namespace}")
    return EXIT_OK


def add_parsers(sub: Any) -> dict[str, Any]:
    w = sub.add_parser("sweep", help="run every run of a sweep file on Ray (resumes finished shards)")
    w.add_argument("file")
    w.add_argument("--dry-run", action="store_true", help="print the plan (runs, GPUs, what is done) without running")
    w.add_argument("--address", default=None)
    w.add_argument("--store", default=None, help="result store root (overrides base.store.path)")
    w.add_argument("--quiet", action="store_true")
    w.add_argument("--json", action="store_true")
    w.add_argument("--report", default=None, metavar="FILE.html", help="also write the sweep's HTML report here")
    w.add_argument("--baseline", default=None, help="with --report: the baseline run (name, label or fingerprint prefix)")

    k = sub.add_parser("k8s", help="render or submit a KubeRay RayJob for a sweep")
    k.add_argument("action", choices=["render", "submit"])
    k.add_argument("file", help="sweep file")
    k.add_argument("--image", required=True, help="container image with auditkit-ray[ray,hf,s3] installed")
    k.add_argument("--store", required=True, help="s3://bucket/prefix result store (a retried job resumes from it)")
    k.add_argument("--namespace", default="default")
    k.add_argument("--name", default=None)
    k.add_argument("--gpus", type=int, default=1, help="GPUs per worker pod")
    k.add_argument("--workers", type=int, default=1)
    k.add_argument("--max-workers", type=int, default=None)
    k.add_argument("--gpu-type", default=None, help="node label nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3")
    k.add_argument("--aws-secret", default=None, help="a Secret with AWS_* variables for the S3 store")
    k.add_argument("--output", "-o", default=None)
    k.add_argument("--kubeconfig", default=None)
    k.add_argument("--context", default=None)

    r = sub.add_parser("runs", help="query the ExperimentDB index of runs")
    r.add_argument("action", choices=["list", "query", "show", "sync"])
    r.add_argument("run", nargs="?", help="fingerprint prefix, run id or name (show)")
    r.add_argument("--db", default=None, help="index path (default: $AUDITKIT_RAY_DB or ~/.auditkit-ray/experiments.sqlite)")
    r.add_argument("--store", default="results", help="result store to index (sync)")
    r.add_argument("--model")
    r.add_argument("--dataset")
    r.add_argument("--name")
    r.add_argument("--experiment")
    r.add_argument("--tag", action="append", default=[], help="KEY=VALUE (repeatable)")
    r.add_argument("--metric", action="append", default=[], help="condition such as 'exact_match>=0.5' (repeatable)")
    r.add_argument("--since", help="ISO date or time")
    r.add_argument("--until", help="ISO date or time")
    r.add_argument("--json", action="store_true")

    g = sub.add_parser("generate", help="generate and store outputs only (no scoring)")
    g.add_argument("file")
    g.add_argument("--address", default=None)
    g.add_argument("--store", default=None)
    g.add_argument("--quiet", action="store_true")

    s = sub.add_parser("rescore", help="score a stored run's outputs again with other metrics (no GPU)")
    s.add_argument("run", help="a run directory or its result.json")
    s.add_argument("--metric", action="append", default=[], help="metric name (repeatable)")
    s.add_argument("--config", help="a run file whose metrics and annotators to apply")
    s.add_argument("--address", default=None)
    s.add_argument("--quiet", action="store_true")
    s.add_argument("--json", action="store_true")
    return {"runs": cmd_runs, "generate": cmd_generate, "rescore": cmd_rescore, "sweep": cmd_sweep, "k8s": cmd_k8s}
