"""Where a model's checkpoint comes from: a local directory, a Hugging Face
Hub id, or an ``s3://`` prefix (``docs/models-and-data.md``).

Two steps, on two sides of the run:

* ``resolve_model`` runs on the driver, once, when the run is planned: it
  pins the source (a Hub revision to its commit sha, an S3 prefix to the
  hash of its ETag manifest, both kept in the settings' ``revision``) and
  fails with a ConfigError (exit 2) naming the source when it cannot. The
  pinned settings go to every actor, so all of them load the same bytes.
* ``materialize`` runs where the model is loaded (the generation actor,
  a judge): it turns pinned settings into a copy whose ``path`` is a local
  directory, fetching into the node's cache when needed. Backends only ever
  see local paths.

A local directory passes through both unchanged (and keeps its identity).
Which settings have a checkpoint is theirs to say (``checkpoint_path``: every
``CheckpointSettings`` subclass, a plugin's included), never a list of types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from . import hub, s3model

Source = Literal["local", "hub", "s3"]


def source_of(settings: Any) -> Source | None:
    """Where the settings' checkpoint lives (``BackendSettings.checkpoint_path``); None for a backend without
    a checkpoint."""
    path = settings.checkpoint_path()
    if not path:
        return None
    if s3model.is_s3(path):
        return "s3"
    if hub.is_hub_id(path):
        return "hub"
    return "local"


@dataclass(frozen=True)
class ResolvedModel:
    settings: Any  # the settings with ``revision`` pinned
    source: Source | None
    #: what the model identity records of the source (empty for a local directory: its files are hashed)
    identity: dict[str, Any]


def resolve_model(settings: Any, field: str = "model.path") -> ResolvedModel:
    """Pin the source (driver side, before any actor starts)."""
    src = source_of(settings)
    if src == "hub":
        sha = hub.resolve(settings.path, settings.revision, field)
        return ResolvedModel(settings.model_copy(update={"revision": sha}), src,
                             {"hub": {"id": settings.path, "commit": sha}})
    if src == "s3":
        cid = s3model.resolve(settings.path, settings.endpoint_url, settings.region, field)
        if settings.revision and settings.revision != cid:
            from ..errors import ConfigError

            raise ConfigError(f"{field} {settings.path!r}: revision {settings.revision!r} is not the content "
                              f"under the prefix now ({cid}): drop the revision or restore the checkpoint")
        return ResolvedModel(settings.model_copy(update={"revision": cid}), src, {"checkpoint_hash": cid})
    return ResolvedModel(settings, src, {})


def pinned(settings: Any) -> ResolvedModel:
    """``resolve_model`` without asking again when the settings are pinned already (the plan's)."""
    src = source_of(settings)
    if src == "hub" and hub.is_commit(settings.revision):
        return ResolvedModel(settings, src, {"hub": {"id": settings.path, "commit": settings.revision}})
    if src == "s3" and settings.revision:
        return ResolvedModel(settings, src, {"checkpoint_hash": settings.revision})
    return resolve_model(settings)


def materialize(settings: Any) -> Any:
    """The settings with ``path`` a local directory (actor side)."""
    src = source_of(settings)
    if src == "hub":
        sha = settings.revision if hub.is_commit(settings.revision) else hub.resolve(settings.path, settings.revision)
        return settings.model_copy(update={"path": str(hub.snapshot(settings.path, sha)), "revision": sha})
    if src == "s3":
        local = s3model.fetch(settings.path, settings.revision, settings.endpoint_url, settings.region)
        return settings.model_copy(update={"path": str(local), "revision": None})
    return settings


__all__ = ["ResolvedModel", "materialize", "pinned", "resolve_model", "source_of"]
