"""KubeRay: render a RayJob (plus a ConfigMap holding the sweep file) for a
sweep, and submit it through the ``kubernetes`` client.

The RayJob starts a cluster with a GPU worker group, runs
``auditkit-ray sweep`` on it, and shuts the cluster down afterwards
(``shutdownAfterJobFinishes``). Results go to an ``s3://`` store so that a
retried job (``backoffLimit``) on a fresh cluster resumes from the finished
shards. The image must have ``auditkit-ray[ray,hf,s3]`` installed:
``docker/Dockerfile`` builds it, and its local name is the default
(``default_image``): ``auditkit-ray:<version>-gpu``, or ``-cpu`` for a job
with no GPUs (docs/cluster.md: build, push, ``--image``).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import yaml

from ._version import __version__
from .errors import ConfigError, require

log = logging.getLogger(__name__)

SWEEP_MOUNT = "/auditkit"
# the Ray of the image (docker/Dockerfile's RAY_VERSION, tests/packaging checks they agree)
RAY_VERSION = "2.60.0"
IMAGE_NAME = "auditkit-ray"


def default_image(gpus_per_worker: int = 1) -> str:
    """The tag docker/Dockerfile's build in docs/cluster.md gives the image:
    the GPU variant, or the CPU one when the workers have no GPUs."""
    return f"{IMAGE_NAME}:{__version__}-{'gpu' if gpus_per_worker else 'cpu'}"


def _dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:50].strip("-")
    return name or "auditkit-sweep"


def render(
    sweep_file: str | Path,
    *,
    image: str | None = None,
    store: str,
    namespace: str = "default",
    name: str | None = None,
    gpus_per_worker: int = 1,
    workers: int = 1,
    max_workers: int | None = None,
    gpu_type: str | None = None,
    cpus_per_worker: int = 8,
    memory_per_worker: str = "32Gi",
    active_deadline_s: int = 24 * 3600,
    ttl_after_finished_s: int = 3600,
    backoff_limit: int = 2,
    aws_secret: str | None = None,
) -> list[dict[str, Any]]:
    """A ConfigMap with the sweep file and a RayJob that runs it."""
    from .config import load_config_runs
    from .config.models import SweepSpec

    path = Path(sweep_file)
    spec, runs, _ = load_config_runs(path)  # refuse to render an invalid sweep
    if not isinstance(spec, SweepSpec):
        raise ConfigError(f"{path}: a run file, not a sweep: the RayJob runs `auditkit-ray sweep`, so give it a sweep "
                          "file (a 'base' run and a 'grid'; one cell is enough)")
    for where in _local_paths_left_behind(runs, path.parent):
        log.warning("%s", where)
    if not store.startswith("s3://"):
        raise ConfigError(f"--store {store!r}: a RayJob needs an s3:// result store so that a retried job resumes")
    if gpus_per_worker < 0 or workers < 0:
        raise ConfigError("--gpus and --workers must not be negative")
    job = _dns_name(name or path.stem)
    image = image or default_image(gpus_per_worker)
    env = [{"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "RAY_USAGE_STATS_ENABLED", "value": "0"}]
    env_from = [{"secretRef": {"name": aws_secret}}] if aws_secret else []
    mount = {"name": "sweep", "mountPath": SWEEP_MOUNT, "readOnly": True}
    volume = {"name": "sweep", "configMap": {"name": f"{job}-sweep"}}

    def container(role: str, limits: dict[str, Any]) -> dict[str, Any]:
        c: dict[str, Any] = {
            "name": f"ray-{role}",
            "image": image,
            "env": env,
            "resources": {"limits": limits, "requests": {k: v for k, v in limits.items() if k != "nvidia.com/gpu"}},
            "volumeMounts": [mount],
        }
        if env_from:
            c["envFrom"] = env_from
        return c

    worker_limits: dict[str, Any] = {"cpu": str(cpus_per_worker), "memory": memory_per_worker}
    if gpus_per_worker:
        worker_limits["nvidia.com/gpu"] = str(gpus_per_worker)
    worker_pod: dict[str, Any] = {"containers": [container("worker", worker_limits)], "volumes": [volume]}
    if gpu_type:
        worker_pod["nodeSelector"] = {"nvidia.com/gpu.product": gpu_type}
    if gpus_per_worker:
        worker_pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]

    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{job}-sweep", "namespace": namespace,
                     "labels": {"app.kubernetes.io/part-of": "auditkit-ray"}},
        "data": {"sweep.yaml": path.read_text(encoding="utf-8")},
    }
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": job, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "auditkit-ray"}},
        "spec": {
            "entrypoint": f"auditkit-ray sweep {SWEEP_MOUNT}/sweep.yaml --store {store}",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": ttl_after_finished_s,
            "activeDeadlineSeconds": active_deadline_s,
            "backoffLimit": backoff_limit,
            "rayClusterSpec": {
                "rayVersion": RAY_VERSION,
                "headGroupSpec": {
                    "rayStartParams": {"num-gpus": "0"},
                    "template": {"spec": {"containers": [container("head", {"cpu": "4", "memory": "16Gi"})],
                                          "volumes": [volume]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu-workers" if gpus_per_worker else "cpu-workers",
                        "replicas": workers,
                        "minReplicas": workers,
                        "maxReplicas": max_workers if max_workers is not None else workers,
                        "rayStartParams": {},
                        "template": {"spec": worker_pod},
                    }
                ],
            },
        },
    }
    return [configmap, rayjob]


class _PlainDumper(yaml.SafeDumper):
    """Plain YAML: a value used twice (the containers' env, the sweep volume) is written twice, never as an
    anchor and alias, which some Kubernetes tooling and every reader stumble on."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(docs: list[dict[str, Any]]) -> str:
    return yaml.dump_all(docs, Dumper=_PlainDumper, sort_keys=False)


def _local_paths_left_behind(runs: list[Any], base: Path) -> list[str]:
    """Warnings for the local paths a sweep's runs name that a cluster will not have: outside the repository,
    or git-ignored inside it (built locally, e.g. the demo's pruned checkpoints), so not in an image built
    from the repository either."""
    import shutil
    import subprocess

    seen: dict[str, str] = {}
    for run in runs:
        for field, value in (("model.path", getattr(run.model, "path", None)), ("dataset.path", run.dataset.path)):
            if not value or "://" in str(value) or str(value) in seen:
                continue
            p = Path(value)
            if not p.is_absolute() and not (base / p).exists() and not p.exists():
                continue  # a Hub id, or a path that exists only in the image
            seen[str(value)] = field
    if not seen or shutil.which("git") is None:
        return []
    root = None
    for where in (Path.cwd(), base):  # the repository the command runs in, else the sweep file's
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=where, capture_output=True, text=True)
        if top.returncode == 0:
            root = Path(top.stdout.strip()).resolve()
            break
    out = []
    for value, field in seen.items():
        p = Path(value) if Path(value).exists() else base / value
        full = p.resolve()
        if root is None or not full.is_relative_to(root):
            out.append(f"{field} {value!r} is a local path outside the repository: the cluster will not have it "
                       "(put it on S3, or a volume the pods mount)")
            continue
        ignored = subprocess.run(["git", "check-ignore", "-q", str(full)], cwd=root, capture_output=True)
        if ignored.returncode == 0:
            out.append(f"{field} {value!r} is git-ignored (built here), so neither the repository nor an image "
                       "built from it has it: put it on S3 (s3://...) or build it in the image")
    return out


def submit(docs: list[dict[str, Any]], *, kubeconfig: str | None = None, context: str | None = None) -> str:
    """Create the ConfigMap and the RayJob; returns the RayJob's name."""
    k8s = require("kubernetes", "k8s")
    from kubernetes import client, config

    try:
        config.load_kube_config(config_file=kubeconfig, context=context)
    except Exception:  # noqa: BLE001 - inside a pod
        try:
            config.load_incluster_config()
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"kubernetes: no usable kubeconfig or in-cluster config ({exc})") from None
    del k8s
    job_name = ""
    for doc in docs:
        ns = doc["metadata"].get("namespace", "default")
        try:
            if doc["kind"] == "ConfigMap":
                client.CoreV1Api().create_namespaced_config_map(ns, doc)
            elif doc["kind"] == "RayJob":
                client.CustomObjectsApi().create_namespaced_custom_object("ray.io", "v1", ns, "rayjobs", doc)
                job_name = doc["metadata"]["name"]
        except client.exceptions.ApiException as exc:
            what = f"{doc['kind']} {doc['metadata']['name']}"
            raise ConfigError(f"kubernetes: creating {what} failed: {exc.status} {exc.reason}") from None
    return job_name
