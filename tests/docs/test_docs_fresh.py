"""The generated reference pages (docs/configuration.md from the JSON Schema,
docs/metrics.md from the metric registry) must match the code. When this
fails, run ``python scripts/gen_docs.py`` and commit the result."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "scripts" / "gen_docs.py"


def _module():
    spec = importlib.util.spec_from_file_location("_auditkit_gen_docs", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_GEN = _module()


def _gen(*args: str) -> SimpleNamespace:
    """Run the generator's main() in-process (the CLI is the same function)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = _GEN.main(list(args))
    return SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


def test_generated_docs_are_fresh():
    proc = _gen("--check")
    assert proc.returncode == 0, (
        f"generated docs are stale: run `python scripts/gen_docs.py` and commit the result\n{proc.stderr}"
    )


def test_check_mode_detects_stale_and_missing_pages(tmp_path):
    # missing pages are stale
    proc = _gen("--check", "--docs", str(tmp_path))
    assert proc.returncode == 1
    assert "docs/configuration.md" in proc.stderr and "docs/metrics.md" in proc.stderr
    # writing them makes the check pass, and the output is stable
    assert _gen("--docs", str(tmp_path)).returncode == 0
    first = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()}
    assert _gen("--check", "--docs", str(tmp_path)).returncode == 0
    # one edited line makes it stale again, and --check writes nothing
    page = tmp_path / "metrics.md"
    page.write_text(first["metrics.md"].replace("exact_match", "exact_matsch", 1), encoding="utf-8")
    proc = _gen("--check", "--docs", str(tmp_path))
    assert proc.returncode == 1 and "docs/metrics.md" in proc.stderr and "configuration.md" not in proc.stderr
    assert "exact_matsch" in page.read_text(encoding="utf-8")


def test_pages_cover_the_registry_and_the_schema():
    from auditkit_ray.config import json_schema
    from auditkit_ray.core.metric import metric_info
    from auditkit_ray.core.registry import BUILTIN, resolve_metric

    metrics = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    for name in sorted(BUILTIN):  # built-ins (other tests register metrics of their own at run time)
        info = metric_info(resolve_metric(name))
        assert f"### {name}\n" in metrics, name
        assert f"(`{info['direction']}`)" in metrics
    config = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for kind in ("run", "sweep"):
        schema = json_schema(kind)
        for field in schema["properties"]:
            assert f"| `{field}` |" in config, (kind, field)
        for name in schema.get("$defs", {}):
            assert f"### {kind}: {name}\n" in config, (kind, name)
