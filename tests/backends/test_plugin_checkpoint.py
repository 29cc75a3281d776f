"""A backend of another package whose settings subclass ``CheckpointSettings`` gets what ``hf`` and
``vllm`` get, with no file of auditkit-ray touched: its Hub id pinned to a commit by the plan, the
snapshot fetched where it is loaded (the backend sees a local directory), a local checkpoint checked
before the run and content-hashed into the model identity.

The plugin is installed the way a package is: a module and a ``*.dist-info`` folder whose
``entry_points.txt`` names it in the ``auditkit_ray.backends`` group, in a folder on the path (no
monkeypatching of ``importlib.metadata``). The Hub is a cache in the Hub's own layout, built by hand and read
offline (``HF_HUB_OFFLINE=1``), as a cluster without network reads a pre-filled cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from auditkit_ray.core import backends as registry
from auditkit_ray.core.backends import backend_types, unregister_backend

PLUGIN = '''
"""A checkpoint backend of another package: it replies what its checkpoint's config.json says."""
import json
from pathlib import Path
from typing import Literal

from auditkit_ray.backends.base import Backend
from auditkit_ray.core.backends import CheckpointSettings, register_backend
from auditkit_ray.core.types import Generation


class CkptSettings(CheckpointSettings):
    type: Literal["ckpt"]


class CkptBackend(Backend):
    def load(self):
        path = Path(self.spec.path)
        if not (path / "config.json").is_file():  # a Hub id or an s3:// prefix never reaches a backend
            raise RuntimeError(f"the backend was handed {self.spec.path!r}, not a local checkpoint directory")
        self.reply = json.loads((path / "config.json").read_text())["reply"]
        self.where = str(path)

    def generate(self, requests):
        return [Generation(text=self.reply, metadata={"loaded_from": self.where}) for _ in requests]


register_backend("ckpt", settings=CkptSettings, impl="ckpt_plugin:CkptBackend")
'''

REPO = "plug-org/ckpt-model"
SHA = "c" * 40


def install_plugin(root: Path) -> Path:
    """The plugin's module and its distribution's metadata, as ``pip install`` leaves them in site-packages."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "ckpt_plugin.py").write_text(textwrap.dedent(PLUGIN))
    dist = root / "ckpt_plugin-1.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ckpt-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[auditkit_ray.backends]\nckpt = ckpt_plugin\n")
    return root


def checkpoint(where: Path, reply: str = "42") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text(json.dumps({"model_type": "ckpt", "reply": reply}))
    (where / "model.safetensors").write_bytes(b"weights of " + reply.encode())
    return where


def hub_cache(cache: Path, model: Path) -> Path:
    """``model`` as commit SHA of REPO in a Hub-layout cache (blobs, a snapshot of symlinks, refs/main)."""
    repo = cache / ("models--" + REPO.replace("/", "--"))
    snap = repo / "snapshots" / SHA
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True, exist_ok=True)
    for f in sorted(model.iterdir()):
        blob = repo / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copyfile(f, blob)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(SHA)
    return snap


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    root = install_plugin(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setitem(registry._state, "entry_points", "unread")  # read them again, as a fresh process does
    cache = tmp_path / "hub"
    hub_cache(cache, checkpoint(tmp_path / "src"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "ckpt" in backend_types()  # read now: config models built before this test rebuild themselves
    yield root
    unregister_backend("ckpt")
    sys.modules.pop("ckpt_plugin", None)


def _spec(tmp_path: Path, path: str):
    from auditkit_ray.config import run_spec_from_dict

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i}", "input": "q", "target": "42"}) + "\n" for i in range(3)))
    return run_spec_from_dict({"name": "plug", "model": {"type": "ckpt", "path": path}, "dataset": {"path": str(data)},
                               "metrics": ["exact_match"], "store": {"path": str(tmp_path / "store")}})


def test_a_hub_id_is_pinned_fetched_and_in_the_identity(plugin, tmp_path):
    from auditkit_ray.pipeline.identity import model_identity
    from auditkit_ray.pipeline.plan import pin_model
    from auditkit_ray.sources import materialize, source_of

    spec = _spec(tmp_path, REPO)
    assert source_of(spec.model) == "hub"
    pinned = pin_model(spec)
    assert pinned.model.revision == SHA  # the branch, pinned to its commit before any actor starts
    assert model_identity(pinned)["hub"] == {"id": REPO, "commit": SHA}
    local = materialize(pinned.model)  # what the generation actor hands the backend
    assert Path(local.path) == tmp_path / "hub" / "models--plug-org--ckpt-model" / "snapshots" / SHA
    assert json.loads((Path(local.path) / "config.json").read_text())["reply"] == "42"


def test_a_local_checkpoint_is_checked_and_content_hashed(plugin, tmp_path):
    from auditkit_ray.errors import ModelSourceError
    from auditkit_ray.pipeline.identity import model_identity
    from auditkit_ray.pipeline.plan import preflight

    one, same, other = (checkpoint(tmp_path / n, r) for n, r in (("one", "42"), ("same", "42"), ("other", "7")))
    ident = model_identity(_spec(tmp_path, str(one)))
    assert ident["checkpoint_hash"] == model_identity(_spec(tmp_path, str(same)))["checkpoint_hash"]
    assert ident["checkpoint_hash"] != model_identity(_spec(tmp_path, str(other)))["checkpoint_hash"]
    with pytest.raises(ModelSourceError, match="no such directory"):
        preflight(_spec(tmp_path, str(tmp_path / "missing")))


def test_a_run_of_the_plugin_on_a_hub_id_loads_the_pinned_snapshot(plugin, tmp_path):
    """The real console script, on a Ray of its own: its workers find the plugin through the same entry point
    (the folder is on their PYTHONPATH, as site-packages would be)."""
    from console import console

    spec = _spec(tmp_path, REPO)
    run_file = tmp_path / "run.json"
    run_file.write_text(spec.model_dump_json(by_alias=True, exclude_none=True))
    env = {"PYTHONPATH": os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "AUDITKIT_RAY_WARM": "0", "AUDITKIT_RAY_HOME": str(tmp_path / "home")}
    r = console("run", run_file, "--json", "--quiet", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["backend"]["hub"] == {"id": REPO, "commit": SHA}
    assert result["config"]["model"]["revision"] == SHA
    assert result["metrics"]["exact_match"]["mean"] == 1.0  # the reply of the snapshot's config.json
