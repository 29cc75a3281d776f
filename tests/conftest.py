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

# property tests draw the same examples on every run: CI's verdict does not depend on the draw
# (hypothesis is a dev extra; the tests that use it import it themselves)
with contextlib.suppress(ImportError):
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("auditkit", derandomize=True)
    _hypothesis_settings.load_profile("auditkit")


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
def tiny_model(tmp_path_factory) -> Path:
    """The repo's tiny Llama checkpoint, built once per session by its script."""
    import subprocess

    pytest.importorskip("transformers", reason="the tiny model needs the 'hf' extra (make test installs it)")
    out = tmp_path_factory.mktemp("tiny-model") / "model"
    subprocess.run([sys.executable, str(ROOT / "examples/tiny_model/build.py"), "--out", str(out)], check=True,
                   capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return out


@pytest.fixture(scope="session")
def tiny_grid(tiny_model) -> dict[str, Path]:
    """The tiny model and two magnitude-pruned variants (25%, 50%)."""
    import subprocess

    out = {"p0": tiny_model}
    for pct in (25, 50):
        dst = tiny_model.parent / f"model-p{pct}"
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples/tiny_model/prune.py"),
                "--src",
                str(tiny_model),
                "--out",
                str(dst),
                "--amount",
                str(pct / 100),
            ],
            check=True,
            capture_output=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
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
