"""The schema fuzzer (issue 56): run and sweep files made by mutating the project's own examples (``init``'s
files, examples/, examples/rag/, jobs/examples/) are given to ``validate``, in-process, and every one gets a
verdict: rc 0, or rc 2 with one ``error:`` line of bounded length that names the file, no control character
sent raw, and never an exception; each within 2 s of CPU (a guard against runaway work, not a speed figure:
the files here take tens of milliseconds).

Mutations: keys deleted, misspelt and added; values replaced by every type (huge, negative, NaN and infinite
numbers, booleans where counts go, long and control-character strings, ``${...}`` forms, template filters,
deep nesting); sweeps given grids from one cell to far beyond the limit; the text truncated, given BOMs,
non-UTF-8 bytes, YAML tags, alias bombs and duplicated lines; JSON as well as YAML; empty files and folders.

``make test`` runs it derandomised (tests/conftest.py's profile) with a budget of about a minute
(``AUDITKIT_FUZZ_EXAMPLES`` per test, 600 by default); ``make fuzz`` runs it long with fresh random draws
(``AUDITKIT_FUZZ_EXAMPLES=5000 AUDITKIT_FUZZ_RANDOM=1``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditkit_ray.cli import main
from auditkit_ray.config.documents import read_text
from auditkit_ray.init_templates import files as starter_files

ROOT = Path(__file__).resolve().parents[2]
#: the examples the fuzzer starts from (the repository's, read from its root)
REPO_SEEDS = ["examples/demo.yaml", "examples/echo.yaml", "examples/rag/rag_sweep.yaml",
              "jobs/examples/demo_sweep.yaml", "jobs/examples/leaderboard.yaml", "jobs/examples/pruning_grid.yaml"]
#: the longest an error line may be beyond the file's own name (the issue: "a few hundred characters")
MAX_EXTRA_CHARS = 800
#: CPU seconds one file may take (the issue's "within a second or two")
MAX_CPU_S = 2.0

EXAMPLES = int(os.environ.get("AUDITKIT_FUZZ_EXAMPLES", "600"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("AUDITKIT_FUZZ_RANDOM"),
                database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# ------------------------------------------------------------------------------------------- seeds
@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> list[tuple[str, dict, Path]]:
    """(name, document, folder a mutant is written to): init's files in a folder with their data, and the
    repository's examples (their relative paths resolve from the repository root, the working directory)."""
    init = tmp_path_factory.mktemp("init")
    for rel, text in starter_files().items():
        (init / rel).parent.mkdir(parents=True, exist_ok=True)
        (init / rel).write_text(text)
    out = [(rel, read_text(text)[0], init) for rel, text in starter_files().items() if rel.endswith(".yaml")]
    repo = tmp_path_factory.mktemp("repo")
    for rel in REPO_SEEDS:
        out.append((rel, read_text((ROOT / rel).read_text())[0], repo))  # YAML 1.2 booleans: `on:` a key
    assert len(out) == len(REPO_SEEDS) + 2
    return out


# ------------------------------------------------------------------------------------------- values
LONG = ["a" * 5000, "x/" * 3000, "é" * 300, "d/" * 20 + "n" * 300]
NASTY_TEXT = ["\x1b[31mred\x1b[0m", "a\x00b", "tab\there", "line\nbreak", "\u202eevil", "🙂", "", " ",
              "${HOME}", "${AUDITKIT_FUZZ_UNSET}", "${AUDITKIT_FUZZ_UNSET:-fallback}", "${", "${1x}", "${X:y}",
              "$${LITERAL}", "{{ question | upper }}", "{{ question }}", "{{ missing }}", "{{ }}", "{{ a.b() }}",
              "examples/data/arith.jsonl", "data/tiny.jsonl", "examples/rag/corpus.jsonl", "/", ".", "..",
              "s3://", "s3://bucket/key", "examples", "examples/tiny-model", "org/model", "on", "yes", "null",
              "2024-01-01", "0x1f", "1e400", "-.inf", "true", "exact_match", "echo", "regex", "hf", "last"]
NUMBERS = [0, 1, -1, 2, 10**6, 2**31, 2**63, 2**64, -(2**63) - 1, 10**30, 10**400, 5e-324, 1e308, -0.0, 0.5,
           float("nan"), float("inf"), float("-inf"), True, False, None]
scalars = st.one_of(
    st.sampled_from(NUMBERS), st.integers(), st.floats(), st.booleans(), st.none(),
    st.sampled_from(NASTY_TEXT), st.sampled_from(LONG), st.text(max_size=40),
)
values = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=4),
                                                   st.dictionaries(st.text(max_size=10), c, max_size=4)),
                      max_leaves=10)


def _places(doc: object, here: tuple = ()) -> list[tuple]:
    """Every key path and list position in ``doc`` (the document itself as ``()``)."""
    out = [here]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _places(v, here + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _places(v, here + (i,))
    return out


def _parent(doc: object, place: tuple) -> object:
    for p in place[:-1]:
        doc = doc[p]
    return doc


def _misspelt(draw, key: str) -> str:
    if not key:
        return "x"
    i = draw(st.integers(0, len(key) - 1))
    how = draw(st.sampled_from(["drop", "double", "swap", "case"]))
    if how == "drop":
        return key[:i] + key[i + 1:] or "k"
    if how == "double":
        return key[:i] + key[i] + key[i:]
    if how == "swap" and i + 1 < len(key):
        return key[:i] + key[i + 1] + key[i] + key[i + 2:]
    return key.upper()


def _nested(depth: int, leaf: object) -> object:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@st.composite
def mutated_documents(draw, seeds: list) -> tuple[str, object, Path]:
    name, doc, folder = draw(st.sampled_from(seeds))
    doc = json.loads(json.dumps(doc))  # a fresh copy
    for _ in range(draw(st.integers(1, 3))):
        places = _places(doc)
        place = draw(st.sampled_from(places))
        op = draw(st.sampled_from(["set", "set", "delete", "misspell", "add", "deepen", "grid"]))
        if op == "grid" and isinstance(doc, dict):
            sizes = draw(st.lists(st.sampled_from([1, 2, 3, 10, 40, 300, 1000, 100_000]), min_size=1, max_size=3))
            cells = 1
            for n in sizes:
                cells *= n
            if cells > 1000:  # beyond what is validated quickly: only in a shape refused by its count
                sizes = [1000, 1000, 1000][: max(2, len(sizes))]
            keys = draw(st.lists(st.sampled_from(["seed", "generation.temperature", "model.field", "model.path",
                                                  "dataset.limit", "generation.max_new_tokens", "repeats",
                                                  "prompt.template", "a..b", "", "name"]),
                                 min_size=len(sizes), max_size=len(sizes)))
            doc.setdefault("base", {"model": {"type": "echo"}, "dataset": {"path": "data/tiny.jsonl"}})
            doc["grid"] = {k: list(range(n)) if k != "model.field" else ["target", "prompt"][: n]
                           for k, n in zip(keys, sizes)}
            continue
        if not place:
            if op == "set":
                doc = draw(values)
            continue
        parent, key = _parent(doc, place), place[-1]
        if op == "set":
            parent[key] = draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "misspell" and isinstance(parent, dict):
            parent[_misspelt(draw, str(key))] = parent.pop(key)
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "seeed", "grid", "base", "runs", "type", "path"]))] = draw(values)
        elif op == "deepen":
            depth = draw(st.sampled_from([2, 50, 99, 101, 400, 3000]))
            # a few hundred levels and more are written into the text (``_deep``): no walker of this test
            # (nor yaml.safe_dump) takes them
            parent[key] = _nested(depth, parent[key]) if depth < 200 else f"@@DEEP{depth}@@"
    return name, doc, folder


def _deep(text: str) -> str:
    """The text with each ``@@DEEPn@@`` (quoted or not) as n nested empty lists."""
    return re.sub(r"[\"']?@@DEEP(\d+)@@[\"']?", lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)


def _yaml_text(doc: object) -> str:
    try:
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10_000)
    except (yaml.YAMLError, RecursionError, UnicodeError):
        return json.dumps(doc, default=str)


def _json_text(doc: object) -> str:
    try:
        return json.dumps(doc)  # NaN and Infinity as JSON's parser reads them (and this reader refuses)
    except (ValueError, RecursionError):
        return "{" + "[" * 5000


@st.composite
def damaged_text(draw, text: str) -> bytes:
    """``text`` damaged as bytes: cut, given a BOM or bytes that are not UTF-8, a line repeated (a duplicate
    key), a YAML tag before a value, an alias bomb, deep nesting, or replaced by noise."""
    raw = text.encode("utf-8", "surrogatepass")
    how = draw(st.sampled_from(["cut", "bom", "utf16", "bytes", "dupline", "tag", "bomb", "deep", "noise",
                                "empty", "keep"]))
    lines = text.splitlines(keepends=True)
    if how == "cut":
        return raw[: draw(st.integers(0, len(raw)))]
    if how == "bom":
        return b"\xef\xbb\xbf" + raw
    if how == "utf16":
        return text.encode("utf-16", "surrogatepass")
    if how == "bytes":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    if how == "dupline" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        return "".join(lines[: i + 1] + [lines[i]] + lines[i + 1:]).encode("utf-8", "surrogatepass")
    if how == "tag" and ": " in text:
        tag = draw(st.sampled_from(["!!int", "!!float", "!!str", "!!bool", "!!null", "!!timestamp", "!!binary",
                                    "!!set", "!!omap", "!!python/object/apply:os.getcwd", "!custom", "!!map",
                                    "!!seq"]))
        spots = [m.start() for m in re.finditer(": ", text)]
        at = draw(st.sampled_from(spots)) + 2
        return (text[:at] + tag + " " + text[at:]).encode("utf-8", "surrogatepass")
    if how == "bomb":
        levels = draw(st.integers(2, 9))
        bomb = "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, levels))
        return (f"bomb:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n{bomb}"
                f"seed: *l{levels - 1}\n").encode() + raw
    if how == "deep":
        n = draw(st.sampled_from([99, 101, 1000, 20_000]))
        return raw + b"\nextra: " + b"[" * n + b"]" * n + b"\n"
    if how == "noise":
        return draw(st.binary(max_size=200))
    if how == "empty":
        return draw(st.sampled_from([b"", b"\n", b"   \n# only a comment\n", b"---\n", b"[]", b"5", b"null"]))
    return raw


# ------------------------------------------------------------------------------------------- the verdict
def verdict(path: Path) -> tuple[int, str, str]:
    """``validate PATH`` in-process, from the repository root: (rc, stdout, stderr), after checking what the
    issue asks of every answer."""
    out, err = io.StringIO(), io.StringIO()
    start = time.thread_time()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["validate", str(path)])  # an exception escaping main is a failure of this test
    cpu = time.thread_time() - start
    stdout, stderr = out.getvalue(), err.getvalue()
    assert rc in (0, 2), (rc, stderr[-2000:])
    assert cpu < MAX_CPU_S, f"validate took {cpu:.2f} s of CPU on {path}:\n{path.read_bytes()[-1500:]!r}"
    assert "Traceback" not in stderr, stderr[-2000:]
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    if rc == 2:
        assert len(errors) == 1, stderr[-2000:]
        line = errors[0]
        assert str(path) in line, line
        assert len(line) <= len(str(path)) + MAX_EXTRA_CHARS, (len(line), line)
        assert not _RAW_CONTROL.search(line), repr(line)
    else:
        assert not errors and "valid " in stdout, stderr[-2000:]
        assert not _RAW_CONTROL.search(stdout.replace("\n", "").replace("\t", "")), repr(stdout[:500])
    return rc, stdout, stderr


def _write(folder: Path, stem: str, suffix: str, data: bytes) -> Path:
    path = folder / f"fuzz-{stem}{suffix}"
    if path.is_dir():
        path.rmdir()
    path.write_bytes(data)
    return path


@FUZZ
@given(data=st.data())
def test_mutated_examples_get_a_verdict_or_one_short_line_naming_the_file(seeds, data):
    name, doc, folder = data.draw(mutated_documents(seeds))
    as_json = data.draw(st.booleans())
    text = _deep(_json_text(doc) if as_json else _yaml_text(doc))
    verdict(_write(folder, Path(name).stem, ".json" if as_json else ".yaml", text.encode("utf-8", "surrogatepass")))


@FUZZ
@given(data=st.data())
def test_damaged_text_gets_one_short_line_naming_the_file(seeds, data):
    name, doc, folder = data.draw(st.sampled_from(seeds))
    as_json = data.draw(st.booleans())
    raw = data.draw(damaged_text(json.dumps(doc, indent=1) if as_json else _yaml_text(doc)))
    rc, _, _ = verdict(_write(folder, Path(name).stem + "-text", ".json" if as_json else ".yaml", raw))
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        assert rc == 2


def test_the_examples_themselves_get_a_verdict(seeds, tmp_path):
    """The unmutated seeds pass the same checks (init's validate; the repository's validate, or name what
    is missing in one line: the pruned checkpoints are built by `make demo`)."""
    verdicts = []
    for name, doc, folder in seeds:
        verdicts.append(verdict(_write(folder, Path(name).stem + "-as-is", ".yaml", _yaml_text(doc).encode()))[0])
    assert verdicts[:2] == [0, 0] and verdicts[2:5] == [0, 0, 0], verdicts


def test_a_folder_or_a_missing_file_gets_one_line(tmp_path):
    folder = tmp_path / "run.yaml"
    folder.mkdir()
    assert verdict(folder)[0] == 2
    assert verdict(tmp_path / "missing.yaml")[0] == 2
