"""docs/architecture.md stays true: every module it names exists, its tables of
ranks and layers say what the layer test enforces, and its layer diagram is the
package's import graph (no arrow invented, none missing)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"


def test_every_module_the_page_names_exists():
    text = PAGE.read_text(encoding="utf-8")
    named = set(re.findall(r"auditkit_ray/[\w/]+\.py", text))
    assert len(named) > 20, named
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
    for layer in ("core", "metrics", "backends", "pipeline", "actors", "store", "compare", "report", "cli"):
        assert (ROOT / "auditkit_ray" / layer / "__init__.py").is_file(), layer
        assert f"{layer}/" in text, layer


def test_the_table_of_layers_is_the_one_the_layer_test_enforces():
    from layers import INTERNAL_ALLOWED

    rows = {}
    for first, second in re.findall(r"^\| (`\w+/`[^|]*) \| (.*) \|$", PAGE.read_text(encoding="utf-8"), re.M):
        for layer in re.findall(r"`(\w+)/`", first):
            rows[layer] = second
    for layer, allowed in INTERNAL_ALLOWED.items():
        if layer in ("cli", "core", "viewer"):
            continue  # stated in words (the facade; nothing else of the package)
        assert layer in rows, layer
        assert set(re.findall(r"`(\w+)/`", rows[layer])) == allowed, (layer, rows[layer])


# --------------------------------------------------------------------------- the diagram against the imports
#: diagram nodes that stand for more than one layer (every other node's id is its layer's name)
NODE_LAYERS = {"facade": {"", "api"}}
_ARROW = re.compile(r"^\s*(\w+)(?:\[[^\]]*\])?\s*-->\s*(?:\|[^|]*\|\s*)?(\w+)", re.M)


def _layer_diagram(text: str) -> str:
    """The first mermaid block under "## The layers"."""
    section = text.split("## The layers", 1)[1]
    return section.split("```mermaid", 1)[1].split("```", 1)[0]


def _node(layer: str) -> str:
    return next((node for node, layers in NODE_LAYERS.items() if layer in layers), layer)


def diagram_problems(diagram: str, graph: dict[str, set[str]]) -> list[str]:
    """What a diagram gets wrong about a layer graph: an arrow no import makes (invented), an import that
    is neither an arrow nor a path of arrows (missing), a node that is no layer."""
    from layers import reachable

    real: dict[str, set[str]] = {}
    for src, dsts in graph.items():
        real.setdefault(_node(src), set())
        for dst in dsts:
            if _node(dst) != _node(src):
                real[_node(src)].add(_node(dst))
    drawn: dict[str, set[str]] = {}
    for src, dst in _ARROW.findall(diagram):
        drawn.setdefault(src, set()).add(dst)
    out = [f"node {n!r} is no layer of the package" for n in sorted(set(drawn) | set().union(*drawn.values()))
           if n not in real]
    out += [f"invented arrow {a} --> {b}: no module of {a} imports {b}"
            for a in sorted(drawn) for b in sorted(drawn[a]) if b not in real.get(a, ())]
    out += [f"missing arrow {a} --> {b}: {a} imports {b}, and no path of arrows leads there"
            for a in sorted(real) for b in sorted(real[a]) if b not in reachable(drawn, a)]
    return out


def _graph():
    from layers import layer_graph, scan

    return layer_graph(scan(ROOT / "auditkit_ray"))


def test_the_layer_diagram_is_the_import_graph():
    problems = diagram_problems(_layer_diagram(PAGE.read_text(encoding="utf-8")), _graph())
    assert not problems, "docs/architecture.md's layer diagram:\n" + "\n".join(problems)


def test_a_planted_missing_arrow_fails():
    diagram = _layer_diagram(PAGE.read_text(encoding="utf-8"))
    planted = "\n".join(line for line in diagram.splitlines() if not line.strip().startswith("lmeval --> pipeline"))
    assert planted != diagram
    assert diagram_problems(planted, _graph()) == [
        "missing arrow lmeval --> pipeline: lmeval imports pipeline, and no path of arrows leads there"]


def test_a_planted_invented_arrow_fails():
    planted = _layer_diagram(PAGE.read_text(encoding="utf-8")) + "    store --> pipeline\n"
    assert diagram_problems(planted, _graph()) == ["invented arrow store --> pipeline: no module of store imports "
                                                   "pipeline"]


def test_a_planted_import_the_diagram_lacks_fails():
    graph = _graph()
    graph["metrics"] = graph["metrics"] | {"probes"}  # as if a metric imported a probe pack
    problems = diagram_problems(_layer_diagram(PAGE.read_text(encoding="utf-8")), graph)
    assert problems == ["missing arrow metrics --> probes: metrics imports probes, and no path of arrows leads there"]


def test_the_table_of_ranks_is_the_layer_tests():
    from layers import RANKS

    rows = re.findall(r"^\| (\d+) \| (.*) \|$", PAGE.read_text(encoding="utf-8"), re.M)
    page = {}
    for rank, layers in rows:
        if layers == "the package's `__init__`":
            page[""] = int(rank)
            continue
        page.update(dict.fromkeys(re.findall(r"`(\w+)/?`", layers), int(rank)))
    assert page == RANKS
