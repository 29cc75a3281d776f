"""Which tests need Ray: tests/conftest.py marks them ``ray``, and ``make check`` (scripts/check.py) runs the
others.

A test needs Ray when its own function, a fixture it uses (directly or through other fixtures, autouse ones
included), or a function or class of the same file that one of these names (followed through that file),
does one of:

- names ``ray`` (``import ray``, ``ray.get``, ``pytest.importorskip("ray")``);
- runs a console-script command that evaluates on a cluster or manages one (``RAY_COMMANDS``): through
  ``console(...)`` or the in-process ``main([...])``, or a command line of the console script or of
  ``python -m auditkit_ray.cli`` for a subprocess; a ``console`` call whose command is not written out counts,
  unless it asks for ``--help`` or ``--dry-run``;
- calls the library's evaluation entry points (``RAY_ENTRY_POINTS``, imported from ``auditkit_ray`` or
  ``auditkit_ray.api``, or reached as an attribute of either);
- imports or runs a tests/support helper that starts a cluster (``RAY_SUPPORT``).

What a function of another file does is not followed; such a helper is listed here. Wrong in the safe
direction: a test that only might need Ray is marked (it runs in ``make test``, not in ``make check``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

RAY_COMMANDS = frozenset({"run", "sweep", "generate", "rescore", "lmeval", "up", "down", "status", "evict"})
RAY_ENTRY_POINTS = frozenset({"evaluate", "evaluate_many", "generate", "rescore", "sweep", "lmeval"})
LIBRARY = frozenset({"auditkit_ray", "auditkit_ray.api"})
#: tests/support modules that start a cluster, or evaluate on one, imported or run as scripts (not
#: ``shared_cluster``: the autouse ``cluster_gpus_free`` imports it for the tests that use ``ray_cluster``,
#: which names ``ray`` itself)
RAY_SUPPORT = frozenset({"hold_failed_run", "library_reuse", "local_cluster", "local_monitor", "local_release",
                         "local_start", "local_workdir", "resident_engines", "soak_run"})
ROOT = Path(__file__).resolve().parents[2]
HARMLESS_FLAGS = frozenset({"--help", "--dry-run"})
CLI_CALLS = frozenset({"console", "main"})


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _command_line_runs_ray(items: list[ast.AST]) -> bool:
    """A list of a subprocess's arguments: the console script (``EXE``, ``.../auditkit-ray``) or
    ``-m auditkit_ray.cli``, then a command of ``RAY_COMMANDS``."""
    texts = [_str(e) for e in items]
    for i, text in enumerate(texts[1:], 1):
        if text in RAY_COMMANDS:
            before = items[i - 1]
            if _name(before) == "EXE" or texts[i - 1] == "auditkit_ray.cli" or "auditkit-ray" in ast.unparse(before):
                return True
    return False


def _cli_call_runs_ray(call: ast.Call) -> bool:
    args = call.args
    if not args:
        return False
    first = args[0]
    if isinstance(first, (ast.List, ast.Tuple)):  # main(["run", ...])
        return bool(first.elts) and _str(first.elts[0]) in RAY_COMMANDS
    if _str(first) is not None:
        return _str(first) in RAY_COMMANDS
    if _name(call.func) != "console":  # main(argv) with argv built elsewhere: unknown, and rare
        return False
    return not any(_str(a) in HARMLESS_FLAGS for a in args)  # console(*args): the command is not written out


class _File:
    """One test file's top-level definitions and whether each, followed through the file, needs Ray."""

    def __init__(self, path: Path):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        self.library_names: set[str] = set()  # entry points imported by name
        self.library_modules: set[str] = {"api"}  # names bound to the library or its api module
        self.defs: dict[str, ast.AST] = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in LIBRARY:
                for a in node.names:
                    if a.name in RAY_ENTRY_POINTS:
                        self.library_names.add(a.asname or a.name)
                    if a.name == "api":
                        self.library_modules.add(a.asname or "api")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in LIBRARY:
                        self.library_modules.add(a.asname or a.name.split(".")[0])
        self._memo: dict[str, bool] = {}

    def _direct(self, node: ast.AST) -> tuple[bool, set[str]]:
        """(whether ``node`` itself needs Ray, the top-level names of this file it refers to)."""
        refs: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                if n.id == "ray" or n.id in self.library_names:
                    return True, refs
                if n.id in self.defs:
                    refs.add(n.id)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
                if any(m == "ray" or m.startswith("ray.") or m in RAY_SUPPORT for m in mods):
                    return True, refs
                if isinstance(n, ast.ImportFrom) and n.module in LIBRARY and any(
                        a.name in RAY_ENTRY_POINTS for a in n.names):
                    return True, refs
            elif isinstance(n, ast.Attribute):
                if n.attr in RAY_ENTRY_POINTS and _name(n.value) in self.library_modules:
                    return True, refs
            elif isinstance(n, ast.Call):
                if _name(n.func) in CLI_CALLS and _cli_call_runs_ray(n):
                    return True, refs
                if _name(n.func) == "importorskip" and n.args and _str(n.args[0]) == "ray":
                    return True, refs
            elif isinstance(n, (ast.List, ast.Tuple)):
                if _command_line_runs_ray(n.elts):
                    return True, refs
            elif _str(n) is not None and any(f"{m}.py" in n.value for m in RAY_SUPPORT):
                return True, refs
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            refs.discard(node.name)
        return False, refs

    def needs_ray(self, name: str, _seen: frozenset[str] = frozenset()) -> bool:
        if name in self._memo:
            return self._memo[name]
        node = self.defs.get(name)
        if node is None or name in _seen:
            return False
        direct, refs = self._direct(node)
        result = direct or any(self.needs_ray(r, _seen | {name}) for r in refs)
        if not _seen:
            self._memo[name] = result
        return result


@functools.lru_cache(maxsize=None)
def _file(path: str) -> _File | None:
    try:
        return _File(Path(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _defined_needs_ray(func) -> bool:
    """Whether a test or fixture function, read from its file, needs Ray."""
    import inspect

    func = inspect.unwrap(func)
    try:
        path = inspect.getsourcefile(func)
    except TypeError:
        return False
    if not path or not Path(path).resolve().is_relative_to(ROOT):  # pytest's and plugins' own fixtures
        return False
    f = _file(path)
    if f is None:
        return False
    qual = func.__qualname__.split(".")
    return f.needs_ray(qual[0])  # a method: its class, followed as a whole


def item_needs_ray(item) -> bool:
    """Whether the collected test ``item`` needs Ray: its function, or any fixture in its closure."""
    func = getattr(item, "function", None)
    if func is not None and _defined_needs_ray(func):
        return True
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name in item.fixturenames:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            if _fixture_needs_ray(fixturedef.func):
                return True
    return False


@functools.lru_cache(maxsize=None)
def _fixture_needs_ray(func) -> bool:
    return _defined_needs_ray(func)
