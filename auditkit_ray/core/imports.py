"""Importing user code named in configs (``package.module:Class``).

Custom metrics, oracles, agents and comparators are imported only from the
working directory the run was started in, from installed packages (site-
packages, the standard library), from auditkit-ray itself, or from folders
listed in ``AUDITKIT_RAY_TRUSTED_PATHS``: a config cannot make a worker
import code from an arbitrary path such as /tmp. The check runs before the
module's code does.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

from ..errors import ConfigError

WORKDIR_ENV = "AUDITKIT_RAY_WORKDIR"
TRUSTED_ENV = "AUDITKIT_RAY_TRUSTED_PATHS"


def trusted_roots() -> list[Path]:
    roots = [Path(os.environ.get(WORKDIR_ENV) or os.getcwd())]
    paths = sysconfig.get_paths()
    roots += [Path(paths[k]) for k in ("purelib", "platlib", "stdlib", "platstdlib") if k in paths]
    roots.append(Path(__file__).resolve().parents[1])  # auditkit_ray itself
    roots += [Path(p) for p in os.environ.get(TRUSTED_ENV, "").split(os.pathsep) if p]
    return [r.resolve() for r in roots]


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def import_user_module(module_name: str, what: str = "module") -> ModuleType:
    if module_name in sys.modules:
        return sys.modules[module_name]
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"{what}: cannot import {module_name!r} ({exc})") from None
    if spec is None:
        raise ConfigError(f"{what}: no module named {module_name!r} (run from the folder that holds it, or install it)")
    locations = [spec.origin] if spec.origin and spec.origin not in ("built-in", "frozen") else []
    locations += list(spec.submodule_search_locations or [])
    roots = trusted_roots()
    for loc in locations:
        if not _inside(Path(loc).resolve(), roots):
            raise ConfigError(
                f"{what}: module {module_name!r} lives at {loc}, outside the working directory and installed packages; "
                f"install it, run from its folder, or list the folder in {TRUSTED_ENV}"
            )
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot import {module_name!r} ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - the module's own code failed (a class it defines is refused, a bug)
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"{what}: importing {module_name!r} failed{_where(exc, spec.origin)}: "
                          f"{type(exc).__name__}: {first}") from None


def _where(exc: BaseException, origin: str | None) -> str:
    """`` at FILE:LINE`` of the user's module where ``exc`` arose (its last frame there), or empty."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f" at {exc.filename}:{exc.lineno}"
    if not origin:
        return ""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(origin):
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" at {origin}:{line}" if line else ""
