"""The messages a new user reads (issue 51): data errors name the file and line, a misspelled field anywhere gets a
did-you-mean, ``--set`` indexes are checked, a sweep's mistake points at its own line, the sweep's header counts its
cells and every surface names a cell alike, each command's help is its own, ``list`` and ``runs list`` read as plain
aligned text, and ``--help`` names the exit codes and the environment. The real console script, in a subprocess."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from console import console

from auditkit_ray.testing.runs import build_run

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")

ROOT = Path(__file__).resolve().parents[2]


def _one_error(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


@pytest.fixture
def bad(tmp_path) -> Path:
    d = tmp_path / "bad"
    d.mkdir()
    rows = [{"id": f"wp-{i:04d}", "question": f"What is {i} plus 1?", "answer": str(i + 1)} for i in range(1, 15)]
    del rows[10]["question"]  # wp-0011, on line 11
    (d / "missing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def _run_file(d: Path, name: str, **extra) -> str:
    doc = {"name": "m", "model": {"type": "echo"},
           "dataset": {"path": "bad/missing.jsonl", "input_field": "question", "target_field": "answer"},
           "metrics": ["exact_match"], "store": {"path": "store"}, **extra}
    (d.parent / name).write_text(json.dumps(doc))
    return name


def test_a_missing_input_field_names_the_file_and_line_of_the_sample(bad):
    f = _run_file(bad, "plain.json")
    for command in ("validate", "run"):
        line = _one_error(console(command, f, cwd=bad.parent, timeout=120))
        # the configuration file first (its dataset.path line), then the dataset's file and line
        assert line.startswith(f"error: {f}:1: "), line
        assert "bad/missing.jsonl:11: sample 'wp-0011': no input field 'question'" in line, line
        assert "(its fields: answer, id)" in line, line
    templated = _run_file(bad, "templated.json", prompt={"template": "Q: {{ question }}"})
    line = _one_error(console("validate", templated, cwd=bad.parent))
    assert line.startswith(f"error: {templated}:1: "), line
    assert "bad/missing.jsonl:11: sample 'wp-0011': the prompt template needs field 'question'" in line, line


def test_a_template_field_no_sample_has_gets_a_did_you_mean_and_the_dataset_s_own_fields(bad):
    f = _run_file(bad, "typo.json", prompt={"template": "{{ questoin }} Answer:"})
    line = _one_error(console("validate", f, cwd=bad.parent))
    assert line.startswith(f"error: {f}:1: "), line
    assert ("bad/missing.jsonl:1: sample 'wp-0001': the prompt template needs field 'questoin' (did you mean "
            "'question'?)") in line, line
    fields = re.search(r"its fields: ([^)]*)\)", line).group(1).split(", ")
    assert fields == ["answer", "id", "question"], line  # the dataset's own, not the loader's input and target


def test_a_nested_unknown_key_gets_a_did_you_mean_as_a_top_level_one_does(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "input": "x", "target": "x"}) + "\n")
    (tmp_path / "run.yaml").write_text(
        "name: m\nmodel: {type: echo}\ndataset: {path: d.jsonl, input_fild: x}\n"
        "annotators:\n  - {type: regex, name: n, pattern: 'x', selct: last}\nmetrics: [exact_match]\n")
    (tmp_path / "nested.yaml").write_text(
        "name: m\nmodel: {type: echo}\ndataset: {path: d.jsonl}\n"
        "annotators:\n  - {type: regex, name: n, pattern: 'x', selct: last}\nmetrics: [exact_match]\n")
    r = console("validate", "nested.yaml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "nested.yaml:5: annotators[0].selct: unknown field (did you mean 'select'?)" in r.stderr, r.stderr
    # both in one file: one line (the schema fuzzer's rule), the first in full, the other named
    line = _one_error(console("validate", "run.yaml", cwd=tmp_path))
    assert "run.yaml:3: dataset.input_fild: unknown field (did you mean 'input_field'" in line, line
    assert "annotators[0].selct" in line, line


def test_set_with_a_list_index_sets_that_item_and_an_index_out_of_range_says_so(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "input": "x", "target": "x"}) + "\n")
    (tmp_path / "run.yaml").write_text("name: m\nmodel: {type: echo}\ndataset: {path: d.jsonl}\n"
                                       "metrics: [exact_match]\n")
    (tmp_path / "edited.yaml").write_text("name: m\nmodel: {type: echo}\ndataset: {path: d.jsonl}\n"
                                          "metrics: [token_f1]\n")
    line = _one_error(console("validate", "run.yaml", "--set", "metrics[5].name=x", cwd=tmp_path))
    assert "--set metrics[5].name: index 5 is out of range (metrics has 1 item: [0] to [0])" in line, line
    by_flag = console("validate", "run.yaml", "--set", "metrics[0].name=token_f1", cwd=tmp_path)
    by_file = console("validate", "edited.yaml", cwd=tmp_path)
    assert by_flag.returncode == by_file.returncode == 0, by_flag.stderr
    fp = re.compile(r"fingerprint ([0-9a-f]{12})")
    assert fp.search(by_flag.stdout).group(1) == fp.search(by_file.stdout).group(1)
    line = _one_error(console("validate", "run.yaml", "--set", "dataset[0]=x", cwd=tmp_path))
    assert "--set dataset[0]: dataset is not a list" in line, line


def test_a_sweep_error_points_at_the_line_of_its_grid_value_or_runs_entry(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "input": "x", "target": "x"}) + "\n")
    base = ("name: ovn\nbase:\n  name: b\n  model: {type: echo}\n  dataset: {path: d.jsonl}\n"
            "  generation: {temperature: 0, max_new_tokens: 4}\n  metrics: [exact_match]\n")
    (tmp_path / "grid.yaml").write_text(base + "grid:\n  generation.temperature:\n    - 0\n    - 0.5\n    - -3\n")
    line = _one_error(console("validate", "grid.yaml", cwd=tmp_path))
    assert re.search(r"grid\.yaml \(run \d: [^)]*\):12: grid\.generation\.temperature\[2\]: ", line), line
    (tmp_path / "runs.yaml").write_text(base + "runs:\n  - {name: a}\n  - name: c\n"
                                               "    generation: {max_new_tokens: 0}\n")
    line = _one_error(console("validate", "runs.yaml", cwd=tmp_path))
    assert re.search(r"runs\.yaml \(run 1: c\):11: runs\[1\]\.generation\.max_new_tokens: ", line), line


def test_the_sweep_header_counts_cells_and_cells_are_named_alike_in_progress_leaderboard_and_report(tmp_path):
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "input": f"{i}", "target": f"{i}"}) + "\n"
                                              for i in range(6)))
    sim = {"type": "simulated", "fixed_cost_s": 0.05, "per_token_s": 0.0, "output": "prompt"}
    (tmp_path / "sw.json").write_text(json.dumps({
        "name": "ovn", "base": {"dataset": {"path": "d.jsonl"}, "metrics": ["exact_match"], "model": sim,
                                "execution": {"shard_size": 3, "cell_retries": 0}, "store": {"path": "store"},
                                "tracking": {"index": False}},
        "grid": {"model.tokens_per_output": [1, 2]},
        "runs": [{"name": "good"}, {"name": "bad", "seed": 7, "model.oom_ids": ["q0"]}]}))
    r = console("sweep", "sw.json", "--report", "r.html", cwd=tmp_path, timeout=300)
    assert r.returncode == 1, r.stderr
    assert re.search(r"^sweep ovn: 4 cells, 4 runs: 2 done, 2 failed; manifest ", r.stdout, re.M), r.stdout
    names = {f"{g}/tokens_per_output={k}" for g in ("good", "bad") for k in (1, 2)}
    progress = {m.group(1) for m in re.finditer(r"^\[([^\]]+)\] ", r.stderr, re.M)}
    assert progress == names, progress  # each cell by its run's name
    for name in ("good/tokens_per_output=1", "good/tokens_per_output=2"):
        assert re.search(rf"^\s+1\s+{re.escape(name)}\s", r.stdout, re.M), r.stdout  # the leaderboard's rows
    for name in ("bad/tokens_per_output=1", "bad/tokens_per_output=2"):
        assert f"FAILED {name} after 1 attempt(s)" in r.stdout, r.stdout
    html = (tmp_path / "r.html").read_text()
    assert set(re.findall(r'data-cell="([^"]+)"', html)) == {"bad/tokens_per_output=1", "bad/tokens_per_output=2"}


def test_cache_clear_help_prints_its_own_options():
    r = console("cache", "clear", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: auditkit-ray cache clear"), r.stdout[:200]
    assert "--older-than" in r.stdout and "--recent" not in r.stdout
    stats = console("cache", "stats", "--help")
    assert stats.returncode == 0 and "--recent" in stats.stdout and "--older-than" not in stats.stdout


def test_list_shows_no_restructuredtext_markup():
    r = console("list")
    assert r.returncode == 0, r.stderr
    assert "``" not in r.stdout and not re.search(r":(class|func|meth|mod):`", r.stdout), \
        [ln for ln in r.stdout.splitlines() if "`" in ln][:3]
    assert "An agent over HTTP (url) or a Python callable (callable)" in r.stdout


def test_runs_list_columns_align(tmp_path):
    from auditkit_ray import experiment_db, load_run

    db = experiment_db(tmp_path / "db.sqlite")
    for name in ("a", "a-much-longer-run-name-than-thirty-characters/fp32"):
        path = build_run(tmp_path / name.replace("/", "_"), name, {"acc": {"values": {"q0": 1.0}}})
        db.record(load_run(path), result_uri=str(path))
    lines = console("runs", "list", env={"AUDITKIT_RAY_DB": str(tmp_path / "db.sqlite")}).stdout.splitlines()
    assert len(lines) == 3, lines
    for column in ("created", "name", "model", "dataset", "metrics"):
        at = lines[0].index(column)
        # every row's cell starts where its header does: one space before it, text at it
        assert all(ln[at - 1] == " " and ln[at] != " " for ln in lines[1:]), (column, lines)


def test_help_names_the_exit_codes_and_every_environment_variable_a_user_can_set():
    r = console("--help")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for code in ("0", "1", "2", "130"):
        assert re.search(rf"^  {code}\s", text, re.M), f"exit code {code} not in --help"
    # every AUDITKIT_RAY_ variable the package reads, but the two it sets for its own processes
    internal = {"AUDITKIT_RAY_DRIVER", "AUDITKIT_RAY_WORKDIR"}
    read = set(re.findall(r"\"(AUDITKIT_RAY_[A-Z_]+)\"", "".join(
        p.read_text() for p in (ROOT / "auditkit_ray").rglob("*.py"))))
    assert read - internal, read
    missing = sorted(v for v in read - internal if v not in text)
    assert not missing, f"--help does not name {missing}"
    assert "RAY_ADDRESS" in text and "AWS_ENDPOINT_URL" in text
