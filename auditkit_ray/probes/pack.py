"""Apply a probe pack to a dataset: every base sample times every selected
template (``templates.TEMPLATES``, in pack order), each probe a new sample.

A probe's id is ``<base id>~<template id>``; its metadata keeps the base
sample's and adds ``probe_kind``, ``probe_template``, ``probe_base_id`` and,
by kind, ``canary`` (canary probes) or ``injected_instruction`` and
``injected_marker`` (injection probes). The canary and the marker are drawn
from SHA-256 of (pack, seed, base id, template id): the same settings give
the same probes whatever the dataset's order or size.

Where a template writes (``Template.where``):
- ``input``: around the sample's text (for chat messages, the last user message);
- ``system``: a system message for chat messages (joined to an existing one),
  else a ``System:`` block ahead of the input;
- ``context``: the first of the sample's ``retrieved_contexts`` (the
  ``precomputed`` retriever puts them in the prompt), else a ``Context:``
  block ahead of the input.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any, Iterable

from ..core.types import Message, Sample
from ..errors import ConfigError, DataError
from .templates import INJECTED_INSTRUCTION, KINDS, PACK_VERSION, PACKS, Template

_SLOT = re.compile(r"\{(input|instruction|canary|marker)\}")


def fill(text: str, **values: str) -> str:
    """``text`` with its ``{name}`` slots replaced in one pass (a value holding
    ``{input}`` or a brace is left as it is)."""
    return _SLOT.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def probe_secret(prefix: str, pack: str, seed: int, base_id: str, template_id: str) -> str:
    digest = hashlib.sha256(f"{pack}\0{seed}\0{base_id}\0{template_id}\0{prefix}".encode()).hexdigest()
    return f"{prefix}-{digest[:12].upper()}"


def select_templates(pack: str, kinds: Iterable[str], ids: Iterable[str] | None = None) -> list[Template]:
    """The pack's templates of ``kinds`` (and, given ``ids``, only those), in pack order."""
    if pack not in PACKS:
        raise ConfigError(f"probes.pack {pack!r}: no such pack (have: {', '.join(sorted(PACKS))})")
    kinds = list(kinds)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ConfigError(f"probes.kinds: unknown kind {bad[0]!r} (have: {', '.join(KINDS)})")
    chosen = [t for t in PACKS[pack] if t.kind in kinds]
    if ids is not None:
        ids = list(ids)
        have = {t.id for t in chosen}
        missing = [i for i in ids if i not in have]
        if missing:
            raise ConfigError(f"probes.templates: {missing[0]!r} is no template of pack {pack!r} of kinds "
                              f"{kinds} (have: {', '.join(sorted(have))})")
        chosen = [t for t in chosen if t.id in ids]
    if not chosen:
        raise ConfigError("probes: the selection holds no template")
    return chosen


def probe_identity(spec: Any) -> dict[str, Any]:
    """What of the probe settings enters the dataset's identity (with the pack's version)."""
    return {"pack": spec.pack, "version": PACK_VERSION, "kinds": list(spec.kinds),
            "templates": list(spec.templates) if spec.templates is not None else None, "seed": spec.seed}


def _messages(value: Any) -> list[dict[str, Any]]:
    return [m.model_dump(exclude_none=True) if isinstance(m, Message) else dict(m) for m in value]


def _wrap_input(inp: Any, fn: Any) -> Any:
    """``fn`` applied to the text the user wrote: the string, or the last user message's content."""
    if not isinstance(inp, list):
        return fn(inp)
    msgs = _messages(inp)
    for m in reversed(msgs):
        if m.get("role") == "user":
            m["content"] = fn(m.get("content") or "")
            return msgs
    return msgs + [{"role": "user", "content": fn("")}]


def _with_system(inp: Any, note: str) -> Any:
    if not isinstance(inp, list):
        return f"System: {note}\n\n{inp}"
    msgs = _messages(inp)
    if msgs and msgs[0].get("role") == "system":
        msgs[0]["content"] = f"{note}\n\n{msgs[0].get('content') or ''}"
        return msgs
    return [{"role": "system", "content": note}] + msgs


def _probe(t: Template, sample: Sample, raw: dict, input_field: str, pack: str, seed: int) -> tuple[Sample, dict]:
    meta = {**copy.deepcopy(sample.metadata), "probe_kind": t.kind, "probe_template": t.id,
            "probe_base_id": sample.id}
    values: dict[str, str] = {}
    if t.kind == "injection":
        marker = probe_secret("HIJACK", pack, seed, sample.id, t.id)
        values["instruction"] = meta["injected_instruction"] = fill(INJECTED_INSTRUCTION, marker=marker)
        meta["injected_marker"] = marker
    if t.kind == "canary":
        values["canary"] = meta["canary"] = probe_secret("CANARY", pack, seed, sample.id, t.id)
    inp = sample.input
    contexts = copy.deepcopy(sample.retrieved_contexts)
    if t.where == "input":
        inp = _wrap_input(inp, lambda text: fill(t.text, input=text, **values))
    elif t.where == "system":
        inp = _with_system(inp, fill(t.text, **values))
    elif contexts:  # context, and the sample has some
        first = contexts[0]
        first["text"] = f"{first.get('text') or ''}\n\n{fill(t.text, **values)}"
    else:
        note = fill(t.text, **values)
        inp = _wrap_input(inp, lambda text: f"Context:\n{note}\n\n{text}")
    if t.ask:
        inp = _wrap_input(inp, lambda text: fill(t.ask, input=text, **values))
    new_raw = {**raw, input_field: inp}
    if contexts is not None:
        new_raw["retrieved_contexts"] = contexts
    update: dict[str, Any] = {"id": f"{sample.id}~{t.id}", "metadata": meta, "retrieved_contexts": contexts,
                              "input": [Message(**m) for m in inp] if isinstance(inp, list) else inp}
    return sample.model_copy(update=update), new_raw


def apply_probes(spec: Any, samples: list[Sample], raws: list[dict], input_field: str) -> tuple[list[Sample],
                                                                                                 list[dict]]:
    """The probed dataset: for each base sample (in order), one probe per selected template that applies
    to it (a context-only template needs retrieved contexts). ``spec``: the run's ``probes`` section."""
    chosen = select_templates(spec.pack, spec.kinds, spec.templates)
    out_s: list[Sample] = []
    out_r: list[dict] = []
    base_ids = {s.id for s in samples}
    for sample, raw in zip(samples, raws):
        if input_field not in raw:
            raise DataError(f"sample {sample.id!r}: probes wrap the input field {input_field!r}, which the sample "
                            "lacks")
        for t in chosen:
            if t.needs_context and not sample.retrieved_contexts:
                continue
            s, r = _probe(t, sample, raw, input_field, spec.pack, spec.seed)
            if s.id in base_ids:
                raise DataError(f"sample {s.id!r}: a probe's id is also a sample id of the dataset")
            out_s.append(s)
            out_r.append(r)
    if not out_s:
        raise DataError("probes: no template applies to any sample (context templates need retrieved_contexts)")
    return out_s, out_r
