"""The strict pydantic base of every settings model (run files, sweep files,
backend settings): an unknown key is an error, never silently ignored; a number is finite (no NaN or
infinity) and never a boolean (``batch_size: true`` is not 1)."""

from __future__ import annotations

import typing
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator


class FieldError(ValueError):
    """A model's check that names the field it is about (``field``): messages report it at that field's
    path and line, not at the model's (``config.validate``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _is_number(annotation: Any) -> bool:
    """Whether a field's type takes an int or a float (alone, optional, or in a union), and not a bool."""
    if annotation is int or annotation is float:
        return True
    return any(_is_number(a) for a in typing.get_args(annotation) if a is not bool)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    #: the input keys (names and aliases) of each model's numeric fields, worked out once per model
    _numbers: ClassVar[dict[type, frozenset[str]]] = {}

    @classmethod
    def _number_keys(cls) -> frozenset[str]:
        keys = Strict._numbers.get(cls)
        if keys is None:
            keys = frozenset(k for name, f in cls.model_fields.items() if _is_number(f.annotation)
                             for k in (name, f.alias) if k)
            Strict._numbers[cls] = keys
        return keys

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        # pydantic takes true for 1 and false for 0 in a number field; a setting written `repeats: true` is
        # a mistake, not a count
        if isinstance(data, dict) and bool in set(map(type, data.values())):  # rare: look closer only then
            keys = cls._number_keys()
            for key, value in data.items():
                if key in keys and isinstance(value, bool):
                    raise FieldError(key, f"{str(value).lower()} is a boolean, not a number")
        return data
