"""How a shard travels between the pipeline's stages.

A row of the Ray Data pipeline is one shard, in two columns, each a pickle
(protocol 5) of plain Python objects:

- ``payload``: ``{"shard", "items": [{"request": {...}, ...}], ...}``,
  what each stage reads and adds to (generations, annotations, scores),
  and ``"run"`` (the run's fingerprint) from the first stage on: the
  pipeline's input rows carry it in a column of their own (``Plan.row``),
  so that runs over one dataset share their planned rows;
- ``samples``: the validated ``Sample`` of each item, in item order (repeats
  and choices of one sample are the same object, pickled once).

Pickle instead of JSON: the samples are validated once, on the driver, and
not dumped to JSON and validated again in every stage (measured on the RAG
samples of workload 4: JSON dump and load-and-validate 37 us per sample,
pickle 18). The generation stage reads only ``payload`` and passes
``samples`` through untouched. Nothing outside the pipeline's own stages
reads these bytes: what is stored (Parquet shards, results) stays JSON.
"""

from __future__ import annotations

import pickle
from typing import Any


def pack(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=5)


def unpack(data: Any) -> Any:
    return pickle.loads(data)
