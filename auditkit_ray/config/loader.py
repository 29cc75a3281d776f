"""Load run and sweep files (YAML or JSON) into validated specs.

Every error names the file, the field path and, where YAML gives one, the
line. ``${VAR}`` and ``${VAR:-default}`` are expanded in backend settings
(``model``); ``$${`` writes a literal ``${``. Reading a document is
``documents``, validating a run ``validate``, expanding a sweep ``sweep``.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import ValidationError

from ..core.envvars import expand_env, fmt_loc
from ..errors import ConfigError
from .documents import Lines, read_document
from .models import RunSpec, SweepSpec
from .paths import anchor_run_paths, anchor_sweep_paths
from .sweep import expand
from .validate import EXPAND_SECTIONS, run_spec_from_dict, validation_message

__all__ = ["EXPAND_SECTIONS", "Lines", "expand_env", "fmt_loc", "is_sweep", "load_config", "load_run_spec",
           "load_sweep_spec", "read_document", "run_spec_from_dict"]


def is_sweep(data: Any) -> bool:
    return isinstance(data, dict) and "base" in data


def load_run_spec(path: str | os.PathLike) -> RunSpec:
    data, lines = read_document(path)
    if is_sweep(data):
        raise ConfigError(f"{path}: this is a sweep file (it has 'base'); use `auditkit-ray sweep`")
    return run_spec_from_dict(anchor_run_paths(data, path), str(path), lines)


def load_sweep_spec(path: str | os.PathLike) -> SweepSpec:
    data, lines = read_document(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a sweep file must be a mapping, got {type(data).__name__}")
    try:
        return SweepSpec.model_validate(anchor_sweep_paths(data, path))
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, str(path), lines)) from None


def load_config(path: str | os.PathLike) -> RunSpec | SweepSpec:
    """A run or a sweep, told apart by the sweep's ``base`` key. A sweep is
    also expanded once so that every run it makes is validated."""
    data, lines = read_document(path)
    if is_sweep(data):
        sweep = load_sweep_spec(path)
        expand(sweep, source=str(path), lines=lines)
        return sweep
    return run_spec_from_dict(anchor_run_paths(data, path), str(path), lines)
