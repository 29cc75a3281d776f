"""RayJob/RayCluster manifests validated against the real KubeRay CRD schemas
(../shared/kuberay-crds), and submission through the real kubernetes client
to a local HTTP server that speaks the two API calls it makes (no Kubernetes
API server can run on this machine, so the server side is scripted)."""

import functools
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from auditkit_ray.cli import main
from auditkit_ray.k8s import render, submit

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT.parent / "shared" / "kuberay-crds"
jsonschema = pytest.importorskip("jsonschema")


@functools.cache
def _validator(kind: str):
    """One validator per CRD: jsonschema.validate would parse and check the large schema on every call."""
    crd = yaml.safe_load((CRDS / f"ray.io_{kind.lower()}s.yaml").read_text())
    v1 = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = v1["schema"]["openAPIV3Schema"]
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _validate(doc: dict) -> None:
    if doc["kind"] in ("RayJob", "RayCluster"):
        _validator(doc["kind"]).validate(doc)


@pytest.fixture(scope="module", autouse=True)
def _crds_present():
    if not CRDS.is_dir():
        pytest.fail(f"KubeRay CRDs not found at {CRDS}: the checkout must sit beside shared/")


@pytest.mark.slow  # the kubernetes client's import and every CRD's schema: a minute
def test_every_manifest_in_k8s_dir_validates_against_the_crds():
    files = sorted((ROOT / "k8s").glob("*.yaml"))
    assert files, "k8s/ has no manifests"
    kinds = set()
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                _validate(doc)
                kinds.add(doc["kind"])
    assert {"RayJob", "RayCluster"} <= kinds


def test_rendered_rayjob_validates_and_carries_the_lifecycle_settings(tmp_path):
    docs = render(ROOT / "jobs/examples/pruning_grid.yaml", image="ghcr.io/acme/auditkit-ray:0.1", store="s3://b/evals",
                  gpus_per_worker=2, workers=3, gpu_type="NVIDIA-H100-80GB-HBM3", namespace="evals")
    cm, job = docs
    _validate(job)
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["backoffLimit"] == 2
    assert spec["ttlSecondsAfterFinished"] > 0 and spec["activeDeadlineSeconds"] > 0
    wg = spec["rayClusterSpec"]["workerGroupSpecs"][0]
    assert wg["replicas"] == 3 and wg["minReplicas"] == 3 and wg["maxReplicas"] == 3
    limits = wg["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "2"
    assert wg["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert "--store s3://b/evals" in spec["entrypoint"] and job["metadata"]["namespace"] == "evals"
    assert yaml.safe_load(cm["data"]["sweep.yaml"])["name"] == "pruning-grid"


def test_cli_k8s_render_writes_valid_yaml_and_refuses_local_stores(tmp_path, capsys):
    out = tmp_path / "job.yaml"
    rc = main(["k8s", "render", str(ROOT / "jobs/examples/leaderboard.yaml"), "--image", "img:1", "--store", "s3://b/p",
               "--gpus", "1", "--output", str(out)])
    assert rc == 0
    docs = list(yaml.safe_load_all(out.read_text()))
    _validate(docs[1])
    assert (
        main(["k8s", "render", str(ROOT / "jobs/examples/leaderboard.yaml"), "--image", "img:1", "--store", "results"])
        == 2
    )
    assert "s3://" in capsys.readouterr().err


def test_render_names_the_dockerfile_image_by_default_and_image_overrides_it(tmp_path):
    """No --image: every container names the tag docs/cluster.md builds docker/Dockerfile as, the GPU
    variant for GPU workers and the CPU one for --gpus 0; --image replaces it."""
    from auditkit_ray import __version__

    def images(docs):
        spec = docs[1]["spec"]["rayClusterSpec"]
        pods = [spec["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in spec["workerGroupSpecs"]]
        return {c["image"] for pod in pods for c in pod["containers"]}

    sweep = ROOT / "jobs/examples/leaderboard.yaml"
    assert images(render(sweep, store="s3://b/p")) == {f"auditkit-ray:{__version__}-gpu"}
    assert images(render(sweep, store="s3://b/p", gpus_per_worker=0)) == {f"auditkit-ray:{__version__}-cpu"}
    out = tmp_path / "job.yaml"
    assert main(["k8s", "render", str(sweep), "--store", "s3://b/p", "--gpus", "0", "--output", str(out)]) == 0
    docs = list(yaml.safe_load_all(out.read_text()))
    _validate(docs[1])
    assert images(docs) == {f"auditkit-ray:{__version__}-cpu"}
    rc = main(["k8s", "render", str(sweep), "--store", "s3://b/p", "--image", "reg.example/ak:1", "-o", str(out)])
    assert rc == 0
    assert images(list(yaml.safe_load_all(out.read_text()))) == {"reg.example/ak:1"}
    build = (ROOT / "docs/cluster.md").read_text()
    assert f"-t auditkit-ray:{__version__}-gpu" in build and f"-t auditkit-ray:{__version__}-cpu" in build


class _FakeAPI(BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeAPI.seen.append((self.path, body))
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *a):
        pass


def test_submit_creates_configmap_and_rayjob_through_the_kubernetes_client(tmp_path):
    pytest.importorskip("kubernetes", reason="k8s submit needs the 'k8s' extra (make test installs it)")
    srv = HTTPServer(("127.0.0.1", 0), _FakeAPI)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{srv.server_port}"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
    }))
    docs = render(ROOT / "jobs/examples/pruning_grid.yaml", image="img:1", store="s3://b/p", namespace="ml")
    assert submit(docs, kubeconfig=str(kubeconfig)) == "pruning-grid"
    srv.shutdown()
    paths = [p for p, _ in _FakeAPI.seen]
    assert paths == ["/api/v1/namespaces/ml/configmaps", "/apis/ray.io/v1/namespaces/ml/rayjobs"]
    assert _FakeAPI.seen[1][1]["kind"] == "RayJob"
