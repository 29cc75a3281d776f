"""Configuration: strict models, loaders, sweep expansion and JSON Schema."""

from .loader import load_config, load_config_runs, load_run_spec, load_sweep_spec, run_spec_from_dict
from .models import RunSpec, SweepSpec
from .sweep import expand


def json_schema(kind: str = "run") -> dict:
    model = RunSpec if kind == "run" else SweepSpec
    schema = model.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("title", f"auditkit-ray {kind} file")
    return schema


__all__ = [
    "RunSpec",
    "SweepSpec",
    "expand",
    "json_schema",
    "load_config",
    "load_config_runs",
    "load_run_spec",
    "load_sweep_spec",
    "run_spec_from_dict",
]
