"""Starter files written by ``auditkit-ray init [DIR]``: a run file, a sweep
file and a tiny JSONL dataset they read. Both files use the ``echo``
backend, so they validate and run with no model, on a local Ray, in seconds.
Paths inside are relative to DIR (run the commands from DIR).
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import ConfigError

DATA = "data/tiny.jsonl"
RUN_FILE = "run.yaml"
SWEEP_FILE = "sweep.yaml"

QUESTIONS = [("What is 2 plus 3?", "5"), ("What is 7 minus 4?", "3"), ("What is 6 times 2?", "12"),
             ("What is 9 plus 9?", "18"), ("What is 10 minus 1?", "9"), ("What is 3 times 3?", "9"),
             ("What is 8 plus 5?", "13"), ("What is 12 minus 7?", "5")]

RUN_YAML = f"""\
# A starter run: validate with `auditkit-ray validate {RUN_FILE}`, run with
# `auditkit-ray run {RUN_FILE}` (starts a local Ray; RAY_ADDRESS or --address
# to use a cluster). The echo backend needs no model: it answers with
# "The answer is <target>", so the raw exact match is 0 and the exact match on
# the extracted number (reported as exact_match@number) is 1 -- swap in a real
# model to measure one:
#   model: {{type: hf, path: /path/to/checkpoint, batch_size: 16}}
name: starter
model:
  type: echo
  field: target
  prefix: "The answer is "
dataset:
  path: {DATA}
  id_field: id
  input_field: question
  target_field: answer
prompt:
  template: "Q: {{{{ question }}}}\\nA:"
annotators:
  - type: regex
    name: number
    pattern: '(-?\\d+)'
    select: last
metrics:
  - exact_match
  - name: exact_match
    on: number
  - token_f1
execution:
  shard_size: 4
store:
  path: results
"""

SWEEP_YAML = f"""\
# A starter sweep: every combination of the grid becomes a run (named
# starter/field=target and starter/field=prompt), stored under results/ and listed in
# results/sweeps/<fingerprint>/. Run with `auditkit-ray sweep {SWEEP_FILE}`,
# then `auditkit-ray report starter-sweep --format html -o report.html`.
name: starter-sweep
base:
  name: starter
  model:
    type: echo
    field: target
    prefix: "The answer is "
  dataset:
    path: {DATA}
    id_field: id
    input_field: question
    target_field: answer
  prompt:
    template: "Q: {{{{ question }}}}\\nA:"
  annotators:
    - type: regex
      name: number
      pattern: '(-?\\d+)'
      select: last
  metrics:
    - exact_match
    - name: exact_match
      on: number
    - token_f1
  execution:
    shard_size: 4
  store:
    path: results
grid:
  # one value per run; add keys for a product (e.g. model.path: [ckpt-a, ckpt-b])
  model.field: [target, prompt]
"""


def files() -> dict[str, str]:
    data = "".join(json.dumps({"id": f"q{i:02d}", "question": q, "answer": a}) + "\n"
                   for i, (q, a) in enumerate(QUESTIONS))
    return {RUN_FILE: RUN_YAML, SWEEP_FILE: SWEEP_YAML, DATA: data}


def write_starter(directory: str | Path = ".", *, force: bool = False) -> list[Path]:
    """Write the starter files under ``directory``; refuses to overwrite
    unless ``force``. Returns the paths written."""
    root = Path(directory)
    todo = {root / name: text for name, text in files().items()}
    existing = [str(p) for p in todo if p.exists()]
    if existing and not force:
        raise ConfigError(f"init: {', '.join(existing)} already exist; pass --force to overwrite")
    for p, text in todo.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return list(todo)
