"""Generation metrics with a fixed answer format: regex match, numeric match,
JSON validity and JSON-schema match.

Numbers are read by ``parse_numbers`` (shared with the RAG numeric check):
thousands commas, decimals, exponents, signs and percentages. See
docs/metrics-notes.md for the exact rules.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ..core.metric import Direction, Metric
from ..core.types import Generation, Sample, Score
from .text import TextMetric

# -- numbers -------------------------------------------------------------------

# A number is not glued to a preceding word character or dot ("v2", "abc123",
# "1.2.3" yields 1.2 and nothing for ".3"). Thousands separators must come in
# groups of exactly three digits ("1,234,567"); "1,5" reads as 1 and 5.
_NUMBER = re.compile(
    r"(?<![\w.])"
    r"(?P<sign>[-+\u2212]?)"
    r"(?P<body>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
    r"(?P<exp>[eE][-+]?\d+)?"
    r"(?!\d)"
    r"(?P<pct>\s?%)?"
)


@dataclass(frozen=True)
class Number:
    value: float
    percent: bool
    text: str


def parse_numbers(text: str) -> list[Number]:
    """Every number in ``text``, in order. ``12%`` gives value 12 with
    ``percent=True`` (matching treats it as 12 or as 0.12)."""
    out = []
    for m in _NUMBER.finditer(text):
        sign = "-" if m.group("sign") in ("-", "\u2212") else ""
        raw = sign + m.group("body").replace(",", "") + (m.group("exp") or "")
        value = float(raw)
        if math.isfinite(value):
            out.append(Number(value, bool(m.group("pct")), m.group(0)))
    return out


def parse_number(value: Any) -> Number:
    """One number from a target: an int/float, or a string holding exactly one
    number. Raises ValueError (NaN, infinity, no number, several numbers)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a boolean, not a number")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
        return Number(float(value), False, str(value))
    if not isinstance(value, str):
        raise ValueError(f"{value!r} ({type(value).__name__}) is not a number")
    found = parse_numbers(value)
    if len(found) != 1:
        what = "no number" if not found else f"{len(found)} numbers"
        raise ValueError(f"target {value!r} holds {what}, expected exactly one")
    return found[0]


def numbers_close(pred: Number, gold: Number, abs_tol: float, rel_tol: float) -> bool:
    """Equal within tolerance; a percentage also matches its fraction
    (``50%`` ~ ``0.5`` and ``0.5`` ~ ``50%``)."""
    cands = [(pred.value, gold.value)]
    if pred.percent and not gold.percent:
        cands.append((pred.value / 100.0, gold.value))
    if gold.percent and not pred.percent:
        cands.append((pred.value, gold.value / 100.0))
    return any(math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol) for a, b in cands)


class RegexMatch(TextMetric):
    """1 when the prediction matches a regex (the `pattern` param, or each target read as a regex)."""

    name = "regex_match"
    direction = Direction.MAXIMIZE
    family = "generation"
    description = "1 when the prediction matches a regular expression (param `pattern`, or the targets as regexes)"
    requires = ()

    def __init__(self, *, pattern: str | None = None, mode: str = "search", flags_ignore_case: bool = False,
                 on: str | None = None, **norm: Any) -> None:
        super().__init__(on=on, **norm)
        if mode not in ("search", "match", "fullmatch"):
            raise TypeError(f"mode must be 'search', 'match' or 'fullmatch', not {mode!r}")
        self.params.update(pattern=pattern, mode=mode, flags_ignore_case=flags_ignore_case)
        self._flags = re.IGNORECASE if flags_ignore_case else 0
        self._pattern = None
        if pattern is not None:
            try:
                self._pattern = re.compile(pattern, self._flags)
            except re.error as exc:
                raise TypeError(f"pattern: invalid regular expression ({exc})") from None
        else:
            self.requires = ("target",)  # the targets are the patterns

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        pred = self.norm(self.prediction(generation, context))
        if self._pattern is not None:
            patterns = [self._pattern]
        else:
            patterns = []
            for t in sample.targets:
                try:
                    patterns.append(re.compile(t, self._flags))
                except re.error as exc:
                    raise ValueError(f"target {t!r} is not a valid regular expression ({exc})") from None
        mode = self.params["mode"]
        hit = any(getattr(p, mode)(pred) is not None for p in patterns)
        return Score.scored(self.name, 1.0 if hit else 0.0)


class NumericMatch(Metric):
    """1 when the number in the prediction equals the target within tolerance."""

    name = "numeric_match"
    direction = Direction.MAXIMIZE
    family = "generation"
    description = (
        "1 when the prediction's number (the last by default) equals a numeric target within abs/rel tolerance"
    )
    requires = ("target",)

    def __init__(self, *, abs_tol: float = 0.0, rel_tol: float = 1e-9, pick: str = "last",
                 on: str | None = None) -> None:
        if pick not in ("last", "first", "any", "only"):
            raise TypeError(f"pick must be 'last', 'first', 'any' or 'only', not {pick!r}")
        for key, tol in (("abs_tol", abs_tol), ("rel_tol", rel_tol)):
            if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol) or tol < 0:
                raise TypeError(f"{key} must be a finite number >= 0, not {tol!r}")
        super().__init__(abs_tol=float(abs_tol), rel_tol=float(rel_tol), pick=pick, on=on)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        targets = sample.target if isinstance(sample.target, list) else [sample.target]
        golds = [parse_number(t) for t in targets]  # ValueError -> status error, with the reason
        found = parse_numbers(self.prediction(generation, context))
        if not found:
            return Score.scored(self.name, 0.0, reason="no number in the prediction")
        pick = self.params["pick"]
        if pick == "only" and len(found) != 1:
            return Score.scored(self.name, 0.0, reason=f"expected exactly one number, found {len(found)}")
        cands = {"last": found[-1:], "first": found[:1], "any": found, "only": found}[pick]
        a, r = self.params["abs_tol"], self.params["rel_tol"]
        hit = any(numbers_close(p, g, a, r) for p in cands for g in golds)
        return Score.scored(self.name, 1.0 if hit else 0.0, metadata={"extracted": [p.text for p in cands]})


# -- JSON ----------------------------------------------------------------------

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def load_json(text: str, strip_fences: bool = True) -> Any:
    """Parse strict JSON (NaN/Infinity refused), optionally inside a Markdown
    code fence. Raises ValueError with the position of the problem."""
    if strip_fences:
        m = _FENCE.match(text)
        if m:
            text = m.group("body")
    if not text.strip():
        raise ValueError("empty output")
    return json.loads(text, parse_constant=_reject_constant)


class JsonValid(Metric):
    """1 when the prediction is valid JSON."""

    name = "json_valid"
    direction = Direction.MAXIMIZE
    family = "generation"
    description = "1 when the prediction parses as strict JSON (a Markdown code fence is allowed by default)"

    def __init__(self, *, strip_fences: bool = True, on: str | None = None) -> None:
        super().__init__(strip_fences=strip_fences, on=on)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        try:
            load_json(self.prediction(generation, context), self.params["strip_fences"])
        except ValueError as exc:
            return Score.scored(self.name, 0.0, reason=f"invalid JSON: {exc}")
        return Score.scored(self.name, 1.0)


class JsonSchemaMatch(Metric):
    """1 when the prediction is JSON valid against a JSON Schema."""

    name = "json_schema_match"
    direction = Direction.MAXIMIZE
    family = "generation"
    description = (
        "1 when the prediction is JSON that validates against a JSON Schema (param `schema` or metadata.json_schema)"
    )

    def __init__(self, *, schema: dict | None = None, strip_fences: bool = True, on: str | None = None) -> None:
        from ..errors import require

        super().__init__(schema=schema, strip_fences=strip_fences, on=on)
        self._js = require("jsonschema", "metrics")
        self._validator = self._make_validator(schema) if schema is not None else None

    def _make_validator(self, schema: Any) -> Any:
        if not isinstance(schema, (dict, bool)):
            raise TypeError(f"JSON schema must be an object, got {type(schema).__name__}")
        cls = self._js.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except self._js.exceptions.SchemaError as exc:
            raise TypeError(f"invalid JSON schema: {exc.message}") from None
        return cls(schema)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        validator = self._validator
        if validator is None:
            schema = (sample.metadata or {}).get("json_schema")
            if schema is None:
                return Score.not_tested(self.name, "no schema: give param `schema` or metadata.json_schema")
            try:
                validator = self._make_validator(schema)
            except TypeError as exc:
                raise ValueError(f"metadata.json_schema: {exc}") from None
        try:
            doc = load_json(self.prediction(generation, context), self.params["strip_fences"])
        except ValueError as exc:
            return Score.scored(self.name, 0.0, reason=f"invalid JSON: {exc}")
        error = self._js.exceptions.best_match(validator.iter_errors(doc))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            return Score.scored(self.name, 0.0, reason=f"schema violation at {where}: {error.message}")
        return Score.scored(self.name, 1.0)


__all__ = ["JsonSchemaMatch", "JsonValid", "Number", "NumericMatch", "RegexMatch",
           "load_json", "numbers_close", "parse_number", "parse_numbers"]
