#!/usr/bin/env python
"""``make check``'s tests: the inner loop a contributor runs while working (docs/testing.md).

    python scripts/check.py [--base REF] [--list] [PYTEST_ARGS...]

One pytest run of every test that needs no Ray and is not marked ``slow`` (the ``ray`` mark comes from
tests/conftest.py), tests/test_layers.py among them, plus every test, Ray or slow included, of the test
folders that mirror the package folders this change touches: what differs from the merge base with
``--base`` (default ``origin/main``, else ``main``), committed or not, and untracked files.
``auditkit_ray/compare/...`` selects tests/compare, a changed or new test file selects itself, a changed
``tests/<folder>/conftest.py`` its folder. ``--list`` prints the selection and runs nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def changed_files(base: str | None) -> tuple[str | None, list[str]]:
    """(the merge base used, or None if none was found; the files changed since it and the untracked ones)."""
    files: set[str] = set()
    used = None
    for ref in [base] if base else ["origin/main", "main"]:
        merge_base = _git("merge-base", "HEAD", ref)
        if merge_base:
            used = ref
            files.update((_git("diff", "--name-only", merge_base.strip()) or "").split())
            break
    files.update((_git("ls-files", "--others", "--exclude-standard") or "").split())
    return used, sorted(files)


def touched_tests(files: list[str]) -> list[str]:
    """The test paths (folders or files, relative to the repository) that mirror the changed files."""
    picked: set[str] = set()
    for f in files:
        parts = Path(f).parts
        if len(parts) > 2 and parts[0] == "auditkit_ray" and (ROOT / "tests" / parts[1]).is_dir():
            picked.add(f"tests/{parts[1]}")
        elif parts[0] == "tests" and (ROOT / f).is_file():
            if parts[-1].startswith("test_") and parts[-1].endswith(".py"):
                picked.add(f)
            elif parts[-1] == "conftest.py" and len(parts) > 2:
                picked.add(str(Path(*parts[:-1])))
    return sorted(p for p in picked if not any(p.startswith(q + "/") for q in picked if q != p))


class Selection:
    """A pytest plugin: keeps the tests that need no Ray and are not slow, and every test under ``paths``."""

    def __init__(self, paths: list[str]):
        self.paths = tuple(paths)

    def keep(self, item) -> bool:
        where = item.nodeid.split("::", 1)[0]
        if any(where == p or where.startswith(p + "/") for p in self.paths):
            return True
        return item.get_closest_marker("ray") is None and item.get_closest_marker("slow") is None

    @pytest.hookimpl(trylast=True)  # after tests/conftest.py has put the ray marks on
    def pytest_collection_modifyitems(self, config, items):
        kept = [i for i in items if self.keep(i)]
        dropped = [i for i in items if not self.keep(i)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept


def main(argv: list[str]) -> int:
    base = None
    if argv[:1] == ["--base"]:
        base, argv = argv[1], argv[2:]
    listing = argv[:1] == ["--list"]
    if listing:
        argv = argv[1:]
    used, files = changed_files(base)
    paths = touched_tests(files)
    print(f"check: {len(files)} files changed since {used or '(no merge base found)'} or untracked; "
          f"their tests: {' '.join(paths) or 'none'}", flush=True)
    if listing:
        return 0
    os.chdir(ROOT)
    model, script = ROOT / "examples" / "tiny-model" / "config.json", ROOT / "examples" / "tiny_model" / "build.py"
    if model.is_file() and model.stat().st_mtime >= script.stat().st_mtime:  # as make's rule for it decides
        os.environ["AUDITKIT_TEST_TINY_MODEL"] = str(model.parent)  # the tiny_model fixture copies it
    rc = pytest.main(["-q", "--durations=15", *argv], plugins=[Selection(paths)])
    if rc == 5:
        print("check: pytest collected no tests", file=sys.stderr)
        return 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
