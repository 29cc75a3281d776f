"""Regex extraction, reasoning-span stripping and take-first.

Each annotator reads ``text``, ``raw`` or an earlier annotator's output and
writes its own named value; ``Generation.text`` and ``raw_text`` stay as they
were.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..core.types import Generation


def _source(on: str, generation: Generation, annotations: dict) -> str | None:
    if on == "text":
        return generation.text
    if on == "raw":
        return generation.raw_text
    return annotations.get(on)


def build_annotator(spec: Any) -> Callable[[Generation, dict], Any]:
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
    raise ValueError(f"unknown annotator type {spec.type!r}")


def apply_annotators(fns: list[tuple[str, Callable]], generation: Generation) -> dict:
    out: dict[str, Any] = {}
    if generation.error:
        return out
    for name, fn in fns:
        out[name] = fn(generation, out)
    return out
