"""Agent traces and tool-call matching (stdlib + pydantic; scipy and
jsonschema are imported inside the functions that need them).

* ``trace``: episodes as turns, importers (OpenAI messages, JSONL traces),
  converters to and from ``Generation`` / ``Sample`` shapes, reference routes.
* ``matching``: maximum bipartite matching of tool calls, argument modes.
* ``bfcl``: a BFCL-compatible per-call checker.
* ``structure``: parallel-call, order, redundancy and loop diagnostics.
* ``schemas``: tool schema lookup and JSON Schema validation of calls.
"""

from .trace import Episode, ToolResult, Turn, from_openai_messages, read_jsonl_traces, reference_routes

__all__ = ["Episode", "ToolResult", "Turn", "from_openai_messages", "read_jsonl_traces", "reference_routes"]
