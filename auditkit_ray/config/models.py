"""Strict pydantic models for run and sweep files.

``extra="forbid"`` everywhere, backends as a discriminated union on ``type``
built from the backend registry (a backend registered later rebuilds the
models, so a file using it validates at once).
Which fields change the numbers (and so enter the fingerprint) is decided in
``auditkit_ray.pipeline.identity``; execution, storage and experiment settings
do not.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, GetCoreSchemaHandler, field_validator, model_validator

from ..core.backends import on_backends_changed, settings_union
from ..core.limits import MAX_ACTORS, MAX_MATCH_INDEX, MAX_NEW_TOKENS, MAX_REPEATS, MAX_RESOURCE, MIN_RESOURCE
from ..core.strict import Strict
from .fields import InputPath, Name, Seed, Template

__all__ = [
    "AnnotatorSpec", "BackendSpec", "DatasetSpec", "DecisionSpec", "ExecutionSpec", "ExperimentSpec", "FewShotSpec",
    "GenerationSettings", "MetricSpec", "ModelAnnotator", "PromptSpec", "RegexAnnotator", "RetrievalSpec", "RunSpec",
    "Strict", "StoreSpec", "StripReasoningAnnotator", "SweepSpec", "TakeFirstAnnotator", "TrackingSpec",
]


# --------------------------------------------------------------------------- backends
class BackendSpec:
    """The ``model:`` block: the settings of one registered backend, a union
    discriminated by ``type`` and built from the backend registry
    (``auditkit_ray.core.backends``). Each backend's settings live beside its
    implementation, in ``auditkit_ray/backends/<type>.py``."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return handler.generate_schema(settings_union())


# --------------------------------------------------------------------------- data & prompt
class DatasetSpec(Strict):
    path: InputPath | None = Field(
        None, description="a local file or directory, or s3://bucket/key (an s3:// prefix for a Parquet directory)"
    )
    hub: str | None = Field(
        None, description="a Hugging Face Hub dataset id (org/name) or a local dataset repository folder, "
        "read with datasets.load_dataset (the 'datasets' extra); instead of path"
    )
    config: str | None = Field(None, description="hub: the dataset's configuration (subset)")
    revision: str | None = Field(
        None, description="hub: branch, tag or commit; resolved to a commit sha in the dataset fingerprint"
    )
    endpoint_url: str | None = Field(
        None, description="s3:// path: S3-compatible endpoint (default: AWS_ENDPOINT_URL)"
    )
    region: str | None = Field(None, description="s3:// path: S3 region (default: AWS_DEFAULT_REGION)")
    format: Literal["jsonl", "json", "parquet", "csv", "hf"] | None = Field(
        None, description="inferred from the file suffix when omitted; 'hf' for a datasets.save_to_disk directory"
    )
    split: str | None = None
    id_field: str = "id"
    input_field: str = "input"
    target_field: str | None = "target"
    choices_field: str | None = None
    images_field: str | None = Field(
        None, description="a field holding each sample's image (or list of images): a path relative to the dataset "
        "file, a data:image/...;base64 URL, or an https URL (backends that fetch URLs: api); the prompt becomes chat "
        "messages with the images first (docs/images.md)"
    )
    limit: int | None = Field(None, ge=1)
    name: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "DatasetSpec":
        if self.path and self.hub:
            raise ValueError("give either path (a file or s3:// URI) or hub (a Hub dataset id), not both")
        if not self.path and not self.hub:
            raise ValueError("name the dataset: path (a file or s3:// URI) or hub (a Hub dataset id)")
        if self.path and (self.config or self.revision):
            raise ValueError(f"{'config' if self.config else 'revision'} applies to a hub dataset only")
        if self.hub and self.format:
            raise ValueError("format applies to a path only (a hub dataset's format is the Hub's)")
        return self


class FewShotSpec(Strict):
    path: InputPath | None = Field(None, description="examples file; default: the dataset itself, excluding the sample")
    n: int = Field(0, ge=0)
    seed: Seed = 1234
    template: Template | None = Field(None, description="per-example template; default: prompt template + ' ' + target")
    separator: str = "\n\n"


class PromptSpec(Strict):
    template: Template | None = Field(
        None, description="'{{ field }}' placeholders over the sample's columns; default: '{{ input }}'"
    )
    system: str | None = None
    chat: bool = Field(False, description="send chat messages (the backend applies its chat template)")
    few_shot: FewShotSpec | None = None
    request: Literal["generate", "loglikelihood", "choices"] = Field(
        "generate",
        description="generate text; score the log-likelihood of 'continuation'; or score each of the sample's choices",
    )
    continuation: Template = Field(" {{ target }}",
                                   description="loglikelihood: the continuation scored after the prompt")
    choice_prefix: str = Field(" ", description="choices: put before each choice")


class RetrievalSpec(Strict):
    """Retrieve contexts for each sample and build the prompt from them (RAG).
    Retrieval runs in its own CPU actor pool; the contexts actually retrieved,
    with ranks and scores, are stored on the sample so retrieval metrics
    score what the generator saw."""

    retriever: Literal["bm25", "tfidf", "precomputed"] = "bm25"
    corpus: InputPath | None = Field(
        None,
        description="JSONL corpus: id, text, version, date, superseded_at, access_groups "
        "(not needed for 'precomputed')",
    )
    k: int = Field(5, ge=1, description="contexts put in the prompt")
    query_field: str | None = Field(None, description="dataset field used as the query (default: dataset.input_field)")
    order: Literal["rank", "reverse"] = Field(
        "rank", description="context order in the prompt: best first, or best last"
    )
    context_template: Template = Field(
        "[{{ n }}] {{ text }}", description="per context: n (citation number), id, text, title, score"
    )
    separator: str = "\n"
    template: Template = Field("Context:\n{{ contexts }}\n\nQuestion: {{ input }}\nAnswer:",
                          description="the prompt: 'contexts' plus the sample's fields")
    decision_date: str | None = Field(
        None, description="snapshot date for freshness checks (default: the sample's metadata.decision_date)"
    )
    params: dict[str, Any] = Field(default_factory=dict, description="retriever parameters (bm25: k1, b)")

    @model_validator(mode="after")
    def _corpus_needed(self) -> "RetrievalSpec":
        if self.retriever != "precomputed" and not self.corpus:
            raise ValueError(f"retriever {self.retriever!r} needs a corpus file")
        return self


class GenerationSettings(Strict):
    max_new_tokens: int = Field(32, ge=1, le=MAX_NEW_TOKENS)
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int | None = Field(None, ge=1)
    stop: list[str] = Field(default_factory=list)
    ignore_eos: bool = Field(False, description="generate to the length limit even past the end-of-sequence token "
                             "(benchmarks: the work is then known in advance); hf suppresses EOS until the limit, "
                             "vllm and api (vLLM's server) pass ignore_eos")
    max_new_tokens_field: str | None = Field(None, description="a dataset field holding each sample's own limit on "
                                             "new tokens (an integer from 1 to max_new_tokens)")


# --------------------------------------------------------------------------- annotators
class RegexAnnotator(Strict):
    type: Literal["regex"]
    name: Name
    pattern: str
    group: int | str = 1
    select: Literal["first", "last"] | Annotated[int, Field(ge=0, le=MAX_MATCH_INDEX)] = Field(
        "first", description="the match taken: first, last, or its index from 0")
    on: str = "text"
    invalid: str = "[invalid]"

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        import re

        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return v

    @model_validator(mode="after")
    def _group_exists(self) -> "RegexAnnotator":
        import re

        rx = re.compile(self.pattern)
        if rx.groups == 0:
            return self  # no groups: the whole match is the value
        if isinstance(self.group, int) and not 0 <= self.group <= rx.groups:
            raise ValueError(f"group {self.group} does not exist: the pattern has {rx.groups} group(s)")
        if isinstance(self.group, str) and self.group not in rx.groupindex:
            raise ValueError(f"group {self.group!r} is not a named group of the pattern")
        return self


class StripReasoningAnnotator(Strict):
    type: Literal["strip_reasoning"]
    name: Name
    tags: list[str] = Field(default_factory=lambda: ["think"])
    on: str = "text"


class TakeFirstAnnotator(Strict):
    type: Literal["take_first"]
    name: Name
    separator: str = "\n"
    on: str = "text"


class ModelAnnotator(Strict):
    """Extract the answer with a model (a judge backend): the prompt's
    ``{output}`` is replaced by the text read (``on``), ``{input}`` by the
    sample's input; the reply, stripped, is the extracted value. A failed
    request leaves no value (metrics on it score ``unknown``)."""

    type: Literal["model"]
    name: Name
    judge: dict[str, Any] = Field(description="a backend mapping, like a run's model (type: api | hf | ...)")
    prompt: str = (
        "Extract the final answer from this response. Reply with the answer only.\n\nResponse: {output}\n\nAnswer:"
    )
    max_new_tokens: int = Field(16, ge=1, le=MAX_NEW_TOKENS)
    on: str = "text"


AnnotatorSpec = Annotated[
    Union[RegexAnnotator, StripReasoningAnnotator, TakeFirstAnnotator, ModelAnnotator],
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------- metrics
class MetricSpec(Strict):
    name: str = Field(description="a registered metric name or 'package.module:Class'")
    params: dict[str, Any] = Field(default_factory=dict)
    on: str | None = Field(None, description="score 'raw', 'text' (default) or an annotator's output")
    as_: Name | None = Field(None, alias="as", description="name of the score in results")


def _metric_from_str(v: Any) -> Any:
    return {"name": v} if isinstance(v, str) else v


# --------------------------------------------------------------------------- execution
class ExecutionSpec(Strict):
    shard_size: int | None = Field(
        None,
        ge=1,
        description="samples per shard: the unit of batching, retry and resume "
        "(default: 256 for the `api` backend, whose answers are cached as they come; 1024 for `vllm`, whose engine "
        "batches a whole shard at once; 64 otherwise)",
    )
    generation_actors: int = Field(
        1,
        ge=1,
        le=MAX_ACTORS,
        description="actors that each load the model (each pinned to its GPUs when the "
        "cluster has them); a run starts no more of them than it has shards (a warning says so); a backend with no "
        "model (`echo`) has none: it runs in the scoring actors",
    )
    generation_shards_in_flight: int | None = Field(
        None, ge=1, description="shards one generation actor works on at once (default: 4 for the `api` backend, whose "
        "requests share its max_concurrency, 1 for models in the actor)")
    scoring_actors: int = Field(1, ge=1, le=MAX_ACTORS, description="CPU actors for deterministic checks")
    judge_actors: int = Field(1, ge=1, le=MAX_ACTORS, description="actors for judge metrics (their own pool)")
    oracle_actors: int = Field(1, ge=1, le=MAX_ACTORS,
                               description="CPU actors for agent outcome oracles (their own pool)")
    retrieval_actors: int = Field(1, ge=1, le=MAX_ACTORS, description="CPU actors for the retriever (their own pool)")
    max_shard_retries: int = Field(3, ge=0)
    shard_timeout_s: float | None = Field(None, gt=0)
    cell_retries: int = Field(
        1, ge=0, description="sweeps: times a failed model cell is started again when a retry can help (an actor "
        "or node lost, an engine that died); a configuration error or a model that cannot load is not retried")
    load_timeout_s: float | None = Field(
        None, gt=0, description="a model load that takes longer fails its run (in a sweep, its cell) and frees its "
        "GPUs; for backends that load in a thread of their own (every built-in one but `vllm`)")
    max_cell_s: float | None = Field(
        None, gt=0, description="sweeps: wall-clock budget of one model cell; on expiry the cell fails, and the shards "
        "it finished are kept for the next attempt")
    cell_order: Literal["pack", "fifo"] = Field(
        "pack", description="sweeps: `pack` starts the cells needing most GPUs first and backfills smaller ones into "
        "free GPUs (a waiting large cell is passed over a bounded number of times); `fifo` keeps the file's order "
        "and waits")
    plan_tasks: int | None = Field(
        None, ge=0, le=MAX_ACTORS,
        description="parts a JSON Lines or Parquet dataset is read, validated and sharded in, in parallel, "
        "before the run starts: the driver reads the first, a Ray task each of the others (default: one per CPU of the "
        "cluster for 64 MiB of files or more, else the driver alone; 0 or 1: the driver alone). `dataset.limit` and "
        "few-shot examples keep it on the driver")
    num_cpus: float | None = Field(None, ge=0, le=MAX_RESOURCE, description="for `ray.init` when Ray starts locally")
    num_gpus: float | None = Field(None, ge=0, le=MAX_RESOURCE,
                                   description="logical GPUs for `ray.init` when Ray starts locally")

    @field_validator("num_cpus", "num_gpus")
    @classmethod
    def _resource(cls, v: float | None) -> float | None:
        if v is not None and 0 < v < MIN_RESOURCE:
            raise ValueError(f"{v!r} is below {MIN_RESOURCE}, the smallest amount of a resource Ray counts "
                             "(0 for none)")
        return v
    direct: bool | None = Field(
        None, description="run the shards without Ray Data: straight to the generation actors, scored in the "
        "driver (default: for a run of at most 20,000 pending samples whose metrics are all deterministic checks, "
        "without retrieval, outside a sweep; on a small run it saves the pipeline's own processes)")
    resident: bool | None = Field(
        None, description="keep the generation actors loaded after the run, for the next run of the same model "
        "(resident engines; `auditkit-ray status` lists them, `evict` frees them). Default: on for a cluster on "
        "this machine, off for a cluster at an address (docs/cluster.md)")


class StoreSpec(Strict):
    path: InputPath = Field("results", description="result store root: a local directory or s3://bucket/prefix")
    endpoint_url: str | None = Field(None, description="S3-compatible endpoint (default: AWS_ENDPOINT_URL)")
    region: str | None = Field(None, description="S3 region (default: AWS_DEFAULT_REGION)")
    connect_timeout_s: float = Field(5.0, gt=0, le=600, description="s3://: seconds to wait for the endpoint to "
                                     "accept a connection; a run checks its store first and fails after one such "
                                     "wait when nothing answers")
    retries: int = Field(4, ge=0, le=20, description="s3://: retries of a request that could not connect or was "
                         "throttled (boto3's standard mode), once the store has answered")


class TrackingSpec(Strict):
    index: bool = Field(True, description="record the run in the ExperimentDB (SQLite index)")
    db: InputPath | None = Field(
        None, description="ExperimentDB path (default: $AUDITKIT_RAY_DB or ~/.auditkit-ray/experiments.sqlite)"
    )
    mlflow_uri: str | None = Field(None, description="mirror the run to this MLflow tracking URI (e.g. sqlite:///mlflow.db)")
    mlflow_experiment: str = "auditkit-ray"
    mlflow_artifact_location: str | None = Field(
        None,
        description="artifact root for a new MLflow experiment (default: the server's; ./mlruns for a local "
        "SQLite store)",
    )


class ExperimentSpec(Strict):
    name: Name | None = None
    tags: dict[str, str] = Field(default_factory=dict)


class ProbeSpec(Strict):
    """Basic red-team probes (docs/probes.md): the dataset becomes every sample wrapped in every selected
    template; the detectors `refusal_rate`, `canary_leak` and `instruction_hijack` score them."""

    pack: Literal["basic"] = "basic"
    kinds: list[Literal["injection", "jailbreak", "canary"]] = Field(
        default_factory=lambda: ["injection", "jailbreak", "canary"], min_length=1,
        description="the kinds of template applied")
    templates: list[str] | None = Field(None, description="only these template ids (default: every one of kinds)")
    seed: Seed = Field(0, description="draws each probe's canary and injected marker")

    @model_validator(mode="after")
    def _selection(self) -> "ProbeSpec":
        from ..errors import ConfigError
        from ..probes.pack import select_templates

        try:
            select_templates(self.pack, self.kinds, self.templates)
        except ConfigError as exc:  # as a ValueError, so the loader names the field
            raise ValueError(str(exc).removeprefix("probes.templates: ")) from None
        return self


# --------------------------------------------------------------------------- run / sweep
class RunSpec(Strict):
    name: Name = "run"
    model: BackendSpec
    dataset: DatasetSpec
    probes: ProbeSpec | None = Field(None, description="apply a probe pack to the dataset (docs/probes.md)")
    prompt: PromptSpec = Field(default_factory=PromptSpec)
    retrieval: RetrievalSpec | None = None
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    annotators: list[AnnotatorSpec] = Field(default_factory=list)
    metrics: list[MetricSpec] = Field(default_factory=list, description="empty: generate and store outputs only")
    seed: Seed = 0
    repeats: int = Field(1, ge=1, le=MAX_REPEATS)
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    store: StoreSpec = Field(default_factory=StoreSpec)
    experiment: ExperimentSpec = Field(default_factory=ExperimentSpec)
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)

    @field_validator("metrics", mode="before")
    @classmethod
    def _metric_strings(cls, v: Any) -> Any:
        return [_metric_from_str(x) for x in v] if isinstance(v, list) else v

    @property
    def shard_size(self) -> int:
        """``execution.shard_size``, or the backend's default."""
        return self.execution.shard_size or self.model.default_shard_size()

    @model_validator(mode="after")
    def _annotators_unique(self) -> "RunSpec":
        seen: set[str] = set()
        for i, a in enumerate(self.annotators):
            if a.name in seen or a.name in ("raw", "text"):
                raise ValueError(f"annotators[{i}].name {a.name!r} is reserved or used twice")
            seen.add(a.name)
        for i, m in enumerate(self.metrics):
            if m.on not in (None, "raw", "text") and m.on not in seen:
                raise ValueError(f"metrics[{i}].on {m.on!r} names no annotator (have: {sorted(seen) or 'none'})")
        return self


_MARGIN = r"^\s*(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*%\s*$"


class DecisionSpec(Strict):
    """Which checkpoint to ship (docs/concepts.md, "Decisions"): each run of the sweep against the baseline by
    a one-sided non-inferiority test on the primary metric, Holm-adjusted across candidates, and the preferred
    one among those that qualify. Not part of any fingerprint: it reads results, it changes none."""

    metric: str = Field(description="the primary metric, as results name it (`exact_match@number`); the reports "
                                    "rank by it")
    baseline: str | None = Field(None, description="the run to replace, by its name in the sweep "
                                                   "(`fp32/path=word-problems`); `--baseline` overrides it")
    margin: float | str = Field(description="how much worse a candidate may be and still count: absolute in the "
                                            "metric's units (`0.02`), or relative to the baseline's mean (`2%`)")
    confidence: float = Field(0.95, gt=0.5, lt=1, description="one-sided confidence: alpha = 1 - confidence")
    prefer: list[Literal["size", "latency", "cost", "quality"]] = Field(
        default_factory=lambda: ["size", "latency", "cost"], min_length=1,
        description="among non-inferior candidates, the order of preference: smallest model, lowest latency "
                    "(p50), lowest cost, best primary metric")
    method: Literal["auto", "tango", "t", "bootstrap-t"] = Field(
        "auto", description="auto: Tango's score test for 0/1 scores, the studentized bootstrap otherwise")

    @field_validator("prefer", mode="before")
    @classmethod
    def _prefer_text(cls, v: Any) -> Any:
        return [p.strip() for p in v.split(",") if p.strip()] if isinstance(v, str) else v

    @field_validator("margin")
    @classmethod
    def _margin(cls, v: Any) -> Any:
        import math
        import re

        if isinstance(v, str):
            if not re.match(_MARGIN, v) or float(v.strip().rstrip("%").strip()) <= 0:
                raise ValueError(f"{v!r} is not a positive number or percentage (0.02 or 2%)")
            return v.strip()
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"{v!r} must be a positive number (the margin in the metric's units)")
        return v


class SweepSpec(Strict):
    """A grid (and explicit lists) over run settings, expanded into runs.

    ``base`` is a run file's content; ``grid`` maps dotted paths
    (``model.path``, ``generation.temperature``) to lists of values whose
    cartesian product is taken; ``runs`` lists explicit overrides, each
    crossed with the grid; ``decision`` says which run to ship."""

    name: Name = "sweep"
    base: dict[str, Any]
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    runs: list[dict[str, Any]] = Field(default_factory=list)
    decision: DecisionSpec | None = Field(None, description="which run to ship instead of the baseline (a "
                                                            "non-inferiority test; docs/concepts.md)")

    @field_validator("grid")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"grid[{k!r}] is an empty list")
        return v


def _rebuild() -> None:
    """A backend was registered (or removed): the models holding a backend union follow."""
    RunSpec.model_rebuild(force=True)


on_backends_changed(_rebuild)
