"""A document corpus (JSONL: id, text, and optional version, date,
superseded_at, access_groups, digest) and its snapshot for the
deterministic RAG checks (digests, versions, supersession, access groups)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.readers import read_records
from ..errors import DataError


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str = ""
    version: str | None = None
    date: str | None = None
    superseded_at: str | None = None
    access_groups: tuple[str, ...] = ("*",)
    digest: str = ""


class Corpus:
    def __init__(self, docs: list[Document], source: str = "<corpus>") -> None:
        self.docs = docs
        self.by_id = {d.id: d for d in docs}
        self.source = source

    def snapshot(self, decision_date: str | None = None) -> dict[str, Any]:
        snap: dict[str, Any] = {
            "documents": {
                d.id: {"digest": d.digest, "version": d.version, "superseded_at": d.superseded_at,
                       "access_groups": list(d.access_groups)}
                for d in self.docs
            }
        }
        if decision_date:
            snap["decision_date"] = decision_date
        return snap


def text_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_corpus(path: str | Path) -> Corpus:
    docs: list[Document] = []
    seen: set[str] = set()
    if not str(path).startswith("s3://") and Path(path).is_dir():
        raise DataError(f"{path}: a folder; the corpus is a JSON Lines file (id, text, ...)")
    for where, rec in read_records(path, field="retrieval.corpus"):
        if "id" not in rec or "text" not in rec:
            raise DataError(f"{where}: a corpus document needs 'id' and 'text'")
        did = str(rec["id"])
        if did in seen:
            raise DataError(f"{where}: duplicate document id {did!r}")
        seen.add(did)
        groups = rec.get("access_groups") or ["*"]
        if not isinstance(groups, list):
            raise DataError(f"{where}: access_groups must be a list")
        text = str(rec["text"])
        docs.append(Document(
            id=did, text=text, title=str(rec.get("title") or ""), version=rec.get("version"), date=rec.get("date"),
            superseded_at=rec.get("superseded_at"), access_groups=tuple(str(g) for g in groups),
            digest=str(rec.get("digest") or text_digest(text)),
        ))
    if not docs:
        raise DataError(f"{path}: the corpus has no documents")
    return Corpus(docs, str(path))
