"""An AST scan of a package's imports against the project's layer rules.

Every import counts, module-level, inside a function or under
``if TYPE_CHECKING:``: a type-only import never runs, but two modules that
name each other's types still depend on each other, so it closes a cycle too.
``tests/test_layers.py`` runs it over ``auditkit_ray`` and over small planted
trees, so a rule that stopped seeing violations would fail too.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

STDLIB = set(sys.stdlib_module_names) | {"__future__"}
#: modules any layer may import: the typed errors and the version
ANYWHERE = {"errors", "_version"}


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted, without the package name ("pipeline.driver")
    target: str  # imported module or name, dotted ("core.types", "ray.data", "yaml")
    internal: bool  # target is a module of the package
    lineno: int
    private_name: str | None = None  # a `_name` taken from another module of the package
    type_checking: bool = False


@dataclass
class Scan:
    package: str
    modules: dict[str, Path] = field(default_factory=dict)  # "pipeline.driver" -> file ("" is the package)
    imports: list[Import] = field(default_factory=list)

    def layer(self, module: str) -> str:
        """First component below the package: "pipeline", "core", "api", "" for the package's __init__."""
        return module.split(".", 1)[0]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(tree: ast.AST):
    """Import nodes with whether they sit under ``if TYPE_CHECKING:``."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, guarded = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, guarded
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((child, True) for child in node.body)
            stack.extend((child, guarded) for child in node.orelse)
            continue
        stack.extend((child, guarded) for child in ast.iter_child_nodes(node))


def scan(root: Path) -> Scan:
    """Read every module under the package directory ``root``."""
    root = Path(root)
    out = Scan(root.name)
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.modules[".".join(parts)] = path
    for module, path in out.modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, guarded in _walk(tree):
            out.imports.extend(_resolve(out, module, is_pkg, node, guarded))
    return out


def _internal(scan_: Scan, dotted: str) -> str | None:
    """The package module ``dotted`` (absolute, with the package name) names, or None."""
    if dotted != scan_.package and not dotted.startswith(scan_.package + "."):
        return None
    rest = dotted[len(scan_.package) + 1:]
    while rest not in scan_.modules and rest:
        rest = rest.rpartition(".")[0]
    return rest


def _resolve(scan_: Scan, module: str, is_pkg: bool, node: ast.AST, guarded: bool):
    here = [scan_.package] + ([p for p in module.split(".") if p])
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield _make(scan_, module, alias.name, node.lineno, guarded)
        return
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = here if is_pkg else here[:-1]
        base = base[: len(base) - (node.level - 1)]
        name = ".".join(base + ([node.module] if node.module else []))
    else:
        name = node.module or ""
    for alias in node.names:
        full = f"{name}.{alias.name}"
        internal_full = _internal(scan_, full)
        if internal_full is not None and f"{scan_.package}.{internal_full}".rstrip(".") == full:
            yield _make(scan_, module, full, node.lineno, guarded)  # `from pkg import submodule`
            continue
        imp = _make(scan_, module, name, node.lineno, guarded)
        private = alias.name.startswith("_") and not alias.name.startswith("__")
        if imp.internal and private and imp.target != module:
            imp = Import(imp.source, imp.target, True, imp.lineno, alias.name, guarded)
        yield imp


def _make(scan_: Scan, module: str, dotted: str, lineno: int, guarded: bool) -> Import:
    internal = _internal(scan_, dotted)
    if internal is not None:
        return Import(module, internal, True, lineno, None, guarded)
    return Import(module, dotted, False, lineno, None, guarded)


# --------------------------------------------------------------------------- the rules
@dataclass(frozen=True)
class Violation:
    rule: str
    where: str  # "pipeline/driver.py:14"
    detail: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}: {self.detail}"


#: every layer of the package (a top-level module or package, "" for the package's ``__init__``) and its
#: rank: a layer imports only layers of a lower rank (and itself); two layers of one rank are siblings and
#: import neither each other nor anything above. A module of a layer not listed here fails the test until
#: it is given a rank. docs/architecture.md draws this order from the imports (tests/docs).
RANKS: dict[str, int] = {
    "errors": 0, "_version": 0,  # importable from anywhere
    "core": 1,  # contracts, registries, fingerprints
    # domain code over core alone
    "agents": 2, "probes": 2, "adapters": 2, "init_templates": 2,
    # over the agents' shared code; config is the strict models (core, the backend registry, probe packs)
    "backends": 3, "metrics": 3, "annotators": 3, "oracles": 3, "config": 3,
    # the result store (its cache tool reads the api backend's default cache path), and what reads a config
    "store": 4, "catalogue": 4, "k8s": 4,
    # over the store: dataset locations, model sources, comparisons, result sinks, trace inspection, test helpers
    # (stand-in servers over the backends, stored runs written in the store's layout)
    "data": 5, "sources": 5, "compare": 5, "integrations": 5, "trace_inspect": 5, "testing": 5,
    "rag": 6, "report": 6, "judges": 6,
    "actors": 7, "cluster": 7,  # what runs inside Ray actors; the local Ray a machine's commands share
    "pipeline": 8,  # the driver side
    "lmeval": 9,  # lm-eval tasks, run directly or through the pipeline
    "api": 10, "": 11,  # the facade
    "viewer": 12, "cli": 13,  # the front ends
}
#: layer -> the package layers it may import (itself, errors and _version always allowed): narrower than the
#: ranks below it, for the layers whose whole point is to stand on little (checked against RANKS)
INTERNAL_ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "metrics": {"core", "agents"},
    "annotators": {"core", "agents"},
    "oracles": {"core", "agents"},
    "backends": {"core", "agents"},
    "config": {"core", "probes"},
    "sources": {"core", "store"},
    #: the cluster layer stands on the contracts alone: it holds actors' handles, never their code
    "cluster": {"core"},
    "compare": {"core", "store"},
    "report": {"core", "store", "compare"},
    #: helpers a user's tests import: what they stand in for (a backend's server), the stored layout; no Ray
    "testing": {"core", "backends", "config", "store"},
    "cli": {"", "api", "viewer"},
    #: the web viewer: a second front end on the facade (the CLI's ``view`` command starts it)
    "viewer": {"", "api"},
}
#: third-party packages core/ may import
CORE_THIRD_PARTY = {"pydantic", "pydantic_core", "yaml", "orjson"}
#: layers that may import ray
RAY_LAYERS = {"pipeline", "actors", "cluster"}
#: third-party packages viewer/ may import
VIEWER_THIRD_PARTY = {"aiohttp"}


def _rank_name(layer: str) -> str:
    return f"{layer}/" if layer else "the package's __init__"


def check(scan_: Scan) -> list[Violation]:
    out: list[Violation] = []
    root = scan_.modules[""].parent
    for layer in sorted({scan_.layer(m) for m in scan_.modules} - set(RANKS)):
        first = min(m for m in scan_.modules if scan_.layer(m) == layer)
        out.append(Violation("every module has a rank", str(scan_.modules[first].relative_to(root)),
                             f"{layer!r} is not in tests/support/layers.py RANKS: give it the rank of what it "
                             f"imports plus one"))
    for imp in scan_.imports:
        where = f"{scan_.modules[imp.source].relative_to(root)}:{imp.lineno}"
        src = scan_.layer(imp.source)
        top = imp.target.split(".", 1)[0]
        if imp.internal:
            dst = scan_.layer(imp.target)
            allowed = INTERNAL_ALLOWED.get(src)
            own = dst == src or dst in ANYWHERE  # its own layer, or one every layer may import: no rule applies
            if not own and allowed is not None:
                if dst not in allowed:
                    out.append(Violation(f"{src or 'the package'}/ imports only {sorted(allowed | ANYWHERE)}", where,
                                         f"imports {imp.target or scan_.package}"))
            elif not own and src in RANKS and dst in RANKS and RANKS[dst] >= RANKS[src]:
                kind = "a sibling" if RANKS[dst] == RANKS[src] else "a higher"
                out.append(Violation("a layer imports only lower ranks", where,
                                     f"{_rank_name(src)} (rank {RANKS[src]}) imports {imp.target or scan_.package}, "
                                     f"{kind} layer (rank {RANKS[dst]})"))
            if imp.private_name:
                out.append(Violation("no private name from another module", where,
                                     f"imports {imp.private_name} from {imp.target}"))
        else:
            if src == "core" and top not in STDLIB | CORE_THIRD_PARTY:
                out.append(Violation("core/ imports only the standard library, pydantic, PyYAML and orjson",
                                     where, f"imports {imp.target}"))
            if src == "viewer" and top not in STDLIB | VIEWER_THIRD_PARTY:
                out.append(Violation("viewer/ imports only the standard library and aiohttp", where,
                                     f"imports {imp.target}"))
            if top == "ray" and src not in RAY_LAYERS:
                out.append(Violation(f"only {sorted(RAY_LAYERS)} import ray", where, f"imports {imp.target}"))
    out.extend(cycles(scan_))
    return out


def layer_graph(scan_: Scan) -> dict[str, set[str]]:
    """layer -> the other layers it imports (``errors`` and ``_version``, importable anywhere, left out)."""
    graph: dict[str, set[str]] = {scan_.layer(m): set() for m in scan_.modules if scan_.layer(m) not in ANYWHERE}
    for imp in scan_.imports:
        src, dst = scan_.layer(imp.source), scan_.layer(imp.target)
        if imp.internal and src != dst and src in graph and dst in graph:
            graph[src].add(dst)
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The layers ``start`` reaches through one or more arrows."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def reduced(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The arrows no longer path implies (the transitive reduction of an acyclic graph): what a diagram draws."""
    return {a: {b for b in bs if not any(b in reachable(graph, c) for c in bs - {b})} for a, bs in graph.items()}


def cycles(scan_: Scan) -> list[Violation]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in scan_.modules}
    for imp in scan_.imports:
        if imp.internal and imp.target != imp.source:
            graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return [Violation("no import cycle", ", ".join(c), " <-> ".join(c)) for c in found]


# --------------------------------------------------------------------------- backend type strings
def _strings(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*map(_strings, node.elts)) if node.elts else set()
    return set()


def _names_a_backend(node: ast.expr) -> bool:
    """``x.type``, ``backend``, ``run["backend"]``, ``x.get("backend")``: what holds a backend's type."""
    if isinstance(node, ast.Attribute):
        return node.attr == "type" or "backend" in node.attr
    if isinstance(node, ast.Name):
        return "backend" in node.id
    if isinstance(node, ast.Subscript):
        return _names_a_backend(node.value) or "backend" in _strings(node.slice) or \
            any("backend" in s for s in _strings(node.slice))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return any("backend" in s or s == "type" for a in node.args for s in _strings(a))
    return False


def type_comparisons(root: Path, types: set[str], allowed: tuple[str, ...]) -> list[Violation]:
    """Comparisons of a backend's type with one of ``types`` outside the modules under ``allowed`` (paths
    relative to ``root``): a capability belongs on the settings class, where a plugin's subclass inherits it."""
    out = []
    for path in sorted(Path(root).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(allowed):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            named = set().union(*map(_strings, sides)) & types
            if named and any(_names_a_backend(s) for s in sides):
                out.append(Violation("no backend type compared outside backends/ and the registry",
                                     f"{rel}:{node.lineno}", f"compares with {sorted(named)}: make it a "
                                     "capability of the settings (core/backends.py BackendSettings)"))
    return out
