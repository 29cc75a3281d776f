"""``echo``: returns the prompt or the target. No model; measures overhead."""

from __future__ import annotations

from ..core.types import Generation
from .base import Backend, Request


class EchoBackend(Backend):
    def generate(self, requests: list[Request]) -> list[Generation]:
        out = []
        for r in requests:
            if self.spec.field == "target":
                text = r.target or ""
            else:
                text = r.prompt if isinstance(r.prompt, str) else (r.prompt[-1].get("content") or "")
            text = self.spec.prefix + text
            out.append(Generation(text=text, completion_tokens=len(text.split()), token_source="tokenizer", finish_reason="stop"))
        return out
