"""Metric registry: built-in names and ``package.module:Class`` references
resolve the same way. Built-ins are listed as import strings so that resolving
one name never imports the others (or anything heavy)."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ConfigError
from .metric import Metric

#: built-in metric name -> "module:Class"
_BUILTIN: dict[str, str] = {
    "exact_match": "auditkit_ray.metrics.text:ExactMatch",
    "contains": "auditkit_ray.metrics.text:Contains",
    "token_f1": "auditkit_ray.metrics.text:TokenF1",
    "non_degenerate": "auditkit_ray.metrics.text:NonDegenerate",
    "output_length": "auditkit_ray.metrics.text:OutputLength",
}
_USER: dict[str, type[Metric]] = {}


def register_metric(name: str | None = None):
    """Class decorator: make a Metric subclass available by name in configs."""

    def deco(cls: type[Metric]) -> type[Metric]:
        if not (isinstance(cls, type) and issubclass(cls, Metric)):
            raise TypeError(f"{cls!r} is not a Metric subclass")
        _USER[name or cls.name] = cls
        return cls

    return deco


def builtin_names() -> list[str]:
    return sorted(set(_BUILTIN) | set(_USER))


def resolve_metric(ref: str) -> type[Metric]:
    """Resolve a registered name or ``package.module:Class`` to a Metric class."""
    if ref in _USER:
        return _USER[ref]
    target = _BUILTIN.get(ref, ref)
    if ":" not in target:
        known = ", ".join(builtin_names())
        raise ConfigError(f"unknown metric {ref!r}: use a registered name ({known}) or 'package.module:Class'")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"metric {ref!r}: cannot import module {module_name!r} ({exc})") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ConfigError(f"metric {ref!r}: module {module_name!r} has no attribute {attr!r}")
    if not (isinstance(obj, type) and issubclass(obj, Metric)):
        raise ConfigError(f"metric {ref!r}: {target} is not a subclass of auditkit_ray.Metric")
    return obj


def build_metric(ref: str, params: dict[str, Any] | None = None, as_name: str | None = None) -> Metric:
    cls = resolve_metric(ref)
    kwargs = dict(params or {})
    if as_name:
        kwargs["as_name"] = as_name
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"metric {ref!r}: bad parameters {sorted(params or {})}: {exc}") from None
