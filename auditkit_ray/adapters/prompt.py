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


def render(template: str, record: dict, sample_id: str = "?") -> str:
    def sub(m: re.Match) -> str:
        try:
            value = _lookup(record, m.group(1))
        except KeyError:
            fields = ", ".join(sorted(record)) or "none"
            raise DataError(
                f"sample {sample_id!r}: the prompt template needs field {m.group(1)!r}, "
                f"which the sample lacks (it has: {fields})"
            ) from None
        return value if isinstance(value, str) else str(value)

    return _PLACEHOLDER.sub(sub, template)


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

    def _text(self, rec: dict, sample_id: str) -> str:
        if self.spec.template is None:
            value = rec.get(self.dataset.input_field)
            if value is None:
                raise DataError(
                    f"sample {sample_id!r}: no input field {self.dataset.input_field!r} and no prompt template"
                )
            return value if isinstance(value, str) else str(value)
        if "input" not in rec and "input" in placeholders(self.spec.template):
            raise DataError(f"sample {sample_id!r}: no input field {self.dataset.input_field!r}, which the prompt "
                            "template's '{{ input }}' stands for (set dataset.input_field or fix the sample)")
        return render(self.spec.template, rec, sample_id)

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

    def build(self, sample: Any, raw: dict) -> str | list[dict]:
        prompt = self._build(sample, raw)
        if getattr(sample, "images", None):
            from ..core.images import with_images

            return with_images(prompt, sample.images)
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
            body = self._text(rec, sample.id)
            shots = self._shots(sample.id)
            if shots:
                sep = self.spec.few_shot.separator if self.spec.few_shot else "\n\n"
                body = sep.join([f"{q} {a}" for q, a in shots] + [body])
            return [*msgs, {"role": "user", "content": body}]
        text = self._text(rec, sample.id)
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
