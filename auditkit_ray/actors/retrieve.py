"""The retrieval stage: contexts for each sample of a shard, and its RAG prompt."""

from __future__ import annotations

import json
from typing import Any

from ..config.models import RunSpec
from ..core.gcpause import gc_paused
from ..core.types import Sample
from .context import DriverContext, RunContext, Runs
from .shard import StageFields, pack, payload_batch, read_batch, unpack

FIELDS = StageFields("RetrieveStage", reads=("run", "items"))


class RetrieveStage:
    """Retrieve contexts for each sample of a shard (index built once per
    actor) and build its RAG prompt. The contexts are stored on the sample in
    prompt order, each with its retrieval rank and score, so that citation
    numbers [n] point at the n-th context shown and rank metrics still read
    the retriever's ranking."""

    fields = FIELDS

    def __init__(self, runs: Runs, driver: DriverContext | None = None) -> None:
        self.ctx = RunContext(runs, driver)
        self._indexes: dict[str, Any] = {}

    def _index(self, spec: RunSpec) -> tuple[Any, Any]:
        from ..rag import load_corpus, make_retriever

        r = spec.retrieval
        key = json.dumps([r.retriever, r.corpus, r.params], sort_keys=True)
        if key not in self._indexes:
            if r.retriever == "precomputed":
                corpus = load_corpus(r.corpus) if r.corpus else None
                self._indexes[key] = (None, corpus)
            else:
                corpus = load_corpus(r.corpus)
                self._indexes[key] = (make_retriever(r.retriever, corpus, r.params), corpus)
        return self._indexes[key]

    def retrieve_item(self, spec: RunSpec, item: dict, given_sample: Sample) -> Sample:
        from ..adapters.prompt import render

        r = spec.retrieval
        retriever, corpus = self._index(spec)
        record, sample = item["record"], given_sample.model_dump(mode="json")
        if retriever is None:
            given = sorted(sample.get("retrieved_contexts") or [],
                           key=lambda c: (c.get("rank", 1e9), -(c.get("score") or 0.0)))[: r.k]
            hits = [{**c, "rank": c.get("rank", i + 1)} for i, c in enumerate(given)]
        else:
            query = str(record.get(r.query_field or spec.dataset.input_field, ""))
            hits = []
            for rank, (doc_id, score) in enumerate(retriever.search(query, r.k), start=1):
                d = corpus.by_id[doc_id]
                hits.append({"id": doc_id, "rank": rank, "score": score, "text": d.text, "title": d.title})
        shown = hits if r.order == "rank" else list(reversed(hits))
        sample["retrieved_contexts"] = shown
        if corpus is not None:
            when = r.decision_date or (sample.get("metadata") or {}).get("decision_date")
            sample["corpus_snapshot"] = corpus.snapshot(when)
        parts = [render(r.context_template, {"n": i + 1, "id": c.get("id", ""), "text": c.get("text", ""),
                                             "title": c.get("title", ""), "score": c.get("score", "")}, sample["id"])
                 for i, c in enumerate(shown)]
        fields = {**record, "input": record.get(spec.dataset.input_field, ""), "contexts": r.separator.join(parts)}
        prompt = render(r.template, fields, sample["id"])
        if given_sample.images:
            from ..core.images import with_images

            # the placement rule of docs/images.md: chat messages, the system prompt a message of its own,
            # the images first in the user message, then its text (the retrieved passages with the question)
            system = [{"role": "system", "content": spec.prompt.system}] if spec.prompt.system else []
            item["request"]["prompt"] = with_images([*system, {"role": "user", "content": prompt}],
                                                    list(given_sample.images))
        elif spec.prompt.system and spec.prompt.chat:
            item["request"]["prompt"] = [{"role": "system", "content": spec.prompt.system},
                                         {"role": "user", "content": prompt}]
        elif spec.prompt.chat:
            item["request"]["prompt"] = [{"role": "user", "content": prompt}]
        else:
            item["request"]["prompt"] = f"{spec.prompt.system}\n\n{prompt}" if spec.prompt.system else prompt
        return Sample.model_validate(sample)

    @gc_paused()
    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out, cells = [], []
        for payload, cell in read_batch(batch):
            FIELDS.require(payload)
            spec, _, _ = self.ctx.of(FIELDS.stage, payload.run)
            if spec.retrieval is not None:
                samples = unpack(cell)
                cell = pack([self.retrieve_item(spec, item, s) for item, s in zip(payload.items, samples)])
            out.append(payload)
            cells.append(cell)
        return payload_batch(out, cells)
