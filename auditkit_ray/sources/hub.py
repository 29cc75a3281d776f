"""Models named by a Hugging Face Hub id (``org/name``), pinned to a commit.

The driver resolves the revision (a branch, tag or commit) to its commit sha
once (``resolve``): online through the Hub's API, offline
(``HF_HUB_OFFLINE=1``) from the local cache's ``refs/``. Each actor then
fetches exactly that commit (``snapshot``): offline the cached snapshot
directory, online ``huggingface_hub.snapshot_download`` into the node's
Hugging Face cache (its own file locks share one download between processes).

The cache is read where huggingface_hub reads it (``HF_HUB_CACHE``, else
``HF_HOME/hub``, else ``~/.cache/huggingface/hub``), worked out when called,
not when huggingface_hub was imported. ``HF_TOKEN`` is left to
huggingface_hub: it never passes through this module, so it cannot reach a
message, a fingerprint or a log.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import ModelSourceError, RunError

_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "on", "yes", "true"}


def is_hub_id(path: str) -> bool:
    """``org/name`` that is not a local file or directory (a local one always wins)."""
    return bool(_ID.match(path)) and ".." not in path and not Path(path).expanduser().exists()


def is_commit(revision: str | None) -> bool:
    return bool(revision and _SHA.match(revision))


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def repo_dir(repo_id: str) -> Path:
    return cache_dir() / ("models--" + repo_id.replace("/", "--"))


def _cached_commit(repo_id: str, revision: str) -> str | None:
    repo = repo_dir(repo_id)
    if is_commit(revision):
        return revision if (repo / "snapshots" / revision).is_dir() else None
    ref = repo / "refs" / revision
    if ref.is_file():
        sha = ref.read_text(encoding="utf-8").strip()
        return sha if (repo / "snapshots" / sha).is_dir() else None
    return None


def resolve(repo_id: str, revision: str | None, field: str = "model.path") -> str:
    """The commit sha ``revision`` (default ``main``) of ``repo_id`` names now; a ConfigError naming the id
    and what to do when it cannot be found."""
    rev = revision or "main"
    where = f"{field} {repo_id!r} (revision {rev!r})"
    # an id-shaped path that is not on disk: it may have been meant as either, so the message says both readings
    local = f"not a local directory (no {Path(repo_id).expanduser().absolute()})"
    if offline():
        sha = _cached_commit(repo_id, rev)
        if sha is None:
            if repo_dir(repo_id).is_dir():
                raise ModelSourceError(f"{where}: revision not in the Hugging Face cache {cache_dir()} "
                                  "(HF_HUB_OFFLINE=1): name a cached branch, tag or commit, or download it")
            raise ModelSourceError(f"{where}: {local}, and not a Hub id in the Hugging Face cache {cache_dir()} "
                                   "(HF_HUB_OFFLINE=1): check the path or the id, or pre-fill the cache "
                                   "(`hf download` on a connected machine, then copy HF_HOME)")
        return sha
    from huggingface_hub import HfApi
    from huggingface_hub import errors as hf_errors

    try:
        return str(HfApi().model_info(repo_id, revision=rev, timeout=20).sha)
    except hf_errors.GatedRepoError:
        raise ModelSourceError(f"{where}: a gated model: accept its terms on the Hub and set HF_TOKEN") from None
    except hf_errors.RevisionNotFoundError:
        raise ModelSourceError(f"{where}: no such revision on the Hub: name an existing branch, tag or commit"
                               ) from None
    except hf_errors.RepositoryNotFoundError:
        raise ModelSourceError(f"{where}: {local}, and no such model on the Hub (or a private one: set HF_TOKEN)"
                               ) from None
    except Exception as exc:  # noqa: BLE001 - no network (or the Hub down): the cache may still hold it
        sha = _cached_commit(repo_id, rev)
        if sha is not None:
            return sha
        raise ModelSourceError(f"{where}: {local}, and as a Hub id: the Hub is unreachable ({type(exc).__name__}) "
                               f"and the model is not in the Hugging Face cache {cache_dir()}: check the path, "
                               "pre-fill the cache, or set HF_HUB_OFFLINE=1 to use a cached copy") from None


def snapshot(repo_id: str, sha: str) -> Path:
    """The local snapshot directory of commit ``sha``, downloaded into the node's cache when missing."""
    local = repo_dir(repo_id) / "snapshots" / sha
    if (local / "config.json").is_file():
        return local
    if offline():
        raise RunError(f"model {repo_id!r} commit {sha}: not in this node's Hugging Face cache {cache_dir()} "
                       "(HF_HUB_OFFLINE=1): pre-fill every node's cache, or share HF_HOME between nodes")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, revision=sha, cache_dir=cache_dir()))
    except Exception as exc:  # noqa: BLE001 - one line, never the token (huggingface_hub's messages carry none)
        raise RunError(f"model {repo_id!r} commit {sha}: download failed: {type(exc).__name__}") from None
