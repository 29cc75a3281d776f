"""``echo``: returns the prompt or the target. No model; measures overhead."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ..core.backends import BackendSettings
from ..core.types import Generation
from .base import Backend, Request


class EchoSettings(BackendSettings):
    """Returns the prompt (or the target) as the output: for tests, rescoring
    pipelines and measuring framework overhead."""

    type: Literal["echo"]
    field: Literal["prompt", "target"] = "prompt"
    prefix: str = ""
    batch_size: int = Field(64, ge=1)

    not_in_identity: ClassVar[frozenset[str]] = frozenset({"batch_size"})

    def generates_inline(self) -> bool:
        return True

    def reads_targets(self) -> bool:
        return self.field == "target"


class EchoBackend(Backend):
    def generate(self, requests: list[Request]) -> list[Generation]:
        out = []
        for r in requests:
            if self.spec.field == "target":
                text = r.target or ""
            else:
                text = r.prompt if isinstance(r.prompt, str) else (r.prompt[-1].get("content") or "")
            text = self.spec.prefix + text
            out.append(Generation(text=text, completion_tokens=len(text.split()), token_source="tokenizer",
                                  finish_reason="stop"))
        return out
