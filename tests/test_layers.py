"""The layers hold: an AST scan of every import of the package (function-level
ones included) against the rules of docs/architecture.md, and the same scan
over small planted trees, so a rule that stopped seeing violations fails too."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from layers import INTERNAL_ALLOWED, RANKS, check, scan, type_comparisons

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "auditkit_ray"


def test_package_keeps_its_layers():
    violations = check(scan(PACKAGE))
    assert not violations, "layer rules broken:\n" + "\n".join(map(str, violations))


def test_every_rank_names_a_layer_that_exists():
    layers = {s.layer(m) for s in [scan(PACKAGE)] for m in s.modules}
    assert sorted(set(RANKS) - layers) == [], "ranked layers the package no longer has"


def test_each_allow_list_names_only_lower_ranks():
    for layer, allowed in INTERNAL_ALLOWED.items():
        assert all(RANKS[a] < RANKS[layer] for a in allowed), (layer, allowed)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))
    return root


CLEAN = {
    "errors.py": "class E(Exception): ...\n",
    "core/types.py": "import json\nimport pydantic\nfrom ..errors import E\n",
    "agents/trace.py": "from ..core.types import E\n",
    "metrics/text.py": "from ..core import types\nfrom ..agents.trace import E\n",
    "backends/hf.py": "def load():\n    import torch\n    from ..core.types import E\n",
    "store/base.py": "from ..core.types import E\n",
    "compare/diff.py": "from ..store.base import E\n",
    "report/html.py": "from ..compare.diff import E\nfrom ..store import base\n",
    "actors/score.py": "import ray\nfrom ..metrics.text import E\nfrom ..backends import hf\n",
    "pipeline/plan.py": "import math\n",
    "pipeline/driver.py": "import ray\nfrom ..actors.score import E\nfrom .plan import math\n",
    "rag/corpus.py": "import re\n",
    "api.py": "from .pipeline.driver import E\n",
    "cli/main.py": "from .. import api\nfrom ..errors import E\nfrom . import output\n",
    "cli/output.py": "import sys\n",
    "cli/view.py": "def f():\n    from ..viewer import server\n",
    "viewer/server.py": "import json\nfrom aiohttp import web\nfrom .. import api\nfrom ..errors import E\n",
}
#: a module for each ranked layer CLEAN leaves out, where the package has it (a module or a package)
CLEAN.update({(f"{layer}.py" if (PACKAGE / f"{layer}.py").is_file() else f"{layer}/m.py"): "import os\n"
              for layer in RANKS if layer and not any(f.split("/")[0].removesuffix(".py") == layer for f in CLEAN)})


def _plant(src: str, dst: str) -> dict[str, str]:
    """A module of layer ``src`` importing layer ``dst`` (a function-level import: those count too)."""
    if not src:
        path, dots = "__init__.py", "."
    elif (PACKAGE / f"{src}.py").is_file():
        path, dots = f"{src}.py", "."
    else:
        path, dots = f"{src}/planted.py", ".."
    text = f"def f():\n    from {dots} import {dst}\n" if dst else f"def f():\n    from {dots} import E\n"
    return {path: text}


def _boundaries() -> list[tuple[str, str]]:
    """One upward import from every layer below the top across the boundary above it: each layer of rank r
    importing the first layer of the next rank (so every rank boundary is crossed, by each layer under it)."""
    by_rank: dict[int, list[str]] = {}
    for layer, rank in RANKS.items():
        by_rank.setdefault(rank, []).append(layer)
    ranks = sorted(by_rank)
    return [(low, by_rank[up][0]) for r, up in zip(ranks, ranks[1:]) for low in by_rank[r]]


def test_a_clean_tree_passes(tmp_path):
    assert check(scan(_tree(tmp_path, CLEAN))) == []


@pytest.mark.parametrize(
    "planted, rule",
    [
        ({"core/types.py": "def f():\n    import torch\n"}, "core/ imports only the standard library"),
        ({"core/types.py": "from ..rag.corpus import re\n"}, "core/ imports only"),
        ({"metrics/text.py": "from ..backends.hf import load\n"}, "metrics/ imports only"),
        ({"backends/hf.py": "from ..config.models import RunSpec\n"}, "backends/ imports only"),
        ({"compare/diff.py": "def f():\n    from ..pipeline import driver\n"}, "compare/ imports only"),
        ({"report/html.py": "from ..actors.score import E\n"}, "report/ imports only"),
        ({"actors/score.py": "def f():\n    from ..pipeline.plan import math\n"}, "a layer imports only lower ranks"),
        ({"store/base.py": "import ray.data\n"}, "import ray"),
        ({"lmeval/m.py": "def f():\n    import ray\n"}, "import ray"),  # it reaches Ray through the pipeline
        ({"cli/main.py": "from ..pipeline.driver import E\n"}, "cli/ imports only"),
        ({"store/db.py": "from ..api import E\n"}, "a layer imports only lower ranks"),  # api ranks 10
        ({"viewer/server.py": "from ..report.browse import E\n"}, "viewer/ imports only"),
        ({"viewer/server.py": "import pyarrow\n"}, "viewer/ imports only the standard library and aiohttp"),
        ({"metrics/rag.py": "from .text import _helper\n"}, "no private name from another module"),
        ({"store/base.py": "from .s3 import S3\n", "store/s3.py": "def f():\n    from .base import Base\n"},
         "no import cycle"),
    ],
)
def test_a_planted_violation_is_found(tmp_path, planted, rule):
    violations = check(scan(_tree(tmp_path, {**CLEAN, **planted})))
    assert [v for v in violations if v.rule.startswith(rule) or rule in v.rule], violations
    assert len(violations) == 1, violations


@pytest.mark.parametrize("src, dst", list(dict.fromkeys(_boundaries() + [
    # the upward imports the ranks were written to stop (each was accepted before them)
    ("store", "pipeline"), ("agents", "backends"), ("config", "actors"), ("data", "report"),
    ("judges", "pipeline"), ("integrations", "cli"), ("pipeline", "lmeval"),
    ("data", "sources"),  # siblings: one rank, neither imports the other
])), ids=lambda layer: layer or "pkg")
def test_a_planted_upward_import_is_found_in_every_layer_at_every_rank_boundary(tmp_path, src, dst):
    violations = check(scan(_tree(tmp_path, {**CLEAN, **_plant(src, dst)})))
    assert len(violations) == 1, violations
    assert f"imports {dst}" in violations[0].detail or (not dst and "imports pkg" in violations[0].detail), violations


def test_the_plants_cover_every_layer_and_every_rank_boundary():
    plants = _boundaries()
    assert {src for src, _ in plants} == {layer for layer, rank in RANKS.items() if rank < max(RANKS.values())}
    assert {(RANKS[src], RANKS[dst]) for src, dst in plants} == {
        (r, up) for r, up in zip(sorted(set(RANKS.values())), sorted(set(RANKS.values()))[1:])}


def test_a_type_checking_upward_import_is_found(tmp_path):
    files = {**CLEAN, "store/planted.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from ..pipeline.driver import E\n"}
    assert [v.rule for v in check(scan(_tree(tmp_path, files)))] == ["a layer imports only lower ranks"]


@pytest.mark.parametrize("new", ["newlayer/mod.py", "newmodule.py"])
def test_an_unranked_module_fails_until_it_is_ranked(tmp_path, new):
    violations = check(scan(_tree(tmp_path, {**CLEAN, new: "from .errors import E\n" if "/" not in new
                                                        else "from ..errors import E\n"})))
    assert [v.rule for v in violations] == ["every module has a rank"], violations
    assert new.split("/")[0].removesuffix(".py") in violations[0].detail


def test_a_type_checking_import_closes_a_cycle_too(tmp_path):
    files = {**CLEAN, "store/base.py": "from .s3 import S3\n",
             "store/s3.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .base import Base\n"}
    assert [v.rule for v in check(scan(_tree(tmp_path, files)))] == ["no import cycle"]


#: where a backend's type may be compared: the backends themselves and the registry
TYPE_HOMES = ("backends/", "core/backends.py")


def _builtin_types() -> set[str]:
    from auditkit_ray.core.backends import backend_types

    return set(backend_types())


def test_no_backend_type_is_compared_outside_the_backends():
    violations = type_comparisons(PACKAGE, _builtin_types(), TYPE_HOMES)
    assert not violations, "\n".join(map(str, violations))


@pytest.mark.parametrize("line", [
    'if spec.model.type in ("hf", "vllm"):\n    pass\n',
    'x = 1 if run["backend"] == "api" else 0\n',
    'ok = backend != "precomputed"\n',
    'ok = r.get("backend") == "agent"\n',
])
def test_a_planted_type_comparison_is_found(tmp_path, line):
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "plan.py").write_text(line)
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "hf.py").write_text(line)  # at home: allowed
    assert [v.where for v in type_comparisons(tmp_path, _builtin_types(), TYPE_HOMES)] == ["pipeline/plan.py:1"]


def test_comparisons_of_other_types_are_not_backend_types(tmp_path):
    (tmp_path / "m.py").write_text('a = r.retriever == "precomputed"\nb = spec.type == "regex"\n'
                                   'c = err["type"] == "missing"\n')
    assert type_comparisons(tmp_path, _builtin_types(), TYPE_HOMES) == []
