import contextlib
import os
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))  # shared test helpers (local_cluster, tcp_proxy, ...)
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
