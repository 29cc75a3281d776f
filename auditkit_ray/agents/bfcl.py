"""A BFCL-compatible per-call checker, for users comparing with Berkeley
Function Calling Leaderboard (AST category, Python) numbers.

The reference follows BFCL's possible-answer convention: every argument maps
to a *list of acceptable values*, and ``""`` in that list marks the argument
as optional (it may be omitted). A reference value that is not a list is
read as the single acceptable value ``[v]``. The tool's schema (from
``Sample.tools``) gives the parameter types and the required parameters.

The rules (re-implemented from BFCL's documented AST checker behaviour):

1. every parameter the schema marks ``required`` must be present;
2. every parameter in the call must be in the schema *and* in the reference
   (anything else is an unexpected parameter);
3. types are strict (``True`` is not an integer), except that an integer is
   accepted where the schema says ``float``/``number``; an array's items are
   type-checked one level deep (strictly: inside an array of integers ``True``
   is a type error, inside an array of floats ``1`` is), except where BFCL
   skips that check: the items of an array of arrays, and any array whose
   parameter is optional (``""`` among its acceptable values); a value of the
   same type as the acceptable values (when that differs from the schema's)
   is accepted as a "variable";
4. strings are compared after BFCL's normalisation: spaces and
   ``, . / - _ * ^`` removed, lower-cased, ``'`` turned into ``"``; the
   strings inside arrays and (one level deep) objects likewise;
5. any other value must equal one of the acceptable values (Python equality:
   where the item check was skipped, ``1 == 1.0`` and ``True == 1`` inside
   arrays, and always inside objects, as in BFCL);
6. a reference parameter missing from the call is an error unless ``""`` is
   among its acceptable values; for an array parameter that optional marker
   also stands for the empty list, so ``[]`` is accepted (BFCL's list
   checkers read it so: an optional list passed empty is an omitted one).

How this differs from the default (``exact``) mode is listed in docs/agents.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.types import ToolCall

_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "number": float, "boolean": bool,
    "array": list, "tuple": list, "dict": dict, "object": dict, "any": str,
}
_NESTED = ("array", "tuple")
_STRIP = re.compile(r"[ \,\.\/\-\_\*\^]")


@dataclass
class CheckResult:
    valid: bool
    error: str = ""
    error_type: str = ""


_OK = CheckResult(True)


def standardize(s: str) -> str:
    """BFCL's string normalisation."""
    return _STRIP.sub("", s).lower().replace("'", '"')


def _acceptable(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


def _answer_type(acceptable: list[Any]) -> type | None:
    for a in acceptable:
        if a != "":
            return type(a)
    return None


def _type_check(param: str, value: Any, acceptable: list[Any], type_name: str, expected: type,
                nested: type | None) -> tuple[CheckResult, bool]:
    """(result, is_variable)."""
    answer_type = _answer_type(acceptable)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return _OK, is_variable
        for item in acceptable:
            ok = True
            if type(item) is list:
                for v in value:
                    res, _ = _type_check(param, v, item, nested.__name__, nested, None)
                    if not res.valid:
                        ok = False
                        break
            if ok:
                return _OK, is_variable
        return CheckResult(False, f"nested type check failed for {param!r}: expected {type_name} of "
                                  f"{nested.__name__}, got {value!r}", "type_error:nested"), is_variable
    if answer_type is not None and type(value) is answer_type:
        return _OK, True
    return CheckResult(False, f"incorrect type for {param!r}: expected {type_name}, got "
                              f"{type(value).__name__} ({value!r})", "type_error:simple"), is_variable


def _std(v: Any) -> Any:
    return standardize(v) if type(v) is str else v


def _string_ok(value: str, acceptable: list[Any]) -> bool:
    return standardize(value) in [standardize(a) for a in acceptable if type(a) is str]


def _empty_optional(value: list, acceptable: list[Any]) -> bool:
    """An empty list for an optional array parameter: BFCL reads the optional marker ``""`` as ``[]``."""
    return value == [] and "" in acceptable


def _list_ok(value: list, acceptable: list[Any]) -> bool:
    if _empty_optional(value, acceptable):
        return True
    std = [_std(v) for v in value]
    return std in [[_std(x) for x in a] for a in acceptable if isinstance(a, list)]


def _dict_ok(value: dict, acceptable: list[Any]) -> bool:
    for answer in acceptable:
        if answer == "" or not isinstance(answer, dict):
            continue
        ok = True
        for k, v in value.items():
            if k not in answer or _std(v) not in [_std(a) for a in _acceptable(answer[k])]:
                ok = False
                break
        if ok and all(k in value or "" in _acceptable(v) for k, v in answer.items()):
            return True
    return False


def _list_dict_ok(value: list, acceptable: list[Any]) -> bool:
    if _empty_optional(value, acceptable):
        return True
    for answer in acceptable:
        if not isinstance(answer, list) or len(answer) != len(value):
            continue
        if all(isinstance(v, dict) and _dict_ok(v, [a]) for v, a in zip(value, answer)):
            return True
    return False


def check_call(ref: ToolCall, pred: ToolCall, schema: dict[str, Any]) -> CheckResult:
    """Check one predicted call against one BFCL-style reference call."""
    if ref.name != pred.name:
        return CheckResult(False, f"wrong function: {pred.name!r} instead of {ref.name!r}", "wrong_func_name")
    params = schema.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = params.get("required") or []
    answers = {k: _acceptable(v) for k, v in ref.arguments.items()}
    for p in required:
        if p not in pred.arguments:
            return CheckResult(False, f"missing required parameter {p!r}", "missing_required")
    for p, value in pred.arguments.items():
        if p not in props or p not in answers:
            return CheckResult(False, f"unexpected parameter {p!r}", "unexpected_param")
        acceptable = answers[p]
        type_name = (props[p] or {}).get("type")
        expected = _TYPES.get(type_name) if isinstance(type_name, str) else None
        if expected is None:  # no (known) type in the schema: value membership only
            if value not in acceptable:
                return CheckResult(False, f"invalid value for {p!r}: {value!r}", "value_error:others")
            continue
        nested = None
        if type_name in _NESTED:
            item_type = ((props[p] or {}).get("items") or {}).get("type")
            nested = _TYPES.get(item_type) if isinstance(item_type, str) else None
        if type_name in ("float", "number") and type(value) is int:
            value = float(value)
        res, is_variable = _type_check(p, value, acceptable, type_name, expected, nested)
        if not res.valid:
            return res
        if not is_variable:
            if expected is dict:
                if not _dict_ok(value, acceptable):
                    return CheckResult(False, f"invalid value for {p!r}: {value!r}", "value_error:dict")
                continue
            if expected is list and nested is dict:
                if not _list_dict_ok(value, acceptable):
                    return CheckResult(False, f"invalid value for {p!r}: {value!r}", "value_error:list_dict")
                continue
            if expected is str:
                if not _string_ok(value, acceptable):
                    return CheckResult(False, f"invalid value for {p!r}: {value!r}", "value_error:string")
                continue
            if expected is list:
                if not _list_ok(value, acceptable):
                    return CheckResult(False, f"invalid value for {p!r}: {value!r}", "value_error:list")
                continue
        if value not in acceptable:
            return CheckResult(False, f"invalid value for {p!r}: {value!r}", "value_error:others")
    for p, acceptable in answers.items():
        if p not in pred.arguments and "" not in acceptable:
            return CheckResult(False, f"parameter {p!r} missing and not marked optional", "missing_optional")
    return _OK
