import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["auditkit_arith_gen", "auditkit_arith_mc"]


@pytest.fixture(scope="module")
def lmeval_store(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lmeval-store")


@pytest.fixture(scope="module")
def direct_runs(tiny_model, lmeval_store):
    """Both bundled tasks through the real lm_eval.simple_evaluate on the tiny model."""
    pytest.importorskip("lm_eval", reason="the lm-eval bridge needs the 'lmeval' extra")
    from auditkit_ray.lmeval import run_lmeval

    runs = run_lmeval(TASKS, tiny_model, store=str(lmeval_store), data_dir=str(lmeval_store / "data"))
    return dict(zip(TASKS, runs))


@pytest.fixture(scope="module")
def pruned_model(tiny_model, tmp_path_factory) -> Path:
    """The tiny model with half of its linear weights pruned (another model to compare)."""
    spec = importlib.util.spec_from_file_location("_ak_prune", ROOT / "examples/tiny_model/prune.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.prune(tiny_model, tmp_path_factory.mktemp("pruned") / "model-p50", 0.5)
