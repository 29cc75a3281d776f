"""The sweeps a result store holds, as ``pipeline.sweep`` left them: ``sweeps/<fingerprint>/manifest.json``
(rewritten at every change of state) or else ``sweep.json`` (written at the sweep's end)."""

from __future__ import annotations

import json
from typing import Any


def sweep_docs(store: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(fingerprint, document)`` of each sweep of ``store`` (a ``ResultStore``) whose manifest or sweep.json
    reads as one (a dict with a ``runs`` list), in fingerprint order."""
    out = []
    for sfp in store.list_dirs("sweeps"):
        for name in ("manifest.json", "sweep.json"):
            try:
                doc = json.loads(store.read_bytes(f"sweeps/{sfp}/{name}"))
            except (FileNotFoundError, OSError, ValueError):
                continue
            if isinstance(doc, dict) and isinstance(doc.get("runs"), list):
                out.append((sfp, doc))
                break
    return out
