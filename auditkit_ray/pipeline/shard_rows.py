"""A shard's row for the pipeline, built on the driver (or in a planning
task, ``plan_tasks``): every request of its samples, each prompt built, so a
bad sample fails here, before anything runs. What the row holds is
``actors.shard``'s (``ShardPayload``)."""

from __future__ import annotations

from typing import Any

from ..actors.shard import planned_row
from ..adapters.prompt import PromptAdapter
from ..config.models import RunSpec
from ..core.types import Sample
from ..errors import DataError


def check_rag_template(spec: RunSpec, sample: Sample, raw: dict) -> None:
    """With retrieval the prompt is built after retrieval (in its own pool);
    here only check that the sample has every field the templates need, and
    that the retrieval query is there."""
    from ..adapters.prompt import render
    from ..errors import DataError

    r = spec.retrieval
    qf = r.query_field or spec.dataset.input_field
    if raw.get(qf) in (None, "") and r.retriever != "precomputed":
        raise DataError(f"sample {sample.id!r}: no query field {qf!r} for retrieval")
    if r.retriever == "precomputed" and sample.retrieved_contexts is None:  # empty: found nothing (scored 0)
        raise DataError(f"sample {sample.id!r}: retriever 'precomputed' needs retrieved_contexts on the sample")
    fields = {**raw, "contexts": ""}
    if spec.dataset.input_field in raw:  # else '{{ input }}' names a field the sample lacks
        fields["input"] = raw[spec.dataset.input_field]
    render(r.template, fields, sample.id)
    render(r.context_template, {"n": 1, "id": "", "text": "", "title": "", "score": 0}, sample.id)
    return None


def check_images(spec: RunSpec, sample: Sample, prompt: Any) -> None:
    """A sample's images reach the backend or the run stops here, before any generation: a backend that
    cannot take images (``BackendSettings.takes_images``), or cannot fetch an https image, never sees the
    sample without them."""
    from ..core.images import prompt_images

    images = prompt_images(prompt) if not spec.retrieval else list(sample.images or [])
    if spec.retrieval and isinstance(sample.input, list) and prompt_images(
            [m.model_dump(exclude_none=True) if hasattr(m, "model_dump") else m for m in sample.input]):
        # the retrieval template renders the input as text: the parts' images would be dropped
        raise DataError(f"sample {sample.id!r}: images in chat messages' content parts are not taken with "
                        "retrieval; name them in dataset.images_field")
    if not images:
        return
    m = spec.model
    where = f"sample {sample.id!r} has {len(images)} image(s)"
    if not m.takes_images():
        detail = f" {m.images_advice()}" if m.images_advice() else ""
        raise DataError(f"backend {m.type!r}{detail} cannot take images, and {where}: use a backend that takes "
                        "them (api; hf or vllm with vision: true) or drop the images (dataset.images_field)")
    if spec.prompt.request != "generate":
        raise DataError(f"{where}: prompt.request {spec.prompt.request!r} scores text only; images need "
                        "request 'generate'")
    url = next((u for u in images if u.startswith(("https://", "http://"))), None)
    if url is not None and not m.fetches_image_urls():
        raise DataError(f"backend {m.type!r} does not fetch image URLs, and {where} at {url}: give a local file "
                        "or a data: URL")


def _request_variants(spec: RunSpec, sample: Sample, raw: dict) -> list[dict[str, Any]]:
    """One request per sample for generation and log-likelihood; one per
    choice for multiple choice (scored together by group metrics)."""
    from ..adapters.prompt import render
    from ..errors import DataError

    kind = spec.prompt.request
    if kind == "generate":
        return [{}]
    if kind == "loglikelihood":
        rec = {**raw, "target": sample.targets[0] if sample.targets else "",
               "input": sample.input if isinstance(sample.input, str) else ""}
        return [{"kind": "loglikelihood", "continuation": render(spec.prompt.continuation, rec, sample.id)}]
    if not sample.choices:
        raise DataError(f"sample {sample.id!r}: prompt.request 'choices' needs choices (dataset.choices_field)")
    return [{"kind": "loglikelihood", "continuation": spec.prompt.choice_prefix + c, "choice": k}
            for k, c in enumerate(sample.choices)]


def agent_metadata_fn(spec: RunSpec) -> Any:
    """Backends with native tool calling read the sample's tools from each request's metadata."""
    if spec.model.calls_tools():
        from ..agents.dataset import agent_request_metadata

        return agent_request_metadata
    return None


def sample_max_new_tokens(spec: RunSpec, sample: Sample, raw: dict) -> int:
    """The sample's own limit on new tokens (``generation.max_new_tokens_field``), checked."""
    field, cap = spec.generation.max_new_tokens_field, spec.generation.max_new_tokens
    value = raw.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
        raise DataError(f"sample {sample.id!r}: field {field!r} (generation.max_new_tokens_field) must be an integer "
                        f"from 1 to generation.max_new_tokens ({cap}), got {value!r}")
    return value


def shard_row(spec: RunSpec, adapter: PromptAdapter, agent_meta: Any, shard: int,
              pairs: list[tuple[Sample, dict]], keep: bool = True,
              locations: dict[str, str] | None = None) -> dict[str, bytes] | None:
    """One shard's row for the pipeline (``payload`` and ``samples``,
    packed: ``actors.shard``); builds every prompt, so a bad sample fails here,
    named with its place in the dataset (``locations``: sample id -> ``file:line``).
    ``keep=False`` (a shard already stored): check only, no row. The row
    does not name its run (``Plan.row`` adds it), so runs that read the
    same dataset the same way share their rows (``plan.rows_key``)."""
    items: list[dict[str, Any]] = []
    item_samples: list[Sample] = []
    for sample, raw in pairs:
        try:
            prompt = check_rag_template(spec, sample, raw) if spec.retrieval else adapter.build(sample, raw)
        except DataError as exc:
            where = (locations or {}).get(sample.id)
            if where is None:
                raise
            raise DataError(f"{where}: {exc}") from None
        check_images(spec, sample, prompt)
        base = {
            "sample_id": sample.id,
            "prompt": prompt,
            "target": sample.targets[0] if sample.targets else None,
            "metadata": agent_meta(sample) if agent_meta else {},
        }
        if spec.generation.max_new_tokens_field:
            base["metadata"] = {**base["metadata"], "max_new_tokens": sample_max_new_tokens(spec, sample, raw)}
        extra = {"record": raw} if spec.retrieval else {}
        for variant in _request_variants(spec, sample, raw):
            for r in range(spec.repeats):
                items.append({"request": {**base, **variant, "repeat": r}, **extra})
                item_samples.append(sample)
    if not keep:
        return None
    return planned_row(shard, items, item_samples)
