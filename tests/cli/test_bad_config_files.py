"""No run or sweep file makes ``validate`` crash or hang (issue 56): each shape the fuzzing found, through the
real console script, gets rc 2 and one line naming the file and the line of what is wrong, shortened and
with control characters escaped, at once; what must be refused is refused, and what is valid still is.
tests/config/test_schema_fuzz.py generates thousands more of the same kinds in-process."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from console import console

#: an error line's length beyond the file's own name (the issue: "a few hundred characters")
MAX_EXTRA_CHARS = 800
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-configs")
    assert console("init", d).returncode == 0
    return d


@pytest.fixture
def run_text(project) -> str:
    return (project / "run.yaml").read_text()


@pytest.fixture
def sweep_text(project) -> str:
    return (project / "sweep.yaml").read_text()


def _write(project: Path, name: str, content: str | bytes) -> Path:
    path = project / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _refused(project: Path, path: Path, *args: str, line: int | None = None) -> str:
    """``validate PATH``: rc 2 and one error line that names the file (and ``line``), bounded and without raw
    control characters; the line, for what else the test checks."""
    r = console("validate", path, *args, cwd=project, timeout=60)
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr[-3000:])
    one = lines[0]
    assert one.startswith(f"error: {path}"), one
    if line is not None:
        assert one.startswith(f"error: {path}:{line}: "), one
    assert len(one) <= len(str(path)) + MAX_EXTRA_CHARS, (len(one), one[:400])
    assert not _RAW_CONTROL.search(one), repr(one)
    return one


def _line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


# ------------------------------------------------------------------------------------------- crashes
@pytest.mark.parametrize("where", ["model", "metrics", "grid"])
def test_nesting_hundreds_deep_is_refused_at_its_line_with_the_limit(project, run_text, sweep_text, where):
    deep = "[" * 400 + "]" * 400
    if where == "model":  # ${VAR} is expanded in this section
        text = run_text.replace('  prefix: "The answer is "', f'  prefix: "The answer is "\n  extra: {deep}')
        name, needle = "deep-model.yaml", "  extra:"
    elif where == "metrics":
        text = run_text.replace("  - token_f1", f"  - {{name: token_f1, params: {{x: {deep}}}}}")
        name, needle = "deep-metrics.yaml", "token_f1"
    else:
        text = sweep_text.replace("  model.field: [target, prompt]", f"  model.field: [target, {deep}]")
        name, needle = "deep-grid.yaml", "model.field"
    path = _write(project, name, text)
    one = _refused(project, path, line=_line_of(text, needle))
    assert "nested more than 100 levels" in one or "maximum nesting depth" in one, one
    # a JSON file as deep says the same, at its line
    doc = {"name": "x", "model": {"type": "echo"}, "dataset": {"path": "data/tiny.jsonl"}, "deep": "@"}
    js = json.dumps(doc, indent=1).replace('"@"', deep)
    one = _refused(project, _write(project, f"deep-{where}.json", js), line=_line_of(js, '"deep"'))
    assert "nested more than 100 levels deep (the limit)" in one, one


@pytest.mark.parametrize("where, value", [("base.name", "5"), ("base.name", "[a, b]"), ("runs[0].name", "{a: 1}")])
def test_a_sweep_run_name_that_is_not_text_is_refused_at_its_line(project, sweep_text, where, value):
    if where == "base.name":
        text = sweep_text.replace("  name: starter\n", f"  name: {value}\n")
        needle = f"  name: {value}"
    else:
        text = sweep_text + f"runs:\n  - name: {value}\n"
        needle = f"  - name: {value}"
    path = _write(project, "sweep-name.yaml", text)
    one = _refused(project, path, line=_line_of(text, needle))
    assert f"{where}: a run's name is a string" in one, one


@pytest.mark.parametrize("tagged, want", [
    ("!!float abc", "!!float 'abc' cannot be read as !!float"),
    ("!!int 1.5", "!!int '1.5' cannot be read as !!int"),
    ("!!timestamp x", "the tag !!timestamp is not taken"),
    ("!!binary aGVsbG8=", "the tag !!binary is not taken"),
    ("!!python/object/apply:os.getcwd []", "could not determine a constructor"),
])
def test_a_yaml_tag_that_cannot_be_read_is_refused_at_its_line(project, run_text, tagged, want):
    text = run_text + f"seed: {tagged}\n"
    one = _refused(project, _write(project, "tag.yaml", text), line=len(text.splitlines()))
    assert want in one, one


@pytest.mark.parametrize("setting", ["dataset.path", "model.path", "retrieval.corpus", "store.path"])
def test_a_path_of_tens_of_kilobytes_is_refused_with_the_limit(project, run_text, setting):
    long = "d/" * 10 + "p" * 40_000
    if setting == "dataset.path":
        text = run_text.replace("  path: data/tiny.jsonl", f"  path: {long}")
    elif setting == "model.path":
        text = run_text.replace("  type: echo\n  field: target\n  prefix: \"The answer is \"\n",
                                f"  type: hf\n  path: {long}\n")
    elif setting == "retrieval.corpus":
        text = run_text + f"retrieval: {{corpus: {long}}}\n"
    else:
        text = run_text.replace("  path: results", f"  path: {long}")
    path = _write(project, "long-path.yaml", text)
    one = _refused(project, path, line=_line_of(text, "p" * 100))
    assert f"{setting}: a path of 40,020 bytes; paths hold at most 4,096 (the limit)" in one, one
    # one part longer than a file name can be (255 bytes) is refused too, before the file system is asked
    one = _refused(project, _write(project, "long-part.yaml", text.replace(long, "d/" + "n" * 300)))
    assert "a file or folder name holds at most 255 (the limit)" in one, one


def test_a_dataset_row_nested_thousands_deep_is_refused_at_its_line(project, run_text):
    rows = (project / "data" / "tiny.jsonl").read_text().splitlines()
    rec = json.loads(rows[2])
    rows[2] = json.dumps(rec)[:-1] + ', "deep": ' + "[" * 2000 + "]" * 2000 + "}"
    (project / "data" / "deep.jsonl").write_text("\n".join(rows) + "\n")
    rows[2] = json.dumps(rec)[:-1] + ', "deep": ' + "[" * 150 + "]" * 150 + "}"
    (project / "data" / "deep150.jsonl").write_text("\n".join(rows) + "\n")
    for name, want in (("deep", "nested too deep to read"), ("deep150", "nested more than 100 levels deep")):
        text = run_text.replace("data/tiny.jsonl", f"data/{name}.jsonl")
        path = _write(project, f"row-{name}.yaml", text)
        one = _refused(project, path, line=_line_of(text, f"data/{name}.jsonl"))
        assert f"data/{name}.jsonl:3: " in one and want in one, one


@pytest.mark.parametrize("no_data", [False, True], ids=["with-data", "no-data"])
def test_a_corpus_folder_is_refused_not_hashed(project, run_text, no_data):
    text = run_text + "retrieval: {corpus: /}\n"
    path = _write(project, "corpus-root.yaml", text)
    one = _refused(project, path, *(["--no-data"] if no_data else []), line=len(text.splitlines()))
    assert "retrieval.corpus: /: a folder; the corpus is a JSON Lines file" in one, one


# ------------------------------------------------------------------------------------------- runaway work
def test_a_huge_repeats_is_refused_at_once_with_the_limit(project, run_text):
    text = run_text + "repeats: 100000000000\n"
    one = _refused(project, _write(project, "repeats.yaml", text), line=len(text.splitlines()))
    assert "repeats: Input should be less than or equal to 10000" in one, one


def test_a_grid_beyond_the_limit_is_refused_before_it_is_expanded(project, sweep_text):
    text = sweep_text + f"  seed: {list(range(1000))}\n  generation.temperature: {[i / 10 for i in range(200)]}\n"
    one = _refused(project, _write(project, "grid-huge.yaml", text), line=_line_of(text, "grid:"))
    assert "expands to 400,000 runs (2 x 1000 x 200); a sweep has at most 100,000 (the limit)" in one, one


def test_an_error_in_one_cell_of_a_large_grid_names_that_cell(project, sweep_text):
    temps = [i / 100 for i in range(50)] + [-1]
    text = sweep_text + f"  seed: {list(range(40))}\n  generation.temperature: {temps}\n"
    path = _write(project, "grid-cell.yaml", text)
    one = _refused(project, path)
    assert f"{path} (run 50: starter/field=target/seed=0/temperature=-1):" in one, one
    # the grid's value at fault, at its line and index in the grid's list
    assert (f":{_line_of(text, 'generation.temperature:')}: grid.generation.temperature[50]: "
            "Input should be greater") in one, one
    # the same grid without the bad value: 4,000 runs, each with its fingerprint
    good = _write(project, "grid-good.yaml", text.replace(", -1]", "]"))
    r = console("validate", good, "--no-data", cwd=project, timeout=120)
    assert r.returncode == 0 and "valid sweep 'starter-sweep' (4000 runs)" in r.stdout, r.stderr[-2000:]


def test_two_runs_with_one_name_are_named_both(project, sweep_text):
    text = sweep_text + "runs:\n  - {name: twin}\n  - {name: twin}\n"
    one = _refused(project, _write(project, "twins.yaml", text))
    assert "runs 0 and 2 of the sweep have the same name 'twin/field=target'" in one, one


# ------------------------------------------------------------------------------------------- refused, once accepted
@pytest.mark.parametrize("kind", ["yaml", "json"])
def test_a_key_given_twice_is_refused_at_its_second_line(project, run_text, kind):
    if kind == "yaml":
        text = run_text.replace("execution:\n", "seed: 1\nexecution:\n").replace("store:\n", "seed: 2\nstore:\n")
        path = _write(project, "dup.yaml", text)
    else:
        text = '{"model": {"type": "echo"},\n "dataset": {"path": "data/tiny.jsonl"},\n "model": {"type": "echo"}}'
        path = _write(project, "dup.json", text)
    one = _refused(project, path, line=_line_of(text, "seed: 2") if kind == "yaml" else 3)
    key = "seed" if kind == "yaml" else "model"
    assert f"duplicate key '{key}' (first on line {_line_of(text, 'seed: 1') if kind == 'yaml' else 1})" in one, one


@pytest.mark.parametrize("corpus, content, want", [
    ("missing.jsonl", None, "retrieval.corpus 'missing.jsonl': file not found"),
    ("empty.jsonl", "", "the corpus has no documents"),
    ("bad.jsonl", '{"id": "d1", "text": "x"}\n{"id": "d2"\n', "bad.jsonl:2: invalid JSON line"),
    ("notext.jsonl", '{"id": "d1"}\n', "a corpus document needs 'id' and 'text'"),
], ids=["missing", "empty", "malformed", "no-text"])
def test_a_missing_empty_or_malformed_corpus_is_refused_by_validate(project, run_text, corpus, content, want):
    if content is not None:
        (project / "data" / corpus).write_text(content)
    text = run_text + f"retrieval: {{corpus: data/{corpus}}}\n" if content is not None \
        else run_text + f"retrieval: {{corpus: {corpus}}}\n"
    one = _refused(project, _write(project, "corpus.yaml", text), line=len(text.splitlines()))
    assert "retrieval.corpus" in one and want in one, one


@pytest.mark.parametrize("setting, value, want", [
    ("execution.num_gpus", ".inf", "Input should be a finite number"),
    ("execution.num_cpus", ".nan", "Input should be a finite number"),
    ("execution.num_gpus", "5e-324", "below 0.0001, the smallest amount of a resource Ray counts"),
    ("generation.max_new_tokens", str(2**63), "less than or equal to 1000000"),
    ("generation.max_new_tokens", "true", "true is a boolean, not a number"),
    ("generation.temperature", "false", "false is a boolean, not a number"),
    ("repeats", "true", "true is a boolean, not a number"),
    ("seed", str(2**64), "less than or equal to 18446744073709551615"),
    ("seed", str(-(2**63) - 1), "greater than or equal to -9223372036854775808"),
    ("execution.scoring_actors", str(10**9), "less than or equal to 10000"),
    ("annotators.select", "-1", "Input should be 'first' or 'last' (got -1); or: Input should be greater"),
], ids=lambda v: str(v)[:24])
def test_numbers_outside_what_they_mean_are_refused_at_their_line(project, run_text, setting, value, want):
    section, _, key = setting.rpartition(".")
    if setting == "annotators.select":
        text = run_text.replace("    select: last", f"    select: {value}")
        needle = f"select: {value}"
    elif section:
        text = run_text + f"{section}:\n  {key}: {value}\n" if section not in ("execution",) \
            else run_text.replace("execution:\n", f"execution:\n  {key}: {value}\n")
        needle = f"  {key}: {value}"
    else:
        text = run_text + f"{key}: {value}\n"
        needle = f"{key}: {value}"
    one = _refused(project, _write(project, "numbers.yaml", text), line=_line_of(text, needle))
    assert want in one, one


@pytest.mark.parametrize("char, name", [("\\0", "NUL"), ("\\e", "ESC"), ("\\n", "a newline")])
def test_a_control_character_in_a_path_is_refused(project, run_text, char, name):
    text = run_text.replace("  path: data/tiny.jsonl", f'  path: "data/ti{char}ny.jsonl"')
    one = _refused(project, _write(project, "ctl-path.yaml", text), line=_line_of(text, "data/ti"))
    assert f"dataset.path: a path holds {name}" in one, one


def test_a_null_input_field_is_refused_not_rendered_as_none(project, run_text):
    rows = (project / "data" / "tiny.jsonl").read_text().splitlines()
    rec = json.loads(rows[1])
    rec["question"] = None
    rows[1] = json.dumps(rec)
    (project / "data" / "null.jsonl").write_text("\n".join(rows) + "\n")
    text = run_text.replace("data/tiny.jsonl", "data/null.jsonl")
    one = _refused(project, _write(project, "null-input.yaml", text), line=_line_of(text, "data/null.jsonl"))
    assert f"sample {rec['id']!r}: the prompt template needs field 'question', which is null" in one, one


@pytest.mark.parametrize("template, want", [
    ("Q: {{ question | upper }}", "'{{ question | upper }}' is not a placeholder"),
    ("Q: {{ question.strip() }}", "'{{ question.strip() }}' is not a placeholder"),
])
def test_an_unknown_template_filter_is_refused(project, run_text, template, want):
    text = run_text.replace('  template: "Q: {{ question }}\\nA:"', f'  template: "{template}"')
    one = _refused(project, _write(project, "filter.yaml", text), line=_line_of(text, "  template:"))
    assert f"prompt.template: {want}" in one and "filters and expressions are not supported" in one, one
    # braces that are no placeholder stay text (JSON in a prompt)
    ok = _write(project, "braces.yaml", run_text.replace('{{ question }}\\nA:', '{{ question }} {{\\"k\\": 1}}'))
    assert console("validate", ok, cwd=project).returncode == 0


@pytest.mark.parametrize("value", ["${AUDITKIT_NO_SUCH", "${1X}", "${AUDITKIT_X:default}"])
def test_a_malformed_variable_reference_is_refused(project, run_text, value):
    text = run_text.replace('  prefix: "The answer is "', f'  prefix: "{value}"')
    one = _refused(project, _write(project, "var.yaml", text), line=_line_of(text, "  prefix:"))
    assert "model.prefix: " in one and "is not a variable reference: write ${VAR} or ${VAR:-default}" in one, one
    # a literal ${ is written $${, and a reference with a default still expands
    ok = _write(project, "var-ok.yaml", text.replace(value, "$${LITERAL} ${AUDITKIT_NO_SUCH:-fine}"))
    assert console("validate", ok, cwd=project).returncode == 0


# ------------------------------------------------------------------------------------------- messages
@pytest.mark.parametrize("shape", ["non-utf8", "utf16", "yaml-syntax", "json-syntax", "json-field", "empty",
                                   "not-a-mapping", "missing-checkpoint", "missing-dataset"])
def test_every_rejection_names_the_file_and_its_line(project, run_text, shape):
    name, line = "shape.yaml", None
    if shape == "non-utf8":
        content, line = run_text.encode().replace(b"Q: ", b"Q\xff ", 1), _line_of(run_text, "Q: ")
    elif shape == "utf16":
        content, line = run_text.encode("utf-16"), 1
    elif shape == "yaml-syntax":
        content, line = run_text.replace("  id_field: id", "  id_field: [id"), _line_of(run_text, "input_field")
    elif shape == "json-syntax":
        name, content, line = "shape.json", '{"model": {"type": "echo"},\n "dataset": {"path": }}', 2
    elif shape == "json-field":
        name, line = "shape.json", 3
        content = '{"model": {"type": "echo"},\n "dataset": {"path": "data/tiny.jsonl"},\n "seed": "x"}'
    elif shape == "empty":
        content, line = "# nothing here\n", 1
    elif shape == "not-a-mapping":
        content, line = "- model\n- dataset\n", 1
    elif shape == "missing-checkpoint":
        content = run_text.replace("  type: echo\n  field: target\n  prefix: \"The answer is \"\n",
                                   "  type: hf\n  path: ./no-such-checkpoint\n")
        line = _line_of(content, "no-such-checkpoint")
    else:
        content, line = run_text.replace("data/tiny.jsonl", "data/none.jsonl"), _line_of(run_text, "tiny.jsonl")
    _refused(project, _write(project, name, content), line=line)


def test_an_alias_bomb_is_refused_in_one_short_line(project, sweep_text):
    bomb = "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
    text = sweep_text.replace("grid:\n", "bombs:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                              + bomb + "grid:\n") + "  seed: *l8\n"
    one = _refused(project, _write(project, "bomb.yaml", text))
    assert "holds more than 200,000 values, aliases counted at each use (the limit)" in one, one
    # a smaller bomb within the limit, as grid values: the cell is named by a shortened label, the value is
    # never echoed whole
    levels = "".join(f"    - &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 5))
    small = sweep_text + "  seed:\n    - &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + levels
    one = _refused(project, _write(project, "bomb-small.yaml", small))
    assert "(run 0: starter/field=target/seed=" in one and "chars)" in one and len(one) < 600, one


def test_control_characters_in_values_are_escaped_not_sent_to_the_terminal(project, run_text):
    text = run_text.replace("name: starter", 'name: "st\\e[31marter\\a"').replace(
        "    select: last", '    select: "\\e[2J\\e]0;owned\\a"')
    one = _refused(project, _write(project, "escape.yaml", text))
    assert "\\x1b" in one and "\x1b" not in one, repr(one)
    # a long value is shortened in the middle, with its length
    text = run_text.replace("    select: last", f"    select: {'z' * 50_000}")
    one = _refused(project, _write(project, "long-value.yaml", text), line=_line_of(text, "select:"))
    assert "(50,000 chars)" in one, one


def test_a_valid_starter_still_validates_and_a_bom_is_allowed(project, run_text, sweep_text):
    for name, content in (("ok-run.yaml", run_text), ("ok-sweep.yaml", sweep_text),
                          ("ok-bom.yaml", b"\xef\xbb\xbf" + run_text.encode())):
        r = console("validate", _write(project, name, content), cwd=project)
        assert r.returncode == 0 and "valid " in r.stdout, r.stderr
    shutil.rmtree(project / "results", ignore_errors=True)
