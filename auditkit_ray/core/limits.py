"""The limits a run or sweep file is held to, in one place.

Each is far beyond what a real file needs and low enough that reading, expanding and checking a file
stays within a second or two and never exhausts the interpreter's stack or the machine's memory. A file
beyond one is rejected with the limit in the message. ``scripts/gen_docs.py`` lists them in
docs/configuration.md (``LIMITS``).
"""

from __future__ import annotations

#: bytes of a run or sweep file
MAX_FILE_BYTES = 1 << 20
#: nesting of mappings and lists in a file (and in one row of a JSON or JSON Lines dataset)
MAX_DEPTH = 100
#: values in a file (mappings, lists and scalars), every alias counted at each place it is used
MAX_VALUES = 200_000
#: runs one sweep expands to (the grid's cells times the explicit runs)
MAX_SWEEP_RUNS = 100_000
#: bytes (UTF-8) of a path (dataset.path, model.path, retrieval.corpus, ...); of one part of it between slashes
MAX_PATH_CHARS = 4096
MAX_PATH_PART_CHARS = 255
#: characters of a name (a run's, a sweep's, an annotator's, a metric's ``as``)
MAX_NAME_CHARS = 1000
#: ``repeats``: generations per sample
MAX_REPEATS = 10_000
#: ``max_new_tokens`` (the generation's and a model annotator's)
MAX_NEW_TOKENS = 1_000_000
#: seeds are 64-bit: from -2**63 to 2**64 - 1 (what torch, numpy and vLLM take)
MIN_SEED, MAX_SEED = -(2**63), 2**64 - 1
#: ``execution.num_cpus`` / ``num_gpus``: Ray counts resources in steps of 0.0001
MIN_RESOURCE, MAX_RESOURCE = 0.0001, 1_000_000
#: ``execution`` actor counts (generation, scoring, judge, oracle, retrieval actors) and plan tasks
MAX_ACTORS = 10_000
#: a regex annotator's ``select``: the index of the match taken, from 0
MAX_MATCH_INDEX = 10_000
#: ``retrieval.corpus`` and other inputs hashed for the fingerprint when they are folders: files in one folder
MAX_HASHED_FILES = 100_000
#: characters of one value shown in a message (longer ones are shortened in the middle)
MESSAGE_VALUE_CHARS = 80

#: (what, limit, note) for docs/configuration.md
LIMITS: tuple[tuple[str, str, str], ...] = (
    ("file size", f"{MAX_FILE_BYTES:,} bytes (1 MiB)", "a run or sweep file, YAML or JSON"),
    ("nesting", f"{MAX_DEPTH} levels", "mappings and lists inside each other, in a file and in one dataset row"),
    ("values", f"{MAX_VALUES:,}", "mappings, lists and scalars in a file; a YAML alias counts the values it "
     "stands for at each use, so an alias bomb is refused before it is expanded"),
    ("duplicate keys", "none", "a key given twice in one mapping is an error (YAML and JSON), never last-wins"),
    ("YAML tags", "the JSON types", "`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!seq`, `!!map`; "
     "`!!binary`, `!!set`, `!!omap`, `!!pairs`, `!!timestamp` and Python tags are refused, as is a tagged value "
     "that cannot be read (`!!int 1.5`); an unquoted date (`2024-01-01`) is text, as in JSON"),
    ("keys", "strings", "a mapping's keys are strings (`'1': x`, not `1: x`)"),
    ("encoding", "UTF-8", "a UTF-8 byte-order mark is allowed; UTF-16 and other encodings are refused"),
    ("sweep size", f"{MAX_SWEEP_RUNS:,} runs", "the grid's cells times the explicit `runs`"),
    ("paths", f"{MAX_PATH_CHARS:,} bytes (UTF-8), {MAX_PATH_PART_CHARS} between slashes",
     "every path and URI; no control characters (NUL, ESC, newline...)"),
    ("names", f"{MAX_NAME_CHARS:,} characters", "a run's, a sweep's, an annotator's name; no control characters"),
    ("`repeats`", f"1 to {MAX_REPEATS:,}", ""),
    ("`max_new_tokens`", f"1 to {MAX_NEW_TOKENS:,}", "the generation's and a model annotator's"),
    ("seeds", "-2\\*\\*63 to 2\\*\\*64 - 1", "every `seed`"),
    ("`num_cpus`, `num_gpus`", f"0, or {MIN_RESOURCE} to {MAX_RESOURCE:,}", "finite; Ray's resource step is 0.0001"),
    ("actor counts", f"up to {MAX_ACTORS:,}", "`execution.*_actors` (from 1), `plan_tasks` (from 0)"),
    ("numbers", "finite", "no NaN or infinity in a numeric setting; `true`/`false` is not a number"),
    ("regex `select`", f"`first`, `last` or 0 to {MAX_MATCH_INDEX:,}", "the match taken, counted from 0"),
    ("hashed folders", f"{MAX_HASHED_FILES:,} files", "a folder input (`retrieval.corpus`, a checkpoint, stored "
     "outputs) hashed for the fingerprint"),
    ("templates", "`{{ field }}` only", "a `{{ ... }}` that is not a field path (a filter, `{{ q | upper }}`, or "
     "an expression) is an error, as is a malformed `${...}` where variables expand"),
)
