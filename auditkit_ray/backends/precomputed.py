"""``precomputed``: stored outputs instead of a model (re-scoring, no GPU).

``path`` is one of: a run directory or ``result.json`` of an earlier run (its
per-sample table is read: ``text`` and ``raw_text`` per sample and repeat), or
a JSONL/JSON/CSV/Parquet file with ``id_field`` and ``output_field`` columns.
A sample with no stored output gets a Generation with an error naming it.

The backend reads through the services the actor layer lends it
(``auditkit_ray.core.backends.BackendServices``), so it imports neither the
result store nor the dataset readers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ..core.backends import BackendSettings
from ..core.types import Generation
from ..errors import ConfigError, RunError
from .base import Backend, Request


class PrecomputedSettings(BackendSettings):
    """Reads stored generations (a run directory or a JSONL/Parquet of outputs)
    instead of generating: re-scoring without a GPU."""

    type: Literal["precomputed"]
    path: str
    id_field: str = "id"
    output_field: str = "output"

    def stored_inputs(self) -> str | None:
        return self.path

    @classmethod
    def replays_generations(cls) -> bool:
        return True


class PrecomputedBackend(Backend):
    def load(self) -> None:
        services = self.services
        if services is None:
            raise RunError("precomputed backend: no services to read stored outputs with "
                           "(create it with create_backend(..., services=...), as the generation actor does)")
        p = Path(self.spec.path)
        self.outputs: dict[tuple[str, int], tuple[str, str | None]] = {}
        run_json = p / "result.json" if p.is_dir() else (p if p.name == "result.json" else None)
        if run_json is not None and run_json.exists():
            for row in services.read_samples_table(str(run_json)):
                self.outputs[(row["sample_id"], row["repeat"])] = (row["text"] or "", row["raw_text"])
            return
        id_field, output_field = self.spec.id_field, self.spec.output_field
        for where, rec in services.read_records(str(p)):
            if id_field not in rec or output_field not in rec:
                raise ConfigError(f"{where}: stored output needs fields {id_field!r} and {output_field!r}")
            key = (str(rec[id_field]), int(rec.get("repeat", 0) or 0))
            self.outputs[key] = (str(rec[output_field]), rec.get("raw_text"))

    def generate(self, requests: list[Request]) -> list[Generation]:
        out = []
        for r in requests:
            hit = self.outputs.get((r.sample_id, r.repeat))
            if hit is None:
                out.append(Generation(error=f"no stored output for sample {r.sample_id!r} (repeat {r.repeat}) "
                                            f"in {self.spec.path}"))
            else:
                out.append(Generation(text=hit[0], raw_text=hit[1], finish_reason="precomputed"))
        return out
