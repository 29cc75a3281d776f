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
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("file", help="sweep file")
    common.add_argument("--image", default=None,
                        help="container image with auditkit-ray[ray,hf,s3] installed (default: the tag "
                             "docker/Dockerfile's build gives it, auditkit-ray:VERSION-gpu, or -cpu with --gpus 0)")
    common.add_argument("--store", required=True,
                        help="s3://bucket/prefix result store (a retried job resumes from it)")
    common.add_argument("--namespace", default="default")
    common.add_argument("--name", default=None, help="the RayJob's name (default: the sweep file's stem)")
    common.add_argument("--gpus", type=int, default=1, help="GPUs per worker pod")
    common.add_argument("--workers", type=int, default=1)
    common.add_argument("--max-workers", type=int, default=None)
    common.add_argument("--gpu-type", default=None,
                        help="node label nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3")
    common.add_argument("--aws-secret", default=None, help="a Secret with AWS_* variables for the S3 store")
    k = sub.add_parser("k8s", help="render or submit a KubeRay RayJob for a sweep",
                       description="A KubeRay RayJob (and the ConfigMap holding the sweep file) that runs a sweep.")
    actions = k.add_subparsers(dest="action", required=True, metavar="{render,submit}", parser_class=type(k))
    r = actions.add_parser("render", parents=[common], help="write the RayJob and ConfigMap as YAML",
                           description="Write the RayJob and its ConfigMap as plain YAML (stdout, or --output).")
    r.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    r.set_defaults(handler=cmd_k8s, kubeconfig=None, context=None)
    s = actions.add_parser("submit", parents=[common], help="create the RayJob through the Kubernetes API",
                           description="Create the ConfigMap and the RayJob through the Kubernetes API.")
    s.add_argument("--kubeconfig", default=None)
    s.add_argument("--context", default=None)
    s.set_defaults(handler=cmd_k8s, output=None)
