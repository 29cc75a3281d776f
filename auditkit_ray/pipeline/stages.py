"""Ray Data stages. Each input row is one shard (its samples serialised), so
batch composition is a function of the shard alone: the same on 1 actor or
16, and after a resume.

``GenerateStage`` lives in the generation actor pool (GPU-pinned through
``num_gpus``); ``ScoreStage`` in its own CPU pool. Both write their shard to
the result store atomically before returning, so a retried task finds the
finished file and does not redo the work.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any

import numpy as np

from ..backends.base import Request, create_backend
from ..config.models import RunSpec
from ..core.gcpause import gc_paused
from ..core.metric import Metric
from ..core.types import Generation, Sample
from ..errors import AuditKitError, RunError
from ..store.base import ResultStore
from ..store.layout import RunLayout
from . import tables
from .merge import ShardTally, corpus_metrics
from .merge import run_metrics as build_metrics
from .rows import pack, unpack


def worker_info() -> dict[str, Any]:
    info: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        import ray

        info["gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 - outside Ray
        info["gpu_ids"] = []
    info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return info


def _rows(batch: dict[str, Any]) -> list[tuple[dict, bytes]]:
    """Each row's shard (unpacked) and its samples (still packed: a stage
    that does not read them passes them on as they are). The pipeline's
    input rows name their run in a column of their own (``Plan.row``);
    from the first stage on it travels in the payload."""
    out = [(unpack(p), s) for p, s in zip(batch["payload"], batch["samples"])]
    if "run" in batch:
        for (shard, _), run in zip(out, batch["run"]):
            shard["run"] = str(run)
    return out


def _objects(values: list[Any]) -> np.ndarray:
    """A 1-d object array (``np.array`` would make bytes a fixed-width dtype)."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _out(shards: list[dict], samples: list[bytes]) -> dict[str, np.ndarray]:
    return {
        "shard": np.array([p["shard"] for p in shards], dtype=np.int64),
        "payload": _objects([pack(p) for p in shards]),
        "samples": _objects(samples),
    }


class RunContext:
    """What a stage knows about each run it serves: spec, store and layout,
    keyed by the run fingerprint (one pipeline can carry several runs that
    share a model: evaluate_many, sweep cells)."""

    def __init__(self, runs: dict[str, tuple[str, ResultStore, RunLayout]]) -> None:
        self.specs = {k: RunSpec.model_validate_json(v[0]) for k, v in runs.items()}
        self.stores = {k: v[1] for k, v in runs.items()}
        self.layouts = {k: v[2] for k, v in runs.items()}


class RetrieveStage:
    """Retrieve contexts for each sample of a shard (index built once per
    actor) and build its RAG prompt. The contexts are stored on the sample in
    prompt order, each with its retrieval rank and score, so that citation
    numbers [n] point at the n-th context shown and rank metrics still read
    the retriever's ranking."""

    def __init__(self, runs: dict[str, tuple[str, ResultStore, RunLayout]]) -> None:
        self.ctx = RunContext(runs)
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
        if spec.prompt.system and spec.prompt.chat:
            item["request"]["prompt"] = [{"role": "system", "content": spec.prompt.system}, {"role": "user", "content": prompt}]
        elif spec.prompt.chat:
            item["request"]["prompt"] = [{"role": "user", "content": prompt}]
        else:
            item["request"]["prompt"] = f"{spec.prompt.system}\n\n{prompt}" if spec.prompt.system else prompt
        return Sample.model_validate(sample)

    @gc_paused()
    def __call__(self, batch: dict[str, Any]) -> dict[str, np.ndarray]:
        out, cells = [], []
        for shard, cell in _rows(batch):
            spec = self.ctx.specs[shard["run"]]
            if spec.retrieval is not None:
                samples = unpack(cell)
                cell = pack([self.retrieve_item(spec, item, s) for item, s in zip(shard["items"], samples)])
            out.append(shard)
            cells.append(cell)
        return _out(out, cells)


class _SharedClock:
    """Generation time of shards that overlap in one actor, split between
    them: each instant the actor's backend is busy counts once, shared
    equally by the shards in flight then, so the shards' times add up to the
    actor's busy time (not k times it with k shards at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._k = 0
        self._v = 0.0  # virtual time: d(v)/dt = 1 / shards in flight, while any is
        self._t = time.perf_counter()

    def _advance(self) -> float:
        now = time.perf_counter()
        if self._k:
            self._v += (now - self._t) / self._k
        self._t = now
        return self._v

    def start(self) -> float:
        with self._lock:
            v = self._advance()
            self._k += 1
            return v

    def stop(self, started: float) -> float:
        with self._lock:
            v = self._advance()
            self._k -= 1
            return v - started


class _SettingsGate:
    """Shards in flight at once in one actor share its backend, whose
    generation settings and seed are per run: shards of runs with other
    settings wait until the backend's calls in flight are done."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._key: str | None = None
        self._n = 0

    def enter(self, key: str) -> bool:
        """Returns true when the caller must apply its settings."""
        with self._cond:
            while self._n and self._key != key:
                self._cond.wait()
            switch = self._key != key
            self._key = key
            self._n += 1
            return switch

    def leave(self) -> None:
        with self._cond:
            self._n -= 1
            if not self._n:
                self._cond.notify_all()


class GenerateStage:
    """May run several shards at once (``execution.generation_shards_in_flight``,
    in a threaded actor): the backend loads once; its calls overlap only if
    it is ``thread_safe`` (the api backend), else they take turns while the
    shards' other work (payloads, Parquet writes) overlaps; shards with other
    generation settings wait their turn; and each shard's generation time is
    its share of the actor's busy time."""

    def __init__(self, runs: dict[str, tuple[str, ResultStore, RunLayout]], threads: int = 1) -> None:
        self.ctx = RunContext(runs)
        self.threads = threads
        self.backend = None
        self.worker = worker_info()
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._gate = _SettingsGate()
        self._clock = _SharedClock()
        self._preload: tuple[threading.Thread, dict[str, Any]] | None = None
        self._unloaded = None  # built here, loaded by the first shard (backends that load in the generating thread)
        first = next(iter(self.ctx.specs.values()), None)  # the runs of one pipeline share a model
        if first is not None:
            backend = create_backend(first.model, first.generation, first.seed)
            if not backend.load_in_thread:
                self._unloaded = backend
            else:  # load now, while Ray Data starts the other actors and sends the first shard
                box: dict[str, Any] = {}

                def preload() -> None:
                    try:
                        backend.load()
                        box["backend"] = backend
                    except BaseException as exc:  # noqa: BLE001 - raised by the first shard's _get_backend
                        box["error"] = exc.with_traceback(None)

                thread = threading.Thread(target=preload, name="auditkit-model-load", daemon=True)
                thread.start()
                self._preload = (thread, box)

    def _get_backend(self, spec: RunSpec):
        if self.backend is None:
            with self._load_lock:
                if self.backend is None:
                    if self._preload is not None:  # started in __init__: wait for it; a failed load is retried
                        thread, box = self._preload
                        thread.join()
                        self._preload = None
                        if "error" in box:
                            raise box["error"]
                        backend = box["backend"]
                    else:
                        backend = self._unloaded or create_backend(spec.model, spec.generation, spec.seed)
                        self._unloaded = None  # a failed load starts again from a fresh backend
                        backend.load()  # once per actor, reused for every shard of every run it serves
                    if "torch" in sys.modules and self.threads:  # in this thread (OpenMP's count is per thread)
                        sys.modules["torch"].set_num_threads(self.threads)
                    self.backend = backend
        return self.backend

    def _call_backend(self, spec: RunSpec, requests: list[Request]) -> list[Generation]:
        backend = self._get_backend(spec)
        # runs sharing a model may differ in generation settings and seed
        if self._gate.enter(json.dumps([spec.generation.model_dump(mode="json"), spec.seed], sort_keys=True)):
            backend.generation, backend.seed = spec.generation, spec.seed
        try:
            if getattr(backend, "thread_safe", False):
                gens = backend.run(requests)
            else:  # a model in the actor: one call at a time; the shards' other work still overlaps
                with self._call_lock:
                    gens = backend.run(requests)
        finally:
            self._gate.leave()
        if len(gens) != len(requests):
            raise RuntimeError(f"backend returned {len(gens)} generations for {len(requests)} requests")
        return gens

    def _watched(self, spec: RunSpec, shard: int, store: ResultStore, layout: RunLayout, requests: list[Request]) -> list[Generation]:
        """Run the backend under the shard watchdog (``execution.shard_timeout_s``).

        A call that hangs cannot be interrupted from Python, so the actor
        records the attempt in the store and exits; Ray restarts the actor
        and retries the shard. After ``max_shard_retries`` timed-out attempts
        the shard's samples are recorded as errors instead."""
        timeout = spec.execution.shard_timeout_s
        if not timeout:
            return self._call_backend(spec, requests)
        marker = f"{layout.gen_dir}/.timeouts-{RunLayout.shard_name(shard)}"
        earlier = len(store.read_bytes(marker)) if store.exists(marker) else 0
        if earlier > spec.execution.max_shard_retries:
            msg = f"shard {shard} timed out after {timeout:g}s in {earlier} attempts"
            return [Generation(error=msg) for _ in requests]
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["out"] = self._call_backend(spec, requests)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["exc"] = exc

        worker = threading.Thread(target=target, daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            store.replace(marker, b"x" * (earlier + 1))
            print(f"auditkit-ray watchdog: shard {shard} generation exceeded {timeout:g}s; restarting this actor "
                  f"(attempt {earlier + 1} of {spec.execution.max_shard_retries + 1})", file=sys.stderr, flush=True)
            os._exit(75)  # Ray restarts the actor and retries the shard
        if "exc" in box:
            raise box["exc"]
        return box["out"]

    def _generate(self, spec: RunSpec, shard: int, store: ResultStore, layout: RunLayout, requests: list[Request]) -> tuple[list[dict], float, bool]:
        retries = spec.execution.max_shard_retries
        last: Exception | None = None
        for attempt in range(retries + 1):
            try:
                # the model loads once per actor, before the clock and the watchdog start: a
                # slow load is neither a hung shard nor generation time
                self._get_backend(spec)
                t0 = self._clock.start()
                try:
                    gens = self._watched(spec, shard, store, layout, requests)
                finally:
                    seconds = self._clock.stop(t0)
                return [g.model_dump(mode="json") for g in gens], seconds, not any(
                    (g.error or "").startswith(f"shard {shard} timed out") for g in gens)
            except AuditKitError:
                raise  # fatal: engine dead, bad model
            except MemoryError as exc:
                raise RunError(f"out of memory generating shard {shard} ({exc}); lower the backend's batch_size or "
                               "execution.shard_size, or give each actor more memory") from None
            except Exception as exc:  # noqa: BLE001 - retried, then recorded per sample
                if "OutOfMemory" in type(exc).__name__:
                    raise RunError(f"out of memory generating shard {shard} ({type(exc).__name__}: {exc}); "
                                   "lower the backend's batch_size or execution.shard_size") from None
                last = exc
                time.sleep(min(2.0, 0.1 * 2**attempt))
        msg = f"shard {shard} failed after {retries + 1} attempts: {type(last).__name__}: {last}"
        return [Generation(error=msg).model_dump(mode="json") for _ in requests], 0.0, False

    def generate_shard(self, shard: dict) -> dict:
        """The shard's generations: from the generation cache when stored,
        else from the backend (then cached)."""
        key, i = shard["run"], shard["shard"]
        spec, store, layout = self.ctx.specs[key], self.ctx.stores[key], self.ctx.layouts[key]
        rel = layout.gen_shard(i)
        if store.exists(rel):
            stored_generations(shard, store, layout)
        else:
            requests = [Request(**it["request"]) for it in shard["items"]]
            gens, seconds, ok = self._generate(spec, i, store, layout, requests)
            if ok:  # a shard that failed wholesale is not cached: a re-run retries it
                store.write_table(rel, tables.generation_table(i, shard["items"], gens))
            shard["generations"] = gens
            shard["generated"] = True
            shard["generation_s"] = seconds
        shard["generated_at"] = time.time()
        shard["worker"] = self.worker
        if self.backend is not None:
            shard["model_size_bytes"] = self.backend.model_size_bytes()
        return shard

    @gc_paused()
    def __call__(self, batch: dict[str, Any]) -> dict[str, np.ndarray]:
        rows = _rows(batch)
        return _out([self.generate_shard(shard) for shard, _ in rows], [cell for _, cell in rows])


def stored_generations(shard: dict, store: ResultStore, layout: RunLayout) -> dict:
    """The shard's generations from the generation cache (no backend)."""
    shard["generations"] = tables.generations_from_table(store.read_table(layout.gen_shard(shard["shard"])))
    shard["generated"] = False
    return shard


POOLS = ("checks", "judges", "oracles")


GENERATION = ("given", "inline", "cached")


class ScoreStage:
    """One scoring pool: annotators (first pool only) and the run's metrics
    whose ``pool_name()`` is this pool. The last pool writes the run shard.

    ``generation`` says where the first pool's shards get their outputs:
    ``given`` by a generation stage before it; ``inline``, a backend with no
    model (``generates_inline``) run here, so that its shards skip one
    process and one hand-off; ``cached``, read from the generation cache
    (every pending shard's outputs are stored: no backend at all)."""

    def __init__(self, runs: dict[str, tuple[str, ResultStore, RunLayout]], pool: str = "checks", final: bool = True,
                 generation: str = "given") -> None:
        if generation not in GENERATION:
            raise ValueError(f"ScoreStage: generation must be one of {GENERATION}, got {generation!r}")
        self.generation = generation
        self._generator = GenerateStage(runs) if generation == "inline" else None
        self.ctx = self._generator.ctx if self._generator is not None else RunContext(runs)
        self.pool = pool
        self.final = final
        self._worker = worker_info()
        self._scorers: dict[str, tuple[list, list, dict]] = {}

    def _with_generations(self, shard: dict) -> dict:
        if self.generation == "inline":
            return self._generator.generate_shard(shard)
        if self.generation == "cached":
            key = shard["run"]
            stored_generations(shard, self.ctx.stores[key], self.ctx.layouts[key])["worker"] = self._worker
        return shard

    def _scorer(self, key: str) -> tuple[list, list, dict]:
        """The run's annotators, this pool's metrics, and (for the tally) the
        run's corpus metrics, whichever pool scores them."""
        if key not in self._scorers:
            from ..annotators.extract import build_annotator

            spec = self.ctx.specs[key]
            annotators = [(a.name, build_annotator(a)) for a in spec.annotators]
            every = build_metrics(spec)
            self._scorers[key] = (annotators, [m for m in every if m.pool_name() == self.pool], corpus_metrics(every))
        return self._scorers[key]

    def score_shard(self, shard: dict, samples: list[Sample]) -> dict:
        from ..annotators.extract import apply_annotators_batch

        key = shard["run"]
        annotators, metrics, corpus = self._scorer(key)
        items = shard["items"]
        gens = [Generation.model_validate(g) for g in shard["generations"]]
        if "annotations" not in shard:
            shard["annotations"] = apply_annotators_batch(annotators, gens, [it["request"]["sample_id"] for it in items])
        annotations = shard["annotations"]
        contexts = [{"annotations": a, "prompt": it["request"]["prompt"], "repeat": it["request"]["repeat"]} for a, it in zip(annotations, items)]
        # per item: earlier pools' scores as their dicts, then this pool's as Score objects
        per_item: list[list[Any]] = [list(p) for p in shard.get("scores") or [[] for _ in items]]
        batch = list(zip(samples, gens, contexts))
        groups: dict[str, list[int]] = {}
        for k, it in enumerate(items):
            groups.setdefault(it["request"]["sample_id"], []).append(k)
        absent: dict[str, list[bool]] = {}  # required fields' absence per item, worked out once for all the metrics
        for metric in metrics:
            if metric.scope == "group":
                order = list(groups.values())
                results = metric.evaluate_groups([(samples[ks[0]], [gens[k] for k in ks], [contexts[k] for k in ks]) for ks in order])
                for ks, scores in zip(order, results):
                    per_item[min(ks, key=lambda k: items[k]["request"]["repeat"])].extend(scores)
                continue
            shared = type(metric).evaluate_batch is Metric.evaluate_batch  # an override may not take ``absent``
            for k, scores in enumerate(metric.evaluate_batch(batch, absent=absent) if shared else metric.evaluate_batch(batch)):
                per_item[k].extend(scores)
        if not self.final:
            # the next pool gets plain dicts (pickled with the shard)
            shard["scores"] = [[s if type(s) is dict else s.to_json_dict() for s in p] for p in per_item]
            return shard
        timing = {"generated_at": shard.get("generated_at"), "scored_at": time.time(), "scored_by": os.getpid()}
        table = tables.run_table(shard["shard"], items, [s.target for s in samples], shard["generations"], annotations,
                                 [[s if type(s) is dict else tables.score_row(s) for s in p] for p in per_item],
                                 {**shard["worker"], **timing})
        self.ctx.stores[key].write_table(self.ctx.layouts[key].shard(shard["shard"]), table)
        return {
            "tally": self._tally(items, shard["generations"], per_item, corpus),
            "run": key,
            "shard": shard["shard"],
            "n": len(items),
            "generated": shard.get("generated", False),
            "generation_s": shard.get("generation_s", 0.0),
            "completion_tokens": sum(g.completion_tokens or 0 for g in gens) if shard.get("generated") else 0,
            "model_size_bytes": shard.get("model_size_bytes"),
        }

    @staticmethod
    def _tally(items: list[dict], gens: list[dict], scores: list[list[Any]], corpus: dict) -> Any:
        """The summary's share of the shard just written, from the same rows
        (``merge.ShardTally``): the driver merges tallies, not the files."""
        return ShardTally.of_rows(({"sample_id": it["request"]["sample_id"], "error": g.get("error"), "scores": sc,
                                    "latency_s": g.get("latency_s"), "latency_scope": g.get("latency_scope"),
                                    "prompt_tokens": g.get("prompt_tokens"), "completion_tokens": g.get("completion_tokens"),
                                    "token_source": g.get("token_source"), "gen_metadata": g.get("metadata") or {}}
                                   for it, g, sc in zip(items, gens, scores)), corpus)

    @gc_paused()
    def __call__(self, batch: dict[str, Any]) -> dict[str, np.ndarray]:
        rows = _rows(batch)
        out = [self.score_shard(self._with_generations(shard), unpack(cell)) for shard, cell in rows]
        if not self.final:
            return _out(out, [cell for _, cell in rows])
        return {"shard": np.array([o["shard"] for o in out], dtype=np.int64), "payload": _objects([pack(o) for o in out])}


def pools_needed(specs: list[RunSpec]) -> list[str]:
    used = {m.pool_name() for spec in specs for m in build_metrics(spec)}
    return [p for p in POOLS if p in used] or ["checks"]
