"""A model that turns prompts into texts: what a model-based annotator needs.

The annotator receives one (``auditkit_ray.annotators.extract.ModelExtractor``)
instead of building a backend itself; the judge layer makes the concrete one
from a backend mapping (``auditkit_ray.judges.textmodel``), so annotators
depend on this interface only.
"""

from __future__ import annotations

from typing import Callable, Protocol


class TextModel(Protocol):
    def complete(self, prompts: list[str], ids: list[str]) -> list[str | None]:
        """One text per prompt, in order; ``None`` where the request failed.
        ``ids`` name the requests (per-request seeds and caches key on them)."""


#: builds a TextModel: ``factory(backend_mapping, max_new_tokens=...)``, the mapping like a run's ``model``
TextModelFactory = Callable[..., TextModel]
