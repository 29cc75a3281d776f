"""Driver-side planning: read the dataset, build every request, cut shards,
and find which shards the result store already holds.

All of this happens before any actor starts, so a bad sample (a field the
template needs is missing) fails fast, naming the sample, with nothing
half-written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters.prompt import PromptAdapter
from ..config.models import RunSpec
from ..core.gcpause import gc_paused
from ..core.types import Sample
from ..data.readers import forget_last_read, load_samples, read_records
from ..errors import ConfigError, ModelSourceError
from ..store.base import ResultStore
from ..store.layout import RunLayout
from .shard_rows import agent_metadata_fn, shard_row


@dataclass(frozen=True)
class RunIdentity:
    """What names a run and what it ran, worked out once, when it is planned
    (``of``): the merge and the result read these, and do not hash the
    checkpoint or the dataset again."""

    run_fp: str
    gen_fp: str
    dataset_fp: str
    #: the model's identity (``pipeline.identity.model_identity``), secrets included: for reading, never for writing
    model: dict[str, Any]
    #: the same, secrets redacted: what the result records as its backend
    backend: dict[str, Any]
    #: the run's config, secrets redacted
    config: dict[str, Any]

    @classmethod
    def of(cls, spec: RunSpec) -> RunIdentity:
        from ..core.secrets import redact
        from .identity import (
            dataset_fingerprint,
            generation_fingerprint,
            model_identity,
            redacted_config,
            run_fingerprint,
        )

        model = model_identity(spec)
        return cls(run_fp=run_fingerprint(spec), gen_fp=generation_fingerprint(spec),
                   dataset_fp=dataset_fingerprint(spec), model=model, backend=redact(model),
                   config=redacted_config(spec))

    @property
    def provenance(self) -> Any:
        """The checkpoint's provenance.json, when it has one (also in the fingerprint)."""
        return self.model.get("provenance")


@dataclass
class Plan:
    spec: RunSpec
    store: ResultStore
    n_samples: int
    layout: RunLayout
    n_shards: int
    identity: RunIdentity
    #: pending shard -> its row for the pipeline: ``payload`` and ``samples``, packed (``actors.shard``), or,
    #: planned in Ray tasks, ``ref``, where the object store holds them
    shard_payloads: dict[int, dict[str, Any]] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)
    cached_generations: set[int] = field(default_factory=set)
    #: true when some shard was pending at planning time (there was work to do)
    shard_payloads_built: bool = False
    #: the process that read each part of the dataset, in parallel: the driver (the first part) and the Ray
    #: tasks' workers (empty: the driver read it whole, alone)
    plan_readers: list[int] = field(default_factory=list)

    @property
    def planned_in_tasks(self) -> int:
        """Parts the dataset was read and validated in (0: the driver alone)."""
        return len(self.plan_readers)

    def row(self, shard: int) -> dict[str, Any]:
        """The pipeline's input row of a pending shard: a reference to its payload and samples in Ray's object
        store (put there now if the driver built them), and which run it is."""
        from ..actors.shard import REF

        planned = self.shard_payloads[shard]
        if REF not in planned:
            import ray

            planned = {REF: ray.put(planned)}
        return {"shard": shard, "run": self.layout.run_fp, **planned}

    @property
    def pending(self) -> list[int]:
        return [i for i in range(self.n_shards) if i not in self.done]

    @property
    def needs_generation(self) -> list[int]:
        return [i for i in self.pending if i not in self.cached_generations]

    @property
    def n_requests(self) -> int:
        return self.n_samples * self.spec.repeats


DATA_ROOT_ENV = "AUDITKIT_RAY_DATA_ROOT"


def check_data_root(spec: RunSpec) -> None:
    """With ``AUDITKIT_RAY_DATA_ROOT`` set (by whoever runs the cluster), every
    data file a config names must resolve inside it: no ``../`` or absolute
    path, no symlink, leads out."""
    import os

    root = os.environ.get(DATA_ROOT_ENV)
    if not root:
        return
    base = Path(root).resolve()
    named = [("dataset.path", spec.dataset.path)] if spec.dataset.path else []
    if spec.dataset.hub and Path(spec.dataset.hub).expanduser().is_dir():
        named.append(("dataset.hub", spec.dataset.hub))
    if spec.prompt.few_shot and spec.prompt.few_shot.path:
        named.append(("prompt.few_shot.path", spec.prompt.few_shot.path))
    if spec.retrieval and spec.retrieval.corpus:
        named.append(("retrieval.corpus", spec.retrieval.corpus))
    if spec.model.stored_inputs():
        named.append(("model.path", spec.model.stored_inputs()))
    for field_name, value in named:
        if value.startswith("s3://"):
            continue  # object storage: the bucket policy decides what may be read
        resolved = Path(value).resolve()  # as the reader will open it (relative to the working directory)
        if resolved != base and base not in resolved.parents:
            raise ConfigError(f"{field_name} {value!r} resolves to {resolved}, outside the data root {base} "
                              f"({DATA_ROOT_ENV})")


def pin_model(spec: RunSpec, pins: dict[tuple, str] | None = None) -> RunSpec:
    """The spec with its model's source pinned (``sources.resolve_model``: a Hub revision to its commit, an
    s3:// prefix to its content hash, in ``model.revision``), before any actor starts; every actor loads
    what it names. ``pins`` is shared by the plans of one call: a sweep resolves a branch once, not per cell,
    so its cells cannot load two commits of it."""
    from ..sources import resolve_model, source_of

    m = spec.model
    src = source_of(m)
    if src in (None, "local"):
        return spec
    key = (src, m.path, m.revision, getattr(m, "endpoint_url", None))
    if pins is None or key not in pins:
        rev = resolve_model(m).settings.revision
        if pins is not None:
            pins[key] = pins[(src, m.path, rev, getattr(m, "endpoint_url", None))] = rev
    else:
        rev = pins[key]
    return spec.model_copy(update={"model": m.model_copy(update={"revision": rev})})


def preflight(spec: RunSpec) -> None:
    """Checks that are cheap on the driver and expensive to discover in an actor."""
    check_store(spec)
    check_data_root(spec)
    check_checkpoint(spec)
    corpus = spec.retrieval.corpus if spec.retrieval is not None else None
    if corpus and "://" not in corpus and not Path(corpus).is_file():  # before the retrieval actors start
        check_corpus(spec)  # raises: a missing file or a folder, named
    stored = spec.model.stored_inputs()
    if stored and not Path(stored).exists():
        raise ConfigError(f"model.path {stored!r}: no such file or directory of stored generations")


#: stores checked by this process (a sweep's runs share one: it is asked once)
_CHECKED_STORES: set[tuple] = set()


def check_store(spec: RunSpec) -> None:
    """The run's result store can be used (``ResultStore.check``), before any work: a store path that is a file
    or an S3 endpoint that does not answer fails in seconds, not after Ray's start and the model's load."""
    from ..store.base import open_store

    key = tuple(spec.store.model_dump(mode="json").items())
    if key not in _CHECKED_STORES:
        open_store(spec.store).check()
        _CHECKED_STORES.add(key)


def check_checkpoint(spec: RunSpec) -> None:
    """A local checkpoint directory is there and is an HF-format one; a ModelSourceError naming it otherwise
    (a sweep fails that cell alone: ``model_problem``)."""
    from ..sources import source_of

    m = spec.model
    if source_of(m) == "local":
        p = Path(m.checkpoint_path()).expanduser()
        if not p.exists():
            raise ModelSourceError(f"model.path {m.path!r}: no such directory ({p.absolute()})")
        if not p.is_dir():
            raise ModelSourceError(f"model.path {m.path!r}: not a directory (a checkpoint is a directory with "
                                   "config.json and its weights)")
        if not (p / "config.json").is_file():
            raise ModelSourceError(f"model.path {m.path!r}: not an HF-format checkpoint (no config.json)")
        if not any(f.is_file() for pattern in WEIGHTS for f in p.glob(pattern)):
            raise ModelSourceError(f"model.path {m.path!r}: no weights in the checkpoint (no "
                                   f"{', '.join(WEIGHTS[:3])} ... file beside its config.json)")


#: the files that hold a checkpoint's weights (one of them must be there: transformers' and vLLM's formats)
WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.h5", "*.msgpack", "*.gguf")


def model_problem(spec: RunSpec, pins: dict[tuple, str] | None = None) -> tuple[RunSpec, str | None]:
    """The spec with its model pinned (``pin_model``) and None; or, when its checkpoint cannot be found or
    pinned, the spec as it was and the one-line reason (a sweep's cell that fails before it starts)."""
    try:
        pinned_spec = pin_model(spec, pins)
        check_checkpoint(pinned_spec)
    except ModelSourceError as exc:
        return spec, str(exc)
    return pinned_spec, None


def _few_shot_pool(spec: RunSpec, samples: list[Sample], raws: list[dict]) -> list[tuple[str, dict]]:
    fs = spec.prompt.few_shot
    if not fs or fs.n == 0:
        return []
    if fs.path:
        d = spec.dataset  # an s3:// examples file is read on the dataset's endpoint
        return [(f"fewshot-{i}", rec) for i, (_, rec) in
                enumerate(read_records(fs.path, endpoint_url=d.endpoint_url, region=d.region,
                                             field="prompt.few_shot.path"))]
    return [(s.id, r) for s, r in zip(samples, raws)]


def rows_key(spec: RunSpec) -> str:
    """Runs with the same key have the same rows (``shard_row``): the same
    dataset (content and selection), prompt, retrieval, repeats and shard
    size, read for a backend of the same kind. A sweep over checkpoints
    reads and validates its dataset once (``build_plan(shared=...)``)."""
    import json

    from .identity import dataset_identity

    return json.dumps({"dataset": dataset_identity(spec), "prompt": spec.prompt.model_dump(mode="json"),
                       "retrieval": spec.retrieval.model_dump(mode="json") if spec.retrieval else None,
                       "repeats": spec.repeats, "shard_size": spec.shard_size, "seed": spec.seed,
                       "agent_metadata": agent_metadata_fn(spec) is not None,
                       # shard_row checks the images against the backend: a text-only one never reuses the rows
                       "images": [spec.model.takes_images(), spec.model.fetches_image_urls()]},
                      sort_keys=True, default=str)


@gc_paused()
def build_plan(spec: RunSpec, store: ResultStore, *, in_tasks: bool = False, address: str | None = None,
               shared: dict[str, Any] | None = None, pins: dict[tuple, str] | None = None) -> Plan:
    """Read and validate the dataset, build every request, cut shards.

    ``in_tasks``: a large JSON Lines or Parquet dataset (``execution.plan_tasks``) is
    read, validated and cut in parts at once, the first on the driver and
    each other in a Ray task, starting Ray (``address``) if needed; the
    driver then checks sample ids across parts.
    Either way the whole dataset is validated before anything runs, and the
    plan (and any error) is the one the driver alone would have built.

    ``shared``: a dict kept over the plans of one call (a sweep, ``evaluate_many``):
    runs with the same ``rows_key`` share one reading of the dataset and
    the rows it gave (bytes, never changed), not a copy each."""
    spec = pin_model(spec, pins)
    preflight(spec)
    size = spec.shard_size
    identity = RunIdentity.of(spec)
    layout = RunLayout(identity.run_fp, identity.gen_fp, size)
    done_names = set(store.list(layout.shards_dir))
    gen_names = set(store.list(layout.gen_dir))
    key = rows_key(spec) if shared is not None else None

    def planned(n_samples: int, payloads: dict[int, dict[str, bytes]], readers: list[int]) -> Plan:
        n_shards = math.ceil(n_samples / size)
        plan = Plan(spec=spec, store=store, n_samples=n_samples, layout=layout, n_shards=n_shards, identity=identity,
                    plan_readers=readers)
        plan.done = {i for i in range(n_shards) if RunLayout.shard_name(i) in done_names}
        plan.cached_generations = {i for i in range(n_shards) if RunLayout.shard_name(i) in gen_names}
        plan.shard_payloads = {i: p for i, p in payloads.items() if i not in plan.done}
        plan.shard_payloads_built = bool(plan.shard_payloads)
        if shared is not None:
            shared.setdefault(key, (n_samples, payloads, readers))
        return plan

    if shared is not None and key in shared:
        return planned(*shared[key])
    # a plan whose rows other runs may share builds every shard's row, even those this run has stored
    stored = (lambda i: False) if shared is not None else (lambda i: RunLayout.shard_name(i) in done_names)
    tasks = plan_task_count(spec) if in_tasks else 0
    if tasks:
        from .plan_tasks import plan_in_tasks

        got = plan_in_tasks(spec, stored, tasks, address)
        if got is not None:
            return planned(*got)

    where: dict[str, str] = {}
    samples, raws, pool = read_samples(spec, where)
    adapter = PromptAdapter(spec.prompt, spec.dataset, spec.seed, pool)
    n_shards = math.ceil(len(samples) / size)
    agent_meta = agent_metadata_fn(spec)
    payloads: dict[int, dict[str, bytes]] = {}
    # Build every prompt now (fails fast on a bad sample), keep payloads of pending shards.
    for i in range(n_shards):
        lo, hi = i * size, (i + 1) * size
        row = shard_row(spec, adapter, agent_meta, i, list(zip(samples[lo:hi], raws[lo:hi])), keep=not stored(i),
                        locations=where)
        if row is not None:
            payloads[i] = row
    return planned(len(samples), payloads, [])


def unplanned(spec: RunSpec) -> Plan:
    """A placeholder plan for a run that could not be planned (its checkpoint is missing: ``model_problem``):
    no shards, and a fingerprint of its configuration alone (the real one needs the checkpoint's files)."""
    from ..core.fingerprint import fingerprint
    from ..store.base import open_store
    from .identity import redacted_config

    config = redacted_config(spec)
    fp = fingerprint({"unplanned": config})
    identity = RunIdentity(run_fp=fp, gen_fp=fp, dataset_fp="", model={}, backend={}, config=config)
    return Plan(spec=spec, store=open_store(spec.store), n_samples=0, layout=RunLayout(fp, fp, spec.shard_size),
                n_shards=0, identity=identity)


def mark_interrupted(plans: list[Plan]) -> None:
    """Record in each run's ``manifest.json`` that it stopped on a signal (a reader such as the viewer then
    shows it interrupted, not running); best effort: a store that cannot be written is left as it is. The run's
    ``finish`` rewrites the manifest when it is resumed and completes."""
    import json
    import time

    for p in plans:
        try:
            p.store.replace(p.layout.manifest, json.dumps({
                "name": p.spec.name, "fingerprint": p.layout.run_fp, "generation_fingerprint": p.layout.gen_fp,
                "n_shards": p.n_shards, "shard_size": p.layout.shard_size, "n_samples": p.n_samples,
                "state": "interrupted", "interrupted_at": time.time()}, indent=2).encode())
        except Exception:  # noqa: BLE001 - the interrupt's own message matters more
            continue


def read_samples(spec: RunSpec, locations: dict[str, str] | None = None
                 ) -> tuple[list[Sample], list[dict], list[tuple[str, dict]]]:
    """The run's samples and raw records, the probe pack applied when the run has one, and the few-shot
    pool (drawn from the samples as read, never from probes); ``locations``: each sample's ``file:line``."""
    samples, raws = load_samples(spec.dataset, locations)
    pool = _few_shot_pool(spec, samples, raws)
    if spec.probes is not None:
        from ..probes.pack import apply_probes

        samples, raws = apply_probes(spec.probes, samples, raws, spec.dataset.input_field)
    return samples, raws, pool


def check_dataset(spec: RunSpec) -> int:
    """Read the run's dataset and build every prompt, as planning does, without a store or Ray: the
    number of samples, or the error a run would stop with (a missing, empty or truncated file, a
    duplicate id, invalid UTF-8, a sample without a field its prompt needs)."""
    where: dict[str, str] = {}
    samples, raws, pool = read_samples(spec, where)
    adapter = PromptAdapter(spec.prompt, spec.dataset, spec.seed, pool)
    agent_meta = agent_metadata_fn(spec)
    size = max(1, spec.execution.shard_size or 64)
    for i in range(math.ceil(len(samples) / size)):
        lo, hi = i * size, (i + 1) * size
        shard_row(spec, adapter, agent_meta, i, list(zip(samples[lo:hi], raws[lo:hi])), keep=False, locations=where)
    return len(samples)


def check_corpus(spec: RunSpec) -> int:
    """Read the run's retrieval corpus as the retrieval actors will: its number of documents, or the error
    they would stop with (missing, empty, a folder, a line that is no document)."""
    from ..rag import load_corpus

    return len(load_corpus(spec.retrieval.corpus).docs) if spec.retrieval and spec.retrieval.corpus else 0


def build_plans(specs: list[RunSpec], *, in_tasks: bool = False, address: str | None = None,
                pins: dict[tuple, str] | None = None) -> list[Plan]:
    """Each run's plan (``build_plan``); runs that read one dataset the same
    way (``rows_key``: a sweep over checkpoints or quantisations) read and
    validate it once and share its rows. ``pins``: models pinned already (``pin_model``'s)."""
    from collections import Counter

    from ..store.base import open_store

    pins = {} if pins is None else pins
    specs = [pin_model(s, pins) for s in specs]
    for s in specs:
        preflight(s)  # before rows_key hashes the dataset: a path outside the data root is not even read
    keys = [rows_key(s) for s in specs]
    twice = {k for k, c in Counter(keys).items() if c > 1}
    shared: dict[str, Any] = {}
    try:
        return [build_plan(s, open_store(s.store), in_tasks=in_tasks, address=address,
                           shared=shared if k in twice else None, pins=pins) for s, k in zip(specs, keys)]
    finally:
        forget_last_read()  # planned: the run does not hold its dataset's records


#: a JSON Lines or Parquet dataset at least this large is planned in Ray tasks when ``execution.plan_tasks`` is
#: unset. Below it, the second or so a task's worker process takes to start eats what splitting the work saves.
PLAN_IN_TASKS_BYTES = 64 << 20


def plan_task_count(spec: RunSpec) -> int:
    """Parts that plan this run in parallel (the driver one, Ray tasks the
    others): 0 for the driver alone, -1 for one per CPU of the cluster.
    Only a JSON Lines or Parquet dataset whose samples are read
    independently of each other qualifies: ``dataset.limit`` and few-shot
    examples (drawn from a pool) and a probe pack keep the plan on the driver."""
    from ..data.readers import dataset_location, detect_format, parquet_files

    want = spec.execution.plan_tasks
    if want is not None and want < 2:
        return 0
    d = spec.dataset
    fs = spec.prompt.few_shot
    if d.hub or d.limit or (fs and fs.n) or spec.probes is not None:
        return 0
    try:
        path = dataset_location(d)
        if not path.exists():
            return 0
        kind = detect_format(path, d.format)
        if kind not in ("jsonl", "parquet") or (kind == "jsonl" and not path.is_file()):
            return 0
        files = parquet_files(path) if kind == "parquet" else [path]
        if want is None and sum(f.size() for f in files) < PLAN_IN_TASKS_BYTES:
            return 0
    except Exception:  # noqa: BLE001 - the driver's own reader reports a bad path or format
        return 0
    return want if want is not None else -1
