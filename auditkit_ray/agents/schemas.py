"""Tool schemas: lookup and JSON Schema validation of calls.

A sample's ``tools`` may hold OpenAI-style entries
(``{"type": "function", "function": {"name", "description", "parameters"}}``)
or bare function descriptions (``{"name", "description", "parameters"}``, the
BFCL form). BFCL's type names (``dict``, ``float``, ``tuple``, ``any``) are
read as JSON Schema's (``object``, ``number``, ``array``, no constraint) for
validation. ``jsonschema`` (the ``metrics`` extra) is imported on first use.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

from ..core.types import ToolCall

_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "bool": "boolean", "int": "integer",
               "str": "string", "list": "array"}


def function_of(tool: dict[str, Any]) -> dict[str, Any]:
    """The function description inside a tool entry (either form)."""
    if isinstance(tool.get("function"), dict):
        return tool["function"]
    return tool


def tool_names(tools: Sequence[dict[str, Any]] | None) -> list[str]:
    return [str(function_of(t).get("name")) for t in tools or [] if isinstance(t, dict)]


def find_tool(tools: Sequence[dict[str, Any]] | None, name: str) -> dict[str, Any] | None:
    for t in tools or []:
        if isinstance(t, dict) and function_of(t).get("name") == name:
            return function_of(t)
    return None


def to_json_schema(schema: Any) -> Any:
    """A parameters schema with BFCL type names mapped to JSON Schema."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k == "type" and isinstance(v, str):
            if v == "any":
                continue
            out[k] = _BFCL_TYPES.get(v, v)
        elif k in ("properties", "patternProperties", "$defs", "definitions") and isinstance(v, dict):
            out[k] = {name: to_json_schema(s) for name, s in v.items()}
        elif k in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
            out[k] = to_json_schema(v)
        elif k in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(v, list):
            out[k] = [to_json_schema(s) for s in v]
        else:
            out[k] = copy.deepcopy(v)
    return out


def call_errors(call: ToolCall, tools: Sequence[dict[str, Any]]) -> list[str]:
    """Why a call is invalid against the tool list ([] when valid): an unknown
    tool, or arguments that fail the tool's ``parameters`` JSON Schema."""
    fn = find_tool(tools, call.name)
    if fn is None:
        return [f"unknown tool {call.name!r} (offered: {', '.join(tool_names(tools)) or 'none'})"]
    params = fn.get("parameters")
    if not params:
        return [] if not call.arguments else [f"tool {call.name!r} takes no parameters"]
    from ..errors import require

    jsonschema = require("jsonschema", "metrics")
    schema = to_json_schema(params)
    schema.setdefault("type", "object")
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema)
    errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.absolute_path))
    return [f"{call.name}: {'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors]
