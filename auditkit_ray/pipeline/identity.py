"""What enters a run's fingerprints.

Two fingerprints per run: the *generation* fingerprint
(model identity, backend settings, prompt/adapter, generation settings,
the dataset as the model sees it, seed, repeat index, package version) keys
stored outputs; the *run* fingerprint adds the whole dataset (targets
included), annotators and metric identities. Changing a metric, or fixing a
target the model never sees, therefore re-scores stored generations without
generating again.
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .._version import __version__
from ..config.models import RunSpec
from ..core.fingerprint import fingerprint
from ..core.limits import MAX_HASHED_FILES
from ..core.registry import build_metric
from ..core.shown import shown_text
from ..errors import DataError

_HASH_CACHE: dict[tuple, str] = {}


def hash_path(path: str | os.PathLike, patterns: tuple[str, ...] = ("*",)) -> str:
    """SHA-256 of a file's bytes (its name is not part of it: the same bytes under two names are one
    content, as ``sha256sum`` sees them), or over a directory's files (relative names and contents,
    sorted). Cached per (path, size, mtime) within the process."""
    p = Path(path)
    try:
        if p.is_file():
            files = [p]
            root = None
        elif p.is_dir():
            files = sorted(set(_files_under(p, patterns)))
            root = p
        else:
            return "missing:" + str(path)
        key = (root is None, *((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))
        if key in _HASH_CACHE:
            return _HASH_CACHE[key]
        h = hashlib.sha256()
        for f in files:
            if root is not None:
                h.update(str(f.relative_to(root)).encode())
                h.update(b"\0")
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    except OSError as exc:  # a folder that cannot be read through (/, a file without permission)
        raise DataError(f"{shown_text(path, 200)}: cannot be read for its fingerprint ("
                        f"{shown_text(exc.filename or path, 120)}: {exc.strerror or exc})") from None
    digest = h.hexdigest()
    _HASH_CACHE[key] = digest
    return digest


def local_checkpoint_identity(path: str | os.PathLike) -> dict[str, Any]:
    """A local checkpoint directory as its content: its files' hash and its provenance record, never the
    path it was named by (``models/x`` from its folder and ``../models/x`` from another are one model)."""
    ident: dict[str, Any] = {
        "checkpoint_hash": hash_path(path, ("*.json", "*.safetensors", "*.bin", "*.model", "*.txt"))}
    prov = Path(path) / "provenance.json"
    if prov.is_file():
        try:
            ident["provenance"] = json.loads(prov.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            ident["provenance"] = {"unreadable": True}
    return ident


def _files_under(folder: Path, patterns: tuple[str, ...]) -> Any:
    """The files a folder's hash covers, at most ``MAX_HASHED_FILES`` (a folder of more is no single input:
    ``/`` named by mistake is refused at once, not walked for minutes)."""
    n = 0
    for pat in patterns:
        for f in folder.rglob(pat):
            if f.is_file() and not f.name.startswith("."):
                n += 1
                if n > MAX_HASHED_FILES:
                    raise DataError(f"{shown_text(folder, 200)}: a folder of more than {MAX_HASHED_FILES:,} files "
                                    "(the limit for an input hashed into the fingerprint); name the file or a "
                                    "smaller folder")
                yield f


def model_identity(spec: RunSpec) -> dict[str, Any]:
    """The model as the fingerprints see it: the backend, its settings that change outputs, and what the
    checkpoint or stored outputs hold (a content hash, a pinned commit, an ETag manifest), never where
    they were named from: the one function that says which loaded models are the same."""
    if _SHARED is None:
        return _model_identity(spec)
    key = ("model", spec.model.model_dump_json())
    if key not in _SHARED:
        _SHARED[key] = _model_identity(spec)
    return _SHARED[key]


def _model_identity(spec: RunSpec) -> dict[str, Any]:
    from ..sources import pinned

    m = spec.model
    source = pinned(m)  # a Hub id or an s3:// prefix: pinned by the plan already, else resolved here
    m = source.settings
    ident: dict[str, Any] = {"backend": m.type, "settings": m.settings_identity()}
    path, stored = m.checkpoint_path(), m.stored_inputs()
    if source.source == "s3":  # the content (the ETag manifest's hash), not the URI: one model under two URIs
        ident["settings"].pop("path", None)
        ident.update(source.identity)
    elif source.source == "hub":
        ident.update(source.identity)
    elif path:  # a local checkpoint directory: its files' content, whatever the path is relative to
        ident["settings"].pop("path", None)
        ident.update(local_checkpoint_identity(path))
    elif stored:  # stored outputs replayed: their content likewise
        ident["settings"].pop("path", None)
        ident["outputs_hash"] = hash_path(stored)
    return ident


#: where the dataset is, not what it holds: out of its identity (the same bytes locally and on S3 are one dataset)
_DATASET_SOURCE_FIELDS = {"path", "name", "hub", "config", "revision", "endpoint_url", "region"}


#: model, dataset and metric identities by setting, while ``identities_shared`` is in effect (None: not)
_SHARED: dict[tuple, Any] | None = None


@contextmanager
def identities_shared() -> Iterator[None]:
    """Within it, a model's, a dataset's and a list of metrics' identity is worked out once per setting: for
    fingerprinting every run of a sweep at once (``validate``), whose runs mostly read one dataset that does
    not change meanwhile. Outside it, every call looks at the files again."""
    global _SHARED
    outer, _SHARED = _SHARED, {} if _SHARED is None else _SHARED
    try:
        yield
    finally:
        _SHARED = outer


def dataset_identity(spec: RunSpec) -> dict[str, Any]:
    """The dataset's content hash and the selection over it (a probe pack applied to it included).
    A Hub dataset's content is its resolved commit sha (a local dataset repository's: its files'
    hash), with its config."""
    if _SHARED is None:
        return _dataset_identity(spec)
    key = ("dataset", spec.dataset.model_dump_json(),
           spec.probes.model_dump_json() if spec.probes is not None else None)
    if key not in _SHARED:
        _SHARED[key] = _dataset_identity(spec)
    return _SHARED[key]


def _dataset_identity(spec: RunSpec) -> dict[str, Any]:
    d = spec.dataset
    selection = d.model_dump(mode="json", exclude=_DATASET_SOURCE_FIELDS)
    if selection.get("images_field") is None:  # unset: the fingerprints of datasets without images stay as they were
        selection.pop("images_field", None)
    if spec.probes is not None:  # the probed dataset is another dataset; only when set, so others keep theirs
        from ..probes.pack import probe_identity

        selection["probes"] = probe_identity(spec.probes)
    if d.hub:
        from ..data.hub import hub_revision, local_repository

        revision = hub_revision(d)
        local = local_repository(d) if revision is None else None
        if local is not None:
            revision = hash_path(local)
        selection["config"] = d.config
        return {"content_hash": revision if local is not None else f"hub:{revision}", "revision": revision,
                "selection": selection}
    if d.path.startswith("s3://"):
        from ..data.readers import dataset_location

        loc = dataset_location(d)
        if not loc.exists():
            raise loc.not_found("dataset.path")
        out: dict[str, Any] = {"content_hash": loc.content_hash(), "selection": selection}
    else:
        out = {"content_hash": hash_path(d.path), "selection": selection}
    images = _images_identity(spec)
    if images is not None:
        out["images"] = images
    return out


#: below this size a local dataset file is scanned for image paths in chat messages (``_images_identity``)
_SCAN_BYTES = 64 << 20


_IMAGE_URLS: dict[tuple, bool] = {}


def _has_image_urls(p: Path) -> bool:
    """Whether a JSON (Lines) file's text holds a content part's ``"image_url"``; read once per (file, size,
    modification time), not once for each run of a sweep over it."""
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    if key not in _IMAGE_URLS:
        _IMAGE_URLS.clear()
        _IMAGE_URLS[key] = b'"image_url"' in p.read_bytes()
    return _IMAGE_URLS[key]


def _images_identity(spec: RunSpec) -> dict[str, Any] | None:
    """The local images the dataset's samples name (their bytes' hash): those of the images field, and
    those in chat messages' content parts. A dataset file of 64 MiB or more is read here only when it names
    an images field (the plan reads such a file in parallel tasks, not on the driver); below that the
    driver reads it for the plan anyway, once (``dataset_records`` keeps the last read)."""
    from ..data.images import images_identity
    from ..data.readers import dataset_records
    from ..errors import DataError

    d = spec.dataset
    p = Path(d.path)
    if not d.images_field:
        if d.path.startswith("s3://") or not p.is_file() or p.stat().st_size >= _SCAN_BYTES:
            return None
        if p.suffix.lower() in (".jsonl", ".ndjson", ".json") and not _has_image_urls(p):
            return None  # no content part in the text: nothing to parse for
        try:
            records = dataset_records(d)
        except DataError:
            return None  # an unreadable dataset fails its plan with its own message, not its fingerprint
    else:
        records = dataset_records(d)
    records = records[: d.limit] if d.limit else records
    if not d.images_field and not any(isinstance(rec.get(d.input_field), list) for _, rec in records):
        return None
    return images_identity(d, records)


def targets_seen(spec: RunSpec) -> bool:
    """Whether the targets can change what the model generates: a backend that reads them, a request
    built from them (log-likelihood, choices), few-shot examples (their answers are in the prompt), or a
    template that names them."""
    if spec.model.reads_targets():
        return True
    p = spec.prompt
    if p.request != "generate" or p.few_shot is not None:
        return True
    from ..adapters.prompt import placeholders

    names = {"target", "targets"} | ({spec.dataset.target_field} if spec.dataset.target_field else set())
    templates = [p.template or "{{ input }}", p.system or ""]
    if spec.retrieval is not None:
        templates += [spec.retrieval.template, spec.retrieval.context_template]
    return any(names & placeholders(t) for t in templates)


_VIEW_CACHE: dict[tuple, str | None] = {}


def _view_hash(spec: RunSpec, content_hash: str) -> str | None:
    """SHA-256 of the dataset's records without the target field, in order (after ``limit``); None when a
    record has no id of its own (its id would then be derived from its content, target included)."""
    d = spec.dataset
    key = (content_hash, d.target_field, d.id_field, d.limit, d.split, d.format)
    if key not in _VIEW_CACHE:
        from itertools import islice

        from ..core.fingerprint import canonical_json
        from ..data.readers import given_id, iter_dataset_records

        records = iter_dataset_records(d)  # one pass: a large file is not held whole
        records = islice(records, d.limit) if d.limit else records
        h = hashlib.sha256()
        digest: str | None = None
        for _, rec in records:
            if given_id(d, rec) is None:
                break
            h.update(canonical_json({k: v for k, v in rec.items() if k != d.target_field}).encode())
            h.update(b"\n")
        else:
            digest = h.hexdigest()
        _VIEW_CACHE[key] = digest
    return _VIEW_CACHE[key]


def model_view_identity(spec: RunSpec) -> dict[str, Any]:
    """What of the dataset the model sees: the whole dataset's identity, or, when the targets cannot change
    a generation (``targets_seen``), the records without their target field, so that fixing a target
    re-scores the stored generations instead of generating again."""
    full = dataset_identity(spec)
    if not spec.dataset.target_field or targets_seen(spec) or spec.dataset.hub:
        return full
    view = _view_hash(spec, str(full["content_hash"]))
    if view is None:
        return full
    out = {"records_without": spec.dataset.target_field, "content_hash": view, "selection": full["selection"]}
    if "images" in full:
        out["images"] = full["images"]
    return out


def metric_identities(spec: RunSpec) -> list[dict[str, Any]]:
    if _SHARED is None:
        return _metric_identities(spec)
    key = ("metrics", *(m.model_dump_json() for m in spec.metrics))
    if key not in _SHARED:
        _SHARED[key] = _metric_identities(spec)
    return _SHARED[key]


def _metric_identities(spec: RunSpec) -> list[dict[str, Any]]:
    out = []
    for m in spec.metrics:
        params = dict(m.params)
        if m.on is not None:
            params["on"] = m.on
        out.append(build_metric(m.name, params, m.as_).identity())
    return out


def _retrieval_identity(spec: RunSpec) -> dict[str, Any] | None:
    r = spec.retrieval
    if r is None:
        return None
    out = r.model_dump(mode="json", exclude={"corpus"})
    if r.corpus:
        out["corpus_hash"] = hash_path(r.corpus)
    return out


def _prompt_identity(spec: RunSpec) -> dict[str, Any]:
    """The prompt settings, a few-shot examples file as its content (as the dataset is), not its path."""
    out = spec.prompt.model_dump(mode="json")
    fs = spec.prompt.few_shot
    if fs is not None and fs.path:
        if fs.path.startswith("s3://"):
            from ..data.location import locate

            content = locate(fs.path, spec.dataset.endpoint_url, spec.dataset.region).content_hash()
        else:
            content = hash_path(fs.path)
        out["few_shot"] = {**out["few_shot"], "path": None, "content_hash": content}
    return out


#: generation settings that enter the identity only when set, so runs that never set them keep their fingerprints
_ONLY_WHEN_SET = {"ignore_eos": False, "max_new_tokens_field": None}


def _generation_identity(spec: RunSpec) -> dict[str, Any]:
    out = spec.generation.model_dump(mode="json")
    for key, default in _ONLY_WHEN_SET.items():
        if out.get(key) == default:
            out.pop(key, None)
    return out


def generation_payload(spec: RunSpec, repeat: int = 0) -> dict[str, Any]:
    return {
        "kind": "generation",
        "package_version": __version__,
        "model": model_identity(spec),
        "prompt": _prompt_identity(spec),
        "retrieval": _retrieval_identity(spec),
        "generation": _generation_identity(spec),
        "dataset": model_view_identity(spec),
        "seed": spec.seed,
        "repeat": repeat,
    }


def run_payload(spec: RunSpec, repeat: int = 0) -> dict[str, Any]:
    return {
        "kind": "run",
        "generation_fingerprint": fingerprint(generation_payload(spec, repeat)),
        "dataset": dataset_identity(spec),  # the targets the scores read, where the generation fingerprint hides them
        "annotators": [a.model_dump(mode="json") for a in spec.annotators],
        "metrics": metric_identities(spec),
        "package_version": __version__,
    }


def generation_fingerprint(spec: RunSpec, repeat: int = 0) -> str:
    return fingerprint(generation_payload(spec, repeat))


def run_fingerprint(spec: RunSpec, repeat: int = 0) -> str:
    return fingerprint(run_payload(spec, repeat))


def dataset_fingerprint(spec: RunSpec) -> str:
    return fingerprint(dataset_identity(spec))


def redacted_config(spec: RunSpec) -> dict[str, Any]:
    """The configuration a result records: secrets redacted, and its local inputs by the absolute paths they
    resolved to, so that a stored run read from another folder (``rescore``) finds them."""
    from ..config.paths import absolute_inputs
    from ..core.secrets import redact

    return redact(absolute_inputs(spec.model_dump(mode="json", by_alias=True)))
