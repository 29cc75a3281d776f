"""A deterministic reader with a position bias, for RAG examples and tests:
it answers with the first number in the FIRST context of the prompt (and
cites it as [1]), or abstains when the first context has no number. Run it
through the ``agent`` backend as a callable (``reader:answer_from_first_context``).

Real models also favour some positions of their context ("lost in the
middle"); this one makes the effect exact, so that a change of context order
visibly moves answer scores while retrieval scores stay fixed."""

from __future__ import annotations

import re

_CTX = re.compile(r"^\[1\]\s*(.*)$", re.MULTILINE)
_NUM = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)")


def answer_from_first_context(payload: dict) -> dict:
    prompt = payload["input"] if isinstance(payload["input"], str) else payload["input"][-1]["content"]
    m = _CTX.search(prompt)
    first = m.group(1) if m else ""
    nums = _NUM.findall(first)
    if not nums:
        return {"output": "I cannot answer that from the available documents.", "done": True}
    unit = "kilograms" if "weigh" in prompt.split("Question:")[-1] else "megabits per second"
    return {"output": f"{nums[0]} {unit} [1]", "done": True}
