"""Prompt templates (``{{ field }}`` with dotted paths), system prompts,
chat messages and few-shot examples. Deterministic: few-shot examples for a
sample depend on the seed and the sample id only."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from ..errors import DataError

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")


def _lookup(record: dict, dotted: str) -> Any:
    cur: Any = record
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise KeyError(dotted)
    return cur


def placeholders(template: str) -> set[str]:
    """The top-level field names a template's ``{{ field }}`` placeholders use."""
    return {m.group(1).split(".")[0] for m in _PLACEHOLDER.finditer(template)}


#: where an image placeholder stood in a rendered template (``place_images`` turns it into an image part)
_MARK = "\x00image:{}\x00"
_MARKS = re.compile(r"\x00image:(\d+)\x00")


def render(template: str, record: dict, sample_id: str = "?", images: tuple[str, int] | None = None,
           own: Any = None) -> str:
    """``template`` with its ``{{ field }}`` placeholders filled from ``record``. ``images``: the images
    field's name and the sample's number of images; that field's placeholders then mark where its images
    go (``{{ image }}`` all of them, ``{{ image.1 }}`` the second), for ``place_images``. ``own``: the fields
    the dataset's record has (a missing field's message lists those, not the ones the loader added)."""
    def sub(m: re.Match) -> str:
        if images is not None and m.group(1).split(".")[0] == images[0]:
            return _image_marks(m.group(1), images, sample_id)
        try:
            value = _lookup(record, m.group(1))
        except KeyError:
            from ..core.suggest import did_you_mean

            have = sorted(own if own is not None else record)
            name = m.group(1)
            raise DataError(
                f"sample {sample_id!r}: the prompt template needs field {name!r}"
                f"{did_you_mean(name.split('.')[0], record)}, which the sample lacks (its fields: "
                f"{', '.join(have) or 'none'})"
            ) from None
        if value is None:  # never the text "None" in a prompt
            raise DataError(f"sample {sample_id!r}: the prompt template needs field {m.group(1)!r}, which is null "
                            "in the sample")
        return value if isinstance(value, str) else str(value)

    return _PLACEHOLDER.sub(sub, template)


def _image_marks(name: str, images: tuple[str, int], sample_id: str) -> str:
    field, n = images
    rest = name[len(field) + 1:]
    if name == field:
        return "".join(_MARK.format(i) for i in range(n))
    if rest.isdigit():
        if int(rest) >= n:
            raise DataError(f"sample {sample_id!r}: the prompt template places image {int(rest) + 1} "
                            f"('{{{{ {name} }}}}'), and the sample has {n} image(s) in {field!r}")
        return _MARK.format(int(rest))
    raise DataError(f"sample {sample_id!r}: '{{{{ {name} }}}}' names no image: the images field "
                    f"{field!r} is placed by '{{{{ {field} }}}}' (all its images) or '{{{{ {field}.N }}}}' (the "
                    "image at position N, from 0)")


def place_images(messages: list[dict], images: list[str], sample_id: str) -> list[dict]:
    """Chat messages whose text holds ``render``'s image marks, with each mark replaced by its image part.
    Every image must be placed: an image the template leaves out fails the sample, never silently dropped."""
    used: set[int] = set()
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str) and _MARKS.search(content):
            parts: list[dict] = []
            pos = 0
            for mk in _MARKS.finditer(content):
                if mk.start() > pos:
                    parts.append({"type": "text", "text": content[pos:mk.start()]})
                i = int(mk.group(1))
                used.add(i)
                parts.append({"type": "image_url", "image_url": {"url": images[i]}})
                pos = mk.end()
            if pos < len(content):
                parts.append({"type": "text", "text": content[pos:]})
            m = {**m, "content": parts}
        out.append(m)
    missing = [i for i in range(len(images)) if i not in used]
    if missing:
        raise DataError(f"sample {sample_id!r}: the prompt template places {len(used)} of its {len(images)} "
                        f"images; image(s) {', '.join(str(i) for i in missing)} (from 0) have no placeholder")
    return out


def _has(own: Any) -> str:
    """`` (its fields: a, b)``: what the dataset's record holds, for a message about a field it lacks."""
    return "" if own is None else f" (its fields: {', '.join(sorted(own)) or 'none'})"


class PromptAdapter:
    def __init__(self, prompt: Any, dataset: Any, seed: int, pool: list[tuple[str, dict]] | None = None) -> None:
        self.spec = prompt
        self.dataset = dataset
        self.seed = seed
        self.pool = pool or []  # (sample id, record) few-shot candidates

    def _record(self, sample: Any, raw: dict) -> dict:
        rec = dict(raw)
        if self.dataset.input_field in raw or isinstance(sample.input, list) or sample.input:
            # a sample without its input field has no '{{ input }}': its prompt must not silently be empty
            rec.setdefault("input", sample.input if isinstance(sample.input, str) else "")
        rec.setdefault(
            "target", sample.target if isinstance(sample.target, str) else (sample.targets[0] if sample.targets else "")
        )
        rec.setdefault("id", sample.id)
        return rec

    def _text(self, rec: dict, sample_id: str, images: Any = None, own: Any = None) -> str:
        if self.spec.template is None:
            value = rec.get(self.dataset.input_field)
            if value is None:
                raise DataError(
                    f"sample {sample_id!r}: no input field {self.dataset.input_field!r}{_has(own)} and no prompt "
                    "template"
                )
            return value if isinstance(value, str) else str(value)
        if "input" not in rec and "input" in placeholders(self.spec.template):
            raise DataError(f"sample {sample_id!r}: no input field {self.dataset.input_field!r}{_has(own)}, which "
                            "the prompt template's '{{ input }}' stands for (set dataset.input_field or fix the "
                            "sample)")
        if self.places_images():
            if self.spec.few_shot and self.spec.few_shot.n:
                raise DataError(f"sample {sample_id!r}: the prompt template places images "
                                f"('{{{{ {self.dataset.images_field} }}}}'), and few-shot examples carry none: "
                                "drop prompt.few_shot or the placeholder")
            return render(self.spec.template, rec, sample_id,
                          images=(self.dataset.images_field, len(images or ())), own=own)
        return render(self.spec.template, rec, sample_id, own=own)

    def _shots(self, sample_id: str) -> list[tuple[str, str]]:
        fs = self.spec.few_shot
        if not fs or fs.n == 0:
            return []
        candidates = [(sid, rec) for sid, rec in self.pool if sid != sample_id]
        digest = hashlib.sha256(f"{fs.seed}:{sample_id}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        chosen = rng.sample(candidates, min(fs.n, len(candidates)))
        out = []
        for sid, rec in chosen:
            rec = dict(rec)
            target = rec.get(self.dataset.target_field or "target", "")
            q = render(fs.template, rec, sid) if fs.template else self._text(rec, sid)
            out.append((q, str(target)))
        return out

    def places_images(self) -> bool:
        """The template names the images field: its placeholders put the images, not the one rule (images
        first in the user message)."""
        field = getattr(self.dataset, "images_field", None)
        return bool(field and self.spec.template and field in placeholders(self.spec.template))

    def build(self, sample: Any, raw: dict) -> str | list[dict]:
        prompt = self._build(sample, raw)
        images = getattr(sample, "images", None)
        if images and self.places_images() and isinstance(prompt, list):
            return place_images(prompt, list(images), sample.id)
        if images:
            from ..core.images import with_images

            return with_images(prompt, images)
        return prompt

    def _build(self, sample: Any, raw: dict) -> str | list[dict]:
        rec = self._record(sample, raw)
        if isinstance(sample.input, list) and self.spec.template is None:  # already chat messages
            msgs = [m.model_dump(exclude_none=True) for m in sample.input]
            if self.spec.system and not any(m["role"] == "system" for m in msgs):
                msgs.insert(0, {"role": "system", "content": self.spec.system})
            return msgs
        if getattr(sample, "images", None) and not self.spec.chat:
            # images travel in chat messages only: the system prompt is a message of its own, not pasted text
            msgs = [{"role": "system", "content": self.spec.system}] if self.spec.system else []
            body = self._text(rec, sample.id, sample.images, own=raw)
            shots = self._shots(sample.id)
            if shots:
                sep = self.spec.few_shot.separator if self.spec.few_shot else "\n\n"
                body = sep.join([f"{q} {a}" for q, a in shots] + [body])
            return [*msgs, {"role": "user", "content": body}]
        text = self._text(rec, sample.id, getattr(sample, "images", None), own=raw)
        shots = self._shots(sample.id)
        if self.spec.chat:
            msgs: list[dict] = []
            if self.spec.system:
                msgs.append({"role": "system", "content": self.spec.system})
            for q, a in shots:
                msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            msgs.append({"role": "user", "content": text})
            return msgs
        sep = self.spec.few_shot.separator if self.spec.few_shot else "\n\n"
        parts = [f"{q} {a}" for q, a in shots] + [text]
        body = sep.join(parts)
        return f"{self.spec.system}\n\n{body}" if self.spec.system else body
