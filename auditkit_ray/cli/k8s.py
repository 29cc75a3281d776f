"""``k8s``: render or submit a KubeRay RayJob that runs a sweep."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import api
from ..errors import EXIT_OK


def cmd_k8s(args: argparse.Namespace) -> int:
    """``auditkit-ray k8s render|submit FILE``: a KubeRay RayJob for a sweep."""
    docs = api.k8s_render(args.file, image=args.image, store=args.store, namespace=args.namespace, name=args.name,
                          gpus_per_worker=args.gpus, workers=args.workers, max_workers=args.max_workers,
                          gpu_type=args.gpu_type, aws_secret=args.aws_secret)
    if args.action == "render":
        text = api.k8s_dump(docs)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
            print(f"wrote {args.output}")
        else:
            print(text)
        return EXIT_OK
    name = api.k8s_submit(docs, kubeconfig=args.kubeconfig, context=args.context)
    print(f"created RayJob {name} in namespace {args.namespace}")
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register this module's commands on the sub-command parser ``sub``."""
    k = sub.add_parser("k8s", help="render or submit a KubeRay RayJob for a sweep")
    k.add_argument("action", choices=["render", "submit"])
    k.add_argument("file", help="sweep file")
    k.add_argument("--image", default=None,
                   help="container image with auditkit-ray[ray,hf,s3] installed (default: the tag docker/Dockerfile's "
                        "build gives it, auditkit-ray:VERSION-gpu, or -cpu with --gpus 0)")
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
    k.set_defaults(handler=cmd_k8s)
