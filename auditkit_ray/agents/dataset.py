"""Tool-calling datasets: JSONL lines -> Samples with the agent fields set.

A line holds ``id``, ``input`` (text or chat messages), optional ``target``,
``tools`` (tool schemas), ``reference_tool_calls`` (a turn-list) and
``expected_state``; every other key (``category``, ``initial_state``,
``reference_routes``, ``allowed_tools``, ``irrelevant``...) goes to
``Sample.metadata``. ``examples/agents/tools.jsonl`` is in this format.
(The generic dataset reader leaves the agent fields in ``metadata``; the
agent metrics read them there too.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.types import Sample
from ..errors import DataError
from .trace import parse_turns

_FIELDS = ("id", "input", "target", "tools", "reference_tool_calls", "expected_state")


def sample_from_record(rec: dict[str, Any], where: str = "<record>") -> Sample:
    if "id" not in rec or "input" not in rec:
        raise DataError(f"{where}: a tool-calling sample needs 'id' and 'input'")
    try:
        ref = rec.get("reference_tool_calls")
        return Sample(
            id=str(rec["id"]), input=rec["input"], target=rec.get("target"), tools=rec.get("tools"),
            reference_tool_calls=parse_turns(ref) if ref is not None else None,
            expected_state=rec.get("expected_state"),
            metadata={k: v for k, v in rec.items() if k not in _FIELDS},
        )
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from None
    except ValueError as exc:  # pydantic
        raise DataError(f"{where}: {str(exc).splitlines()[0]}") from None


def load_tool_samples(path: str | Path) -> list[Sample]:
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: no such file")
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{p}:{n}: not JSON ({exc})") from None
            out.append(sample_from_record(rec, f"{p}:{n}"))
    return out


def agent_request_metadata(sample: Sample) -> dict[str, Any]:
    """What the ``agent`` backend reads from ``Request.metadata``: the tools
    and the environment's starting state."""
    from .trace import sample_field

    meta: dict[str, Any] = {}
    tools = sample_field(sample, "tools")
    if tools is not None:
        meta["tools"] = tools
    if "initial_state" in (sample.metadata or {}):
        meta["initial_state"] = sample.metadata["initial_state"]
    return meta
