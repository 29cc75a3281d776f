"""Result stores: the source of truth for shards, run JSON and manifests."""

from .base import ResultStore, open_store
from .layout import RunLayout

__all__ = ["ResultStore", "RunLayout", "open_store"]
