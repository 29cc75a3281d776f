"""Result stores: the source of truth for shards, run JSON and manifests,
and the one place stored runs are read back (``samples``)."""

from .base import LocalStore, open_store
from .interface import ResultStore
from .layout import RunLayout
from .samples import load_result, read_samples_table, try_read_samples_table

__all__ = ["LocalStore", "ResultStore", "RunLayout", "load_result", "open_store", "read_samples_table",
           "try_read_samples_table"]
