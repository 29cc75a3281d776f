"""Regex extraction, reasoning-span stripping and take-first.

Each annotator reads ``text``, ``raw`` or an earlier annotator's output and
writes its own named value; ``Generation.text`` and ``raw_text`` stay as they
were.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..core.textmodel import TextModel, TextModelFactory
from ..core.types import Generation
from ..errors import ConfigError


def _source(on: str, generation: Generation, annotations: dict) -> str | None:
    if on == "text":
        return generation.text
    if on == "raw":
        return generation.raw_text
    return annotations.get(on)


def build_annotator(spec: Any, text_model: TextModelFactory | None = None) -> Callable[[Generation, dict], Any]:
    """The annotator of a spec. A model-based one (``type: model``) gets its
    model from ``text_model(spec.judge, max_new_tokens=...)``; the scoring
    stage passes ``auditkit_ray.judges.textmodel.judge_text_model``."""
    if spec.type == "regex":
        rx = re.compile(spec.pattern)

        def regex(gen: Generation, ann: dict) -> Any:
            text = _source(spec.on, gen, ann)
            if text is None:
                return None
            matches = list(rx.finditer(text))
            if not matches:
                return spec.invalid
            if spec.select == "first":
                m = matches[0]
            elif spec.select == "last":
                m = matches[-1]
            else:
                if not -len(matches) <= spec.select < len(matches):
                    return spec.invalid
                m = matches[spec.select]
            value = m.group(spec.group) if rx.groups else m.group(0)
            return spec.invalid if value is None else value

        return regex
    if spec.type == "strip_reasoning":
        tags = "|".join(re.escape(t) for t in spec.tags)
        closed = re.compile(rf"<({tags})>.*?</\1>", re.DOTALL)
        dangling = re.compile(rf"^.*?</({tags})>", re.DOTALL)  # opening tag in the prompt

        def strip(gen: Generation, ann: dict) -> Any:
            text = _source(spec.on, gen, ann)
            if text is None:
                return None
            text = closed.sub("", text)
            text = dangling.sub("", text)
            return text.strip()

        return strip
    if spec.type == "take_first":

        def first(gen: Generation, ann: dict) -> Any:
            text = _source(spec.on, gen, ann)
            if text is None:
                return None
            for part in text.split(spec.separator):
                if part.strip():
                    return part.strip()
            return ""

        return first
    if spec.type == "model":
        if text_model is None:
            raise ConfigError(f"annotator {spec.name!r}: a model-based annotator needs a text model factory "
                              "(build_annotator(spec, text_model=...))")
        return ModelExtractor(spec, text_model(spec.judge, max_new_tokens=spec.max_new_tokens, prompt=spec.prompt))
    raise ValueError(f"unknown annotator type {spec.type!r}")


class ModelExtractor:
    """A model-based extractor: one batched request per shard to the model it
    is given (a ``TextModel``: prompts in, texts out); the reply, stripped, is
    the extracted value, and a failed request leaves no value."""

    batched = True

    def __init__(self, spec: Any, model: TextModel) -> None:
        self.spec = spec
        self.model = model

    def batch(self, items: list[tuple[str, Generation, dict]]) -> list[Any]:
        todo = [(k, sid, _source(self.spec.on, g, ann)) for k, (sid, g, ann) in enumerate(items) if not g.error]
        todo = [(k, sid, text) for k, sid, text in todo if text is not None]
        out: list[Any] = [None] * len(items)
        prompts = [self.spec.prompt.replace("{output}", text) for _, _, text in todo]
        texts = self.model.complete(prompts, [f"{sid}#extract" for _, sid, _ in todo])
        for (k, _, _), text in zip(todo, texts):
            out[k] = None if text is None else text.strip()
        return out


def apply_annotators_batch(fns: list[tuple[str, Callable]], generations: list[Generation],
                           sample_ids: list[str]) -> list[dict]:
    """Annotators over a shard, in order; model extractors get one batched call."""
    out: list[dict[str, Any]] = [{} for _ in generations]
    for name, fn in fns:
        if getattr(fn, "batched", False):
            values = fn.batch([(sid, g, a) for sid, g, a in zip(sample_ids, generations, out)])
            for a, v, g in zip(out, values, generations):
                if not g.error:
                    a[name] = v
        else:
            for a, g in zip(out, generations):
                if not g.error:
                    a[name] = fn(g, a)
    return out


def apply_annotators(fns: list[tuple[str, Callable]], generation: Generation) -> dict:
    out: dict[str, Any] = {}
    if generation.error:
        return out
    for name, fn in fns:
        out[name] = fn(generation, out)
    return out
