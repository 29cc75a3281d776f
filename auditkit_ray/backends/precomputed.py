"""``precomputed``: stored outputs instead of a model (re-scoring, no GPU).

``path`` is one of: a run directory or ``result.json`` of an earlier run (its
per-sample table is read: ``text`` and ``raw_text`` per sample and repeat), or
a JSONL/JSON/CSV/Parquet file with ``id_field`` and ``output_field`` columns.
A sample with no stored output gets a Generation with an error naming it.
"""

from __future__ import annotations

from pathlib import Path

from ..core.types import Generation
from ..errors import ConfigError
from .base import Backend, Request


class PrecomputedBackend(Backend):
    def load(self) -> None:
        p = Path(self.spec.path)
        self.outputs: dict[tuple[str, int], tuple[str, str | None]] = {}
        run_json = p / "result.json" if p.is_dir() else (p if p.name == "result.json" else None)
        if run_json is not None and run_json.exists():
            from ..api import samples_table

            for row in samples_table(run_json).to_pylist():
                self.outputs[(row["sample_id"], row["repeat"])] = (row["text"] or "", row["raw_text"])
            return
        from ..data.readers import read_records

        for where, rec in read_records(p):
            if self.spec.id_field not in rec or self.spec.output_field not in rec:
                raise ConfigError(f"{where}: stored output needs fields {self.spec.id_field!r} and {self.spec.output_field!r}")
            key = (str(rec[self.spec.id_field]), int(rec.get("repeat", 0) or 0))
            self.outputs[key] = (str(rec[self.spec.output_field]), rec.get("raw_text"))

    def generate(self, requests: list[Request]) -> list[Generation]:
        out = []
        for r in requests:
            hit = self.outputs.get((r.sample_id, r.repeat))
            if hit is None:
                out.append(Generation(error=f"no stored output for sample {r.sample_id!r} (repeat {r.repeat}) in {self.spec.path}"))
            else:
                out.append(Generation(text=hit[0], raw_text=hit[1], finish_reason="precomputed"))
        return out
