"""With a data root configured, a dataset path cannot escape it."""

import pytest

from auditkit_ray import ConfigError
from auditkit_ray.config import run_spec_from_dict
from auditkit_ray.pipeline.plan import check_data_root


def _spec(path, **extra):
    return run_spec_from_dict(
        {"model": {"type": "echo"}, "dataset": {"path": str(path)}, "metrics": ["exact_match"], **extra}
    )


@pytest.mark.parametrize("bad", ["../outside.jsonl", "/etc/passwd", "sub/../../outside.jsonl", "link/secret.jsonl"])
def test_dataset_path_escaping_the_data_root_is_refused(tmp_path, monkeypatch, bad):
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (root / "link").symlink_to(tmp_path / "secret")
    monkeypatch.setenv("AUDITKIT_RAY_DATA_ROOT", str(root))
    monkeypatch.chdir(root)
    with pytest.raises(ConfigError, match="outside the data root"):
        check_data_root(_spec(bad))


def test_paths_inside_the_root_and_no_root_at_all_are_fine(tmp_path, monkeypatch):
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("AUDITKIT_RAY_DATA_ROOT", str(root))
    monkeypatch.chdir(root)
    check_data_root(_spec("a.jsonl"))
    check_data_root(_spec(root / "b" / "c.jsonl"))
    with pytest.raises(ConfigError, match="retrieval.corpus"):
        check_data_root(_spec("a.jsonl", retrieval={"retriever": "bm25", "corpus": "../corpus.jsonl"}))
    monkeypatch.delenv("AUDITKIT_RAY_DATA_ROOT")
    check_data_root(_spec("/anywhere/x.jsonl"))
