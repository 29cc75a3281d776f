"""The one module that touches lm-evaluation-harness's private APIs, and the
lm-eval releases it was written for.

What it uses, and why:

- ``lm_eval.tasks._yaml_loader.load_yaml``: a task's YAML read the way
  lm-eval reads it (``!function`` tags resolved, ``include`` followed), so
  that its local ``data_files`` can be resolved and hashed before lm-eval
  loads the task;
- ``Task._filters``: a task's filter ensembles, applied to the pipeline's
  outputs exactly as lm-eval's evaluator applies them, and their names (the
  ``@filter`` of each score).

A private name that is missing raises ``LmEvalCompatError`` naming lm-eval's
version and the releases this module was written for, rather than an
AttributeError deep inside a run.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ..errors import RunError, require

#: the lowest and highest lm-eval release (major, minor) whose private APIs this module was read from and tested on
LM_EVAL_WRITTEN_FOR = ((0, 4), (0, 4))

T = TypeVar("T")


class LmEvalCompatError(RunError):
    """A private lm-eval API this module relies on is not where it was."""


def import_lm_eval() -> Any:
    """The ``lm_eval`` module, or one error naming ``pip install 'auditkit-ray[lmeval]'``."""
    return require("lm_eval", "lmeval")


def lm_eval_version() -> str:
    """The installed lm-eval's version ("unknown" for a source checkout without metadata)."""
    lm_eval = import_lm_eval()
    version = getattr(lm_eval, "__version__", None)
    if version:
        return str(version)
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("lm_eval")
    except PackageNotFoundError:  # pragma: no cover - a source checkout
        return "unknown"


def _range() -> str:
    (a, b), (c, d) = LM_EVAL_WRITTEN_FOR
    return f"{a}.{b}" if (a, b) == (c, d) else f"{a}.{b} to {c}.{d}"


def _private(what: str, get: Callable[[], T]) -> T:
    """``get()``, or an LmEvalCompatError naming lm-eval's version and ``what`` is missing."""
    try:
        return get()
    except (ImportError, AttributeError) as exc:
        raise LmEvalCompatError(f"lm-eval {lm_eval_version()} has no {what} ({type(exc).__name__}: {exc}); "
                                f"auditkit-ray's lm-eval adapter (lmeval/compat.py) was written for "
                                f"lm-eval {_range()}") from None


def _yaml_loader() -> Callable[..., Any]:
    import importlib

    import_lm_eval()
    return importlib.import_module("lm_eval.tasks._yaml_loader").load_yaml


def load_task_yaml(path: str) -> dict[str, Any]:
    """A task's YAML as lm-eval reads it (functions resolved, includes followed)."""
    load_yaml = _private("lm_eval.tasks._yaml_loader.load_yaml", _yaml_loader)
    return load_yaml(path, resolve_func=True)


def task_filters(task: Any) -> list[Any]:
    """A loaded task's filter ensembles, in lm-eval's order (each has a ``name`` and ``apply(instances)``)."""
    return list(_private(f"{type(task).__name__}._filters", lambda: task._filters))
