"""Dataset readers: JSONL, JSON, CSV, Parquet and HF ``datasets`` directories."""

from .readers import load_samples, read_records

__all__ = ["load_samples", "read_records"]
