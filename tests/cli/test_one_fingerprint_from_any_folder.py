"""One run, one fingerprint, from any folder (issue 51): a configuration's identity is what its paths resolve to
(a local checkpoint and a few-shot file by their content, as datasets are), never where the user stands; relative
paths, in the file or given with ``--set``, follow one rule, which both pages that state it state alike. The
real console script, in a subprocess."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from console import console

# each command runs on the worker's warm cluster (tests/conftest.py's warm_commands)
pytestmark = pytest.mark.usefixtures("warm_commands")

ROOT = Path(__file__).resolve().parents[2]


def _fp(out: str) -> str:
    return re.search(r"fingerprint ([0-9a-f]{12})", out).group(1)


@pytest.fixture
def project(tmp_path) -> Path:
    """A user's folder: a run file naming its model and data relative to itself, and a store of its own."""
    d = tmp_path / "project"
    (d / "models").mkdir(parents=True)
    shutil.copytree(ROOT / "examples" / "models" / "word-problems", d / "models" / "word-problems")
    (d / "data").mkdir()
    lines = (ROOT / "examples" / "data" / "word_problems_test.jsonl").read_text().splitlines()[:8]
    (d / "data" / "wp.jsonl").write_text("\n".join(lines) + "\n")
    (d / "data" / "shots.jsonl").write_text("\n".join(lines[:3]) + "\n")
    (d / "wp.yaml").write_text(
        "name: wp\n"
        "model: {type: hf, path: models/word-problems, dtype: float32, device: cpu, num_gpus: 0, batch_size: 8}\n"
        "dataset: {path: data/wp.jsonl, input_field: question, target_field: answer}\n"
        "prompt: {template: '{{ question }} Answer:'}\n"
        "generation: {max_new_tokens: 6, temperature: 0}\n"
        "metrics: [exact_match]\n"
        "execution: {shard_size: 4, generation_actors: 1}\n"
        f"store: {{path: {tmp_path / 'store'}}}\n")
    (tmp_path / "elsewhere").mkdir()
    return d


def test_a_run_started_from_another_folder_has_its_fingerprint_and_reuses_every_stored_result(project, tmp_path):
    here = console("run", "wp.yaml", "--json", "--quiet", cwd=project, timeout=300)
    assert here.returncode == 0, here.stderr
    first = json.loads(here.stdout)
    assert first["perf"]["generated"] == 8
    there = console("run", "../project/wp.yaml", "--json", "--quiet", cwd=tmp_path / "elsewhere", timeout=300)
    assert there.returncode == 0, there.stderr
    second = json.loads(there.stdout)
    assert second["fingerprint"] == first["fingerprint"]
    assert second["perf"]["generated"] == 0 and second["perf"]["stored"] == 8  # nothing done again
    assert len(list((tmp_path / "store" / "runs").iterdir())) == 1  # the store holds the run once
    listed = console("runs", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [r["name"] for r in json.loads(listed.stdout)].count("wp") == 1


def test_validate_prints_one_fingerprint_from_the_file_s_folder_another_folder_and_an_absolute_path(project,
                                                                                                      tmp_path):
    prints = [console("validate", "wp.yaml", cwd=project),
              console("validate", "../project/wp.yaml", cwd=tmp_path / "elsewhere"),
              console("validate", str(project / "wp.yaml"), cwd="/")]
    assert all(r.returncode == 0 for r in prints), [r.stderr for r in prints]
    assert len({_fp(r.stdout) for r in prints}) == 1, [r.stdout for r in prints]
    # the content is the identity: the same checkpoint under another name is the same model, new bytes another
    shutil.copytree(project / "models" / "word-problems", project / "models" / "renamed")
    renamed = console("validate", "wp.yaml", "--set", "model.path=models/renamed", cwd=project)
    assert renamed.returncode == 0 and _fp(renamed.stdout) == _fp(prints[0].stdout), renamed.stderr
    config = project / "models" / "renamed" / "generation_config.json"
    config.write_text(config.read_text().replace("{", '{"note": "changed",', 1))
    changed = console("validate", "wp.yaml", "--set", "model.path=models/renamed", cwd=project)
    assert changed.returncode == 0 and _fp(changed.stdout) != _fp(prints[0].stdout), changed.stderr


def test_set_paths_resolve_against_the_file_s_folder_as_the_file_s_own_paths_do(project, tmp_path):
    (project / "data" / "other.jsonl").write_text((project / "data" / "wp.jsonl").read_text())
    here = console("validate", "wp.yaml", "--set", "dataset.path=data/other.jsonl", cwd=project)
    there = console("validate", "../project/wp.yaml", "--set", "dataset.path=data/other.jsonl",
                    cwd=tmp_path / "elsewhere")
    assert here.returncode == there.returncode == 0, (here.stderr, there.stderr)
    assert "../project/data/other.jsonl: 8 samples" in there.stdout, there.stdout
    assert _fp(here.stdout) == _fp(there.stdout)
    # nothing of that name beside the file, but one from the working directory: that one (the rule's fallback)
    (tmp_path / "elsewhere" / "mine.jsonl").write_text((project / "data" / "wp.jsonl").read_text())
    mine = console("validate", "../project/wp.yaml", "--set", "dataset.path=mine.jsonl", cwd=tmp_path / "elsewhere")
    assert mine.returncode == 0 and "mine.jsonl: 8 samples" in mine.stdout, mine.stderr
    assert _fp(mine.stdout) == _fp(here.stdout)  # the same bytes: the same dataset


def test_a_few_shot_file_enters_the_fingerprint_by_its_content_not_its_path(project, tmp_path):
    shots = ["--set", "prompt.few_shot={path: data/shots.jsonl, n: 2}"]
    here = console("validate", "wp.yaml", *shots, cwd=project)
    there = console("validate", "../project/wp.yaml", *shots, cwd=tmp_path / "elsewhere")
    assert here.returncode == there.returncode == 0, (here.stderr, there.stderr)
    assert _fp(here.stdout) == _fp(there.stdout)
    (project / "data" / "shots.jsonl").write_text(
        "\n".join(reversed((project / "data" / "shots.jsonl").read_text().splitlines())) + "\n")
    edited = console("validate", "wp.yaml", *shots, cwd=project)
    assert edited.returncode == 0 and _fp(edited.stdout) != _fp(here.stdout), edited.stderr


def test_both_pages_that_state_the_relative_path_rule_state_the_same_rule():
    from auditkit_ray.config.paths import RULE

    for page in ("configuration.md", "models-and-data.md"):
        text = " ".join((ROOT / "docs" / page).read_text().split())
        assert RULE in text, f"docs/{page} does not state the rule of config/paths.py"
        assert "relative to the working directory" not in text, f"docs/{page} states another rule"
