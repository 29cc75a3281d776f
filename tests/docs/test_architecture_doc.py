"""docs/architecture.md stays true: every module it names exists, and its
table of layers says what the layer test enforces."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
sys.path.insert(0, str(ROOT / "tests" / "support"))


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
