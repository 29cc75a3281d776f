import json
import logging
import os
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray pipeline tests need the 'ray' extra (make test installs it)")


class _StderrNow(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is at each record (``capsys`` replaces it per test)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


@pytest.fixture(autouse=True)
def library_warnings_on_stderr():
    """The library logs its warnings (``logging``); what reaches the terminal is the application's choice,
    the command line's for a user of it. These tests read the warnings where such a user sees them, on
    stderr, so they set up the same: the package's warnings, as ``warning: <message>``, on stderr."""
    handler = _StderrNow()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    logger = logging.getLogger("auditkit_ray")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _session_caches(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.getbasetemp()
    return {"hub": base / "hf-hub-cache", "models": base / "model-cache"}


@pytest.fixture(scope="session")
def session_caches(tmp_path_factory) -> dict[str, Path]:
    """The session's Hugging Face cache and model cache directories (what the session cluster's workers read)."""
    return _session_caches(tmp_path_factory)


def inherited_by_workers(values: dict[str, str]):
    """Set environment variables while a local Ray starts (its raylet, and so every worker, inherits them), then
    put back what the driver had."""
    from auditkit_ray.cluster.local import environ

    return environ(values)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """One real local Ray for the pipeline tests: 2 CPUs and 4 logical GPUs."""
    if ray.is_initialized():
        ray.shutdown()
    # moto's S3 accepts any credentials; the workers inherit these at start
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    support = Path(__file__).resolve().parents[1] / "support"
    agents = Path(__file__).resolve().parents[2] / "examples" / "agents"
    repo = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(support), str(agents), str(repo)]
    # a Hugging Face cache and a model cache of the session's own (hub_cache, the s3:// checkpoint tests)
    caches = {"HF_HUB_CACHE": str(_session_caches(tmp_path_factory)["hub"]),
              "AUDITKIT_RAY_MODEL_CACHE": str(_session_caches(tmp_path_factory)["models"])}
    # the workers get these from the environment they inherit (set while Ray starts, then put back), not from a
    # job runtime_env: with one, Ray starts every worker through an extra setup process (most of a second each)
    pythonpath = os.pathsep.join([str(support), str(agents), str(repo), os.environ.get("PYTHONPATH", "")])
    worker_env = {"PYTHONPATH": pythonpath, **caches}
    with inherited_by_workers(worker_env):
        ray.init(address="local", num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def arith(tmp_path) -> Path:
    p = tmp_path / "arith.jsonl"
    with open(p, "w") as f:
        for i in range(40):
            a, b = i % 7, (i * 3) % 11
            f.write(json.dumps({"id": f"q{i:03d}", "question": f"What is {a} plus {b}?", "answer": str(a + b)}) + "\n")
    return p


@pytest.fixture
def make_spec(tmp_path, arith):
    """make_spec(store_name, **overrides) -> RunSpec over the arith data."""
    from auditkit_ray.config import run_spec_from_dict

    def _make(store_name: str = "store", data: Path | None = None, **over):
        spec = {
            "name": "t",
            "model": {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target"},
            "dataset": {"path": str(data or arith), "input_field": "question", "target_field": "answer"},
            "prompt": {"template": "{{ question }} Answer:"},
            "metrics": ["exact_match", "token_f1"],
            "execution": {"shard_size": 8},
            "store": {"path": str(tmp_path / store_name)},
        }
        for k, v in over.items():
            if isinstance(v, dict) and isinstance(spec.get(k), dict) and "type" not in v:
                spec[k] = {**spec[k], **v}
            else:
                spec[k] = v
        return run_spec_from_dict(spec)

    return _make


def rows_of(result) -> list[tuple]:
    from auditkit_ray.api import samples_table

    return [(r["sample_id"], r["repeat"], r["text"], r["scores"]) for r in samples_table(result).to_pylist()]


def numbers_of(result) -> dict:
    return {k: (m.mean, m.n, m.counts, m.stderr, m.ci_low, m.ci_high) for k, m in result.metrics.items()}


@pytest.fixture
def rows():
    return rows_of


@pytest.fixture
def numbers():
    return numbers_of


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-compatible server: moto in server mode on 127.0.0.1."""
    from auditkit_ray.testing.s3 import start_moto_server

    pytest.importorskip("boto3", reason="S3 tests need the 's3' extra (make test installs it)")
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc, url, port = start_moto_server(log)
    yield {"url": url, "proc": proc, "port": port}
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture
def s3_bucket(s3_server, request):
    import uuid

    import boto3

    name = f"ak-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_server["url"], region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture(autouse=True)
def cluster_gpus_free(request):
    """Each pipeline test starts with all four of the shared cluster's GPUs
    free. pytest keeps a test's log records (and so the exceptions Ray Data
    logged, their frames and the actor handles in them) until that test's
    teardown; the collector frees them once they are dropped. A test that
    truly leaks an actor fails here, named, instead of failing the next one."""
    if "ray_cluster" in request.fixturenames and ray.is_initialized():
        import gc
        import time

        gc.collect()
        deadline = time.time() + 30
        while time.time() < deadline and ray.available_resources().get("GPU", 0) < 4:
            time.sleep(0.2)
        assert ray.available_resources().get("GPU", 0) == 4, (
            f"a test before {request.node.name} left actors holding GPUs: {ray.available_resources()}")
    yield
