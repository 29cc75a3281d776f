"""Datasets from the Hugging Face Hub (``dataset.hub: org/name``) or a local
dataset repository (``dataset.hub: ./folder`` holding data files), read the
way ``datasets.load_dataset`` reads them (its builder: resolve, download and
prepare into the datasets cache, then the split).

A Hub dataset is read once per process and its revision resolved to the
commit sha the builder loaded (with ``HF_HUB_OFFLINE=1``, the cached one), so
the dataset fingerprint and the samples come from one resolution. A local
repository has no commits: its identity is its files' content hash
(``pipeline.identity``).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from ..errors import DataError, require

_LOCK = threading.Lock()
_LOADED: dict[tuple, tuple[str | None, list[tuple[str, dict]]]] = {}
_SHA = re.compile(r"^[0-9a-f]{40}$")


def local_repository(spec: Any) -> Path | None:
    """The folder ``dataset.hub`` names, when it is a local dataset repository."""
    p = Path(spec.hub).expanduser()
    return p if p.is_dir() else None


def _key(spec: Any) -> tuple:
    env = tuple(os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_HOME", "HF_DATASETS_CACHE", "HF_ENDPOINT"))
    return (spec.hub, spec.config, spec.split, spec.revision, *env)


def _failure(spec: Any, exc: Exception) -> DataError:
    """One line naming the source and what to do; the token (HF_TOKEN) never appears in it."""
    from ..core.secrets import scrub_text

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    token = os.environ.get("HF_TOKEN")
    if token:
        text = text.replace(token, "***")
    text = scrub_text(text)
    name = type(exc).__name__
    hub = spec.hub
    if "Revision" in text and ("doesn't exist" in text or "not found" in text.lower()):
        return DataError(f"dataset.revision {spec.revision!r}: no such revision of Hub dataset {hub!r}")
    if isinstance(exc, ConnectionError) or "OfflineModeIsEnabled" in text or "Couldn't reach" in text:
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        # the cause (refused, timed out, a proxy) is what a user on a cluster needs to act on
        why = "HF_HUB_OFFLINE is set" if offline else f"the Hub cannot be reached ({name}: {text[:200]})"
        return DataError(f"dataset.hub {hub!r}: not in the local datasets cache and {why}; pre-fill the cache on a "
                         "machine with network (docs/models-and-data.md) or name a local copy")
    if name == "DatasetNotFoundError" and "gated" in text:
        return DataError(f"dataset.hub {hub!r}: a gated dataset; set HF_TOKEN to a token that has access")
    if name == "DatasetNotFoundError":
        return DataError(f"dataset.hub {hub!r}: no such dataset on the Hub (or it is private: set HF_TOKEN)")
    if "BuilderConfig" in text or ("config" in text.lower() and spec.config):
        return DataError(f"dataset.config {spec.config!r}: {text}")
    return DataError(f"dataset.hub {hub!r}: cannot load ({name}: {text})")


def _load(spec: Any) -> tuple[str | None, list[tuple[str, dict]]]:
    datasets = require("datasets", "datasets")
    quiet = datasets.is_progress_bar_enabled()
    if quiet:
        datasets.disable_progress_bars()  # the library never prints; its bars would reach the terminal
    try:
        return _read(datasets, spec)
    finally:
        if quiet:
            datasets.enable_progress_bars()


def _read(datasets: Any, spec: Any) -> tuple[str | None, list[tuple[str, dict]]]:
    local = local_repository(spec)
    if local is not None and spec.revision:
        raise DataError(f"dataset.revision {spec.revision!r}: {spec.hub} is a local dataset repository, which has "
                        "no revisions; drop dataset.revision")
    try:
        builder = datasets.load_dataset_builder(str(local) if local else spec.hub, spec.config,
                                                revision=spec.revision,
                                                cache_dir=os.environ.get("HF_DATASETS_CACHE") or None)
        revision = None if local is not None else builder.hash
        if local is None and spec.revision and _SHA.match(spec.revision) and revision != spec.revision:
            raise DataError(f"dataset.revision {spec.revision!r}: not in the local datasets cache of {spec.hub!r} "
                            f"(it holds {revision}); pre-fill the cache with that revision")
        builder.download_and_prepare()
        splits = list(builder.info.splits or {})
        split = spec.split
        if split is None:
            if len(splits) != 1:
                raise DataError(f"dataset.hub {spec.hub!r}: splits {splits}; set dataset.split")
            split = splits[0]
        elif splits and split not in splits:
            raise DataError(f"dataset.split {split!r}: no such split of {spec.hub!r} (have {splits})")
        ds = builder.as_dataset(split=split)
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets and huggingface_hub raise many types
        raise _failure(spec, exc) from None
    where = f"{spec.hub}[{split}]"
    return revision, [(f"{where} row {i}", dict(rec)) for i, rec in enumerate(ds.to_list())]


def _loaded(spec: Any) -> tuple[str | None, list[tuple[str, dict]]]:
    key = _key(spec)
    with _LOCK:
        got = _LOADED.get(key)
        if got is None:
            got = _LOADED[key] = _load(spec)
    return got


def hub_records(spec: Any) -> list[tuple[str, dict]]:
    """(where, record) of the split ``dataset.split`` (or the only one) of a hub dataset."""
    return list(_loaded(spec)[1])


def hub_revision(spec: Any) -> str | None:
    """The commit sha the dataset was read at; None for a local dataset repository
    (its identity is its content hash)."""
    return _loaded(spec)[0]
