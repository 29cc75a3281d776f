"""What the generation actor lends a backend that reads stored results
(``core.backends.BackendServices``): the store's per-sample reader and the
dataset readers, so that backends never import either."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class StoreServices:
    def read_samples_table(self, path: str) -> list[dict[str, Any]]:
        from ..store.samples import read_samples_table

        return read_samples_table(path).to_pylist()

    def read_records(self, path: str) -> Iterable[tuple[str, dict[str, Any]]]:
        from ..data.readers import read_records

        return read_records(path)


SERVICES = StoreServices()
