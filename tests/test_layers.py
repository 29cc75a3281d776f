"""The layers hold: an AST scan of every import of the package (function-level
ones included) against the rules of docs/architecture.md, and the same scan
over small planted trees, so a rule that stopped seeing violations fails too."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from layers import check, scan

ROOT = Path(__file__).resolve().parents[1]


def test_package_keeps_its_layers():
    violations = check(scan(ROOT / "auditkit_ray"))
    assert not violations, "layer rules broken:\n" + "\n".join(map(str, violations))


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
        ({"actors/score.py": "def f():\n    from ..pipeline.plan import math\n"}, "actors/ never imports pipeline/"),
        ({"store/base.py": "import ray.data\n"}, "import ray"),
        ({"cli/main.py": "from ..pipeline.driver import E\n"}, "cli/ imports only"),
        ({"store/db.py": "from ..api import E\n"}, "only the facade and the CLI import api.py"),
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


def test_a_type_checking_import_closes_a_cycle_too(tmp_path):
    files = {**CLEAN, "store/base.py": "from .s3 import S3\n",
             "store/s3.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .base import Base\n"}
    assert [v.rule for v in check(scan(_tree(tmp_path, files)))] == ["no import cycle"]
