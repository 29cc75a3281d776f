import contextlib
import json
import logging
import os
import sys
import textwrap
from pathlib import Path

import pytest

from auditkit_ray.core.stderr import StderrHandler

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# runs record themselves in an ExperimentDB: keep the tests' index out of ~/
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

_DB_DIR = tempfile.mkdtemp(prefix="ak-db-")
atexit.register(shutil.rmtree, _DB_DIR, ignore_errors=True)  # one per test session: none left behind
os.environ["AUDITKIT_RAY_DB"] = os.path.join(_DB_DIR, "experiments.sqlite")
# the command line's warm local cluster outlives a command by design; the tests that are about it turn it on
# (tests/cli/test_warm_cluster.py), every other test gets the private cluster per command it always had
os.environ["AUDITKIT_RAY_WARM"] = "0"
# a suite started as a script's background job (`make test &`) inherits SIGINT ignored, and so would every
# command a test starts: the signal tests send SIGINT and expect it to be taken (the handler goes on exec)
import signal  # noqa: E402

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# property tests draw the same examples on every run: CI's verdict does not depend on the draw
# (hypothesis is a dev extra; the tests that use it import it themselves)
with contextlib.suppress(ImportError):
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("auditkit", derandomize=True)
    _hypothesis_settings.load_profile("auditkit")


#: ``make test`` runs pytest-xdist (``-n 2 --dist loadgroup``); ``pytest_xdist_make_scheduler`` below makes the
#: groups. A test file is one group: it runs whole on one worker, so its module fixtures (a built bundle, a sweep,
#: a browser) are set up once, and the files run on each worker in collection order, as in a run without xdist
#: (a session cluster of tests/pipeline never comes up before tests/backends' own). Two exceptions:
#: tests that share no module fixture and run for a minute or more each, spread over the workers one by one
SPREAD = ("tests/benchmarks/test_benchmarks_smoke.py::test_smoke_mode_prints_its_figures[",)
#: tests that share a build outside the test run's temp folders with another file: they join that file's group
#: (bench_generation.py --smoke builds benchmarks/.cache/bench-model-smoke, as does the vLLM trio)
JOINS = {"tests/benchmarks/test_benchmarks_smoke.py::test_smoke_mode_prints_its_figures[generation]":
         "tests/benchmarks/test_vllm_peers.py"}


def xdist_group_of(nodeid: str) -> str:
    """The group (pytest-xdist's scope) of a test: what runs together, in order, on one worker."""
    if nodeid in JOINS:
        return JOINS[nodeid]
    if nodeid.startswith(SPREAD):
        return nodeid
    return nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: pytest-xdist's scope scheduler over ``xdist_group_of``'s groups, in collection order.
    (pytest-xdist's own loadgroup reads ``xdist_group`` marks by rewriting a node id, which pytest 9 no longer lets
    it do; the groups here come from the node id alone, which is all the controller process sees.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    config.option.loadscopereorder = False  # collection order, not the biggest group first
    return FileGroups(config, log)


def pytest_collection_modifyitems(config, items):
    """The ``ray`` mark on every test that needs Ray (tests/support/needs_ray.py says how that is decided):
    ``make check`` runs the others, ``pytest -m 'not ray'`` too."""
    from needs_ray import item_needs_ray

    for item in items:
        if item_needs_ray(item):
            item.add_marker(pytest.mark.ray)


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> Path: a dedented file under tmp_path."""

    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return p

    return _write


@pytest.fixture
def data_file(tmp_path) -> Path:
    p = tmp_path / "data.jsonl"
    p.write_text(
        "\n".join(
            [
                '{"id": "a", "question": "What is 1 plus 1?", "answer": "2"}',
                '{"id": "b", "question": "What is 2 plus 2?", "answer": "4"}',
                '{"id": "c", "question": "What is 3 plus 3?", "answer": "6"}',
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return p


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-compatible server, moto in server mode on 127.0.0.1: one per test process (each pytest-xdist
    worker), shared by every test that needs S3. A test keeps its objects apart in a bucket of its own
    (``s3_bucket``); it never stops the server. Yields ``{"url", "proc", "port"}``."""
    pytest.importorskip("boto3", reason="S3 tests need the 's3' extra (make test installs it)")
    import shutil

    if not (shutil.which("moto_server") or (Path(sys.executable).parent / "moto_server").exists()):
        pytest.skip("moto_server (the dev extra) is not installed")
    from auditkit_ray.testing.s3 import start_moto_server

    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc, url, port = start_moto_server(log)
    yield {"url": url, "proc": proc, "port": port}
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture
def s3_bucket(s3_server) -> str:
    """A new, empty bucket of this test's own on the shared ``s3_server`` (a unique name)."""
    import uuid

    import boto3

    name = f"ak-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_server["url"], region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=name)
    return name


@pytest.fixture
def library_warnings_on_stderr():
    """The library logs its warnings (``logging``); what reaches the terminal is the application's choice,
    the command line's for a user of it. Tests that read the warnings where such a user sees them, on stderr,
    set up the same: the package's warnings, as ``warning: <message>``, on stderr (every test of
    tests/pipeline, and the Ray tests that moved from there to their subject's folder)."""
    handler = StderrHandler()  # capsys replaces sys.stderr per test
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    logger = logging.getLogger("auditkit_ray")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


@pytest.fixture(scope="session")
def session_caches(tmp_path_factory) -> dict[str, Path]:
    """The session's Hugging Face cache and model cache directories (what the shared cluster's workers read)."""
    base = tmp_path_factory.getbasetemp()
    return {"hub": base / "hf-hub-cache", "models": base / "model-cache"}


@pytest.fixture(scope="session")
def _shared_cluster_session(session_caches):
    """Stops the worker's shared cluster at the end of the session if it is up then."""
    yield {"HF_HUB_CACHE": str(session_caches["hub"]), "AUDITKIT_RAY_MODEL_CACHE": str(session_caches["models"])}
    import shared_cluster

    if "ray" in sys.modules:
        shared_cluster.release(sys.modules["ray"])


@pytest.fixture(scope="module")
def ray_cluster(_shared_cluster_session):
    """The worker's one shared local Ray (tests/support/shared_cluster.py): 2 CPUs and 4 logical GPUs, for every
    Ray test that does not test start-up, exit, faults of the cluster or node loss itself. Its workers inherit
    the session's Hugging Face and model caches (``session_caches``). Per module, not per session: a module
    whose own cluster stopped it (tests/backends' ``local_ray``) is followed by one that starts it again."""
    pytest.importorskip("ray", reason="the Ray tests need the 'ray' extra (make test installs it)")
    import shared_cluster

    return shared_cluster.ensure(_shared_cluster_session)


@pytest.fixture(scope="session")
def _worker_warm_home(tmp_path_factory):
    """The worker's own warm-cluster home (``AUDITKIT_RAY_HOME``): the warm cluster the ``warm_commands`` tests
    share, taken down at the end of the session (``auditkit-ray down``) if it is up then."""
    home = tmp_path_factory.mktemp("warm-home")
    yield home
    from console import console

    console("down", env={"AUDITKIT_RAY_HOME": str(home), "AUDITKIT_RAY_WARM": "1"}, timeout=120)


@pytest.fixture
def warm_commands(_worker_warm_home, monkeypatch):
    """The test's console-script commands run on the worker's one warm cluster (as a user's do: the command line
    uses the warm cluster by default) instead of a private cluster each: about 2.5 s a command instead of 12 s.
    For tests of what a command does, not of how a cluster starts, stops or fails; the cluster and its resident
    models stay up from one such test to the next, and go after 300 s idle."""
    monkeypatch.setenv("AUDITKIT_RAY_WARM", "1")
    monkeypatch.setenv("AUDITKIT_RAY_HOME", str(_worker_warm_home))
    monkeypatch.setenv("AUDITKIT_RAY_IDLE_TIMEOUT", "300")
    return _worker_warm_home


@pytest.fixture(autouse=True)
def cluster_gpus_free(request):
    """Each test on the shared cluster starts with its four GPUs free (``shared_cluster.wait_gpus_free``); the
    others are left alone (and not marked ``ray`` for it: this fixture names no Ray itself)."""
    if "ray_cluster" in request.fixturenames:
        import shared_cluster

        shared_cluster.wait_gpus_free(request.getfixturevalue("ray_cluster"), request.node.name)
    yield


@pytest.fixture
def arith(tmp_path) -> Path:
    """40 arithmetic questions (ids q000..q039), JSON Lines."""
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
    """rows(result) -> each sample's (id, repeat, text, scores), in the table's order."""
    return rows_of


@pytest.fixture
def numbers():
    """numbers(result) -> each metric's (mean, n, counts, stderr, ci_low, ci_high)."""
    return numbers_of


def shared_dir(tmp_path_factory, name: str) -> Path:
    """A folder of this test run that every pytest-xdist worker of the run sees (the parent of the workers' base
    temp folders), or this session's own without xdist: what is built once there is built once per run."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    path = base / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def built_once(folder: Path):
    """Hold the lock of ``folder`` (an ``fcntl`` lock beside it): the first worker to get it builds what goes
    there, the others wait for it and then find it built."""
    import fcntl

    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(cmd: list[str], out: Path) -> None:
    """Run the build script ``cmd`` (which writes ``out``) unless an earlier worker of this run did."""
    import subprocess

    done = out.parent / f".{out.name}.built"  # written after the script succeeded: a failed build is not reused
    with built_once(out):
        if not done.is_file():
            subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            done.touch()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The repo's tiny Llama checkpoint, built once per test run by its script (once for all xdist workers)."""
    pytest.importorskip("transformers", reason="the tiny model needs the 'hf' extra (make test installs it)")
    out = shared_dir(tmp_path_factory, "tiny-model") / "model"
    prebuilt = os.environ.get("AUDITKIT_TEST_TINY_MODEL")  # scripts/check.py: examples/tiny-model, built by this script
    if prebuilt:
        with built_once(out):
            if not out.is_dir():
                shutil.copytree(prebuilt, out.with_name(".model.copying"), dirs_exist_ok=True)
                out.with_name(".model.copying").rename(out)
        return out
    _build([sys.executable, str(ROOT / "examples/tiny_model/build.py"), "--out", str(out)], out)
    return out


@pytest.fixture(scope="session")
def tiny_grid(tiny_model) -> dict[str, Path]:
    """The tiny model and two magnitude-pruned variants (25%, 50%), built once per test run."""
    out = {"p0": tiny_model}
    for pct in (25, 50):
        dst = tiny_model.parent / f"model-p{pct}"
        _build([sys.executable, str(ROOT / "examples/tiny_model/prune.py"), "--src", str(tiny_model),
                "--out", str(dst), "--amount", str(pct / 100)], dst)
        out[f"p{pct}"] = dst
    return out


def grid_sweep(tiny_grid: dict[str, Path], data: Path, store: Path, name: str = "grid") -> dict:
    """A 3 checkpoints x 2 quantizations sweep over the tiny model (6 cells)."""
    return {
        "name": name,
        "base": {
            "name": "tiny",
            "model": {"type": "hf", "path": str(tiny_grid["p0"]), "batch_size": 8},
            "dataset": {"path": str(data), "input_field": "question", "target_field": "answer", "limit": 24},
            "prompt": {"template": "{{ question }} Answer:"},
            "generation": {"max_new_tokens": 6},
            "annotators": [{"type": "regex", "name": "number", "pattern": r"(-?\d+)", "select": "last"}],
            "metrics": ["exact_match", {"name": "exact_match", "on": "number"}, "non_degenerate"],
            "execution": {"shard_size": 8},
            "store": {"path": str(store)},
        },
        "grid": {"model.path": [str(p) for p in tiny_grid.values()], "model.quantization": [None, "int8-dynamic"]},
    }


@pytest.fixture
def make_grid_sweep():
    return grid_sweep
