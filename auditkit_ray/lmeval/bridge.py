"""lm-evaluation-harness bridge: lm-eval tasks as auditkit-ray runs.

``run_lmeval(tasks, model, engine=...)`` returns one ``RunResult`` per task,
stored in a result store like a native run (``runs/<fp>/result.json`` and a
per-sample Parquet table), so ``samples_table``, ``compare`` and
``leaderboard`` work on lm-eval runs.

- ``engine="lm_eval"``: the real ``lm_eval.simple_evaluate`` (model ``hf``,
  ``log_samples=True``) in this process; its task-level numbers, stderr,
  ``higher_is_better``, n-shot, version and config are recorded as they are,
  and its per-sample logs become the per-sample table.
- ``engine="pipeline"``: the task's requests (built by lm-eval: docs,
  prompts, few-shot examples) are written as a dataset, one sample per doc,
  and run through auditkit-ray's Ray pipeline (sharded over the generation
  actors, so over GPUs and nodes); each doc is scored by lm-eval's own
  filters and ``process_results`` (a group metric) and the task-level numbers
  come from lm-eval's aggregation functions.

Both are cached by fingerprint: a second call with the same settings returns
the stored RunResult without running anything. lm_eval is imported inside
functions; without the ``lmeval`` extra a call raises one line naming the
``pip install`` to run.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable

from .._version import __version__
from ..core.fingerprint import fingerprint
from ..core.result import Perf, RunResult
from ..errors import ConfigError
from .compat import import_lm_eval, lm_eval_version
from .support import (
    TaskOptions,
    collect_items,
    dataset_fingerprint,
    doc_scores,
    jsonable,
    load_tasks,
    offline,
    seeds_of,
    summaries,
    task_config,
    task_identity,
)

ENGINES = ("lm_eval", "pipeline")
#: HFLM's default for generation tasks that give no max_gen_toks
DEFAULT_MAX_GEN_TOKS = 256


def _task_names(tasks: str | Iterable[str]) -> list[str]:
    parts = tasks.split(",") if isinstance(tasks, str) else [p for t in tasks for p in str(t).split(",")]
    names = [p.strip() for p in parts if p.strip()]
    if not names:
        raise ConfigError("lmeval: give at least one task name")
    return list(dict.fromkeys(names))


def _check_model(model: str | os.PathLike) -> Path:
    p = Path(model).expanduser()
    if not p.is_dir() or not (p / "config.json").is_file():
        raise ConfigError(f"model {str(model)!r}: not a local HF-format checkpoint directory (no config.json); "
                          "lm-eval runs here take a local path (no hub downloads)")
    return p.resolve()


class _Laps:
    """The invocation's time, handed out result by result: each lap is the time since the last, so the first
    result made carries the start-up before it (imports, the tasks' and the model's loading) and the walls of
    an invocation's results add up to its own."""

    def __init__(self) -> None:
        self.last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        out, self.last = now - self.last, now
        return out


def default_data_dir() -> Path:
    root = os.environ.get("AUDITKIT_RAY_CACHE") or str(Path.home() / ".cache" / "auditkit-ray")
    return Path(root) / "lmeval"


def _cached(store: Any, fp: str, shard_size: int | None = None) -> RunResult | None:
    """The stored RunResult of fingerprint ``fp``, if it is a finished lm-eval
    run (a pipeline run not yet mapped is mapped again; one stored under
    another shard size, which decides batch composition, is run again)."""
    rel = f"runs/{fp}/result.json"
    if not store.exists(rel):
        return None
    result = RunResult.from_dict(json.loads(store.read_bytes(rel)), source=store.uri(rel))
    if "lm_eval" not in result.metadata:
        return None
    if shard_size is not None and result.metadata.get("shard_size") != shard_size:
        return None
    return result


def _record(store: Any, result: RunResult, index: bool) -> None:
    from ..pipeline.runtime import warn_on_failure
    from ..store.db import ExperimentDB

    rel = f"runs/{result.fingerprint}/result.json"
    store.replace(rel, result.to_json().encode("utf-8"))
    if index:
        warn_on_failure("ExperimentDB",
                        lambda: ExperimentDB(None).record(result, result_uri=store.uri(rel), store_uri=store.uri()))


def _target_text(target: Any) -> str | list[str]:
    if isinstance(target, (list, tuple)):
        return [str(t) for t in target]
    return str(target)


def sample_id(doc_id: int) -> str:
    return f"doc-{int(doc_id):06d}"


def run_lmeval(
    tasks: str | Iterable[str],
    model: str | os.PathLike,
    *,
    engine: str = "lm_eval",
    include_path: Iterable[str | os.PathLike] = (),
    num_fewshot: int | None = None,
    limit: int | float | None = None,
    seed: int | tuple[int, int, int, int] | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    dtype: str = "float32",
    trust_remote_code: bool = False,
    store: str = "results",
    bootstrap_iters: int = 100_000,
    index: bool = True,
    address: str | None = None,
    shard_size: int = 64,
    generation_actors: int = 1,
    execution: dict[str, Any] | None = None,
    data_dir: str | os.PathLike | None = None,
    progress: bool = False,
) -> list[RunResult]:
    """Evaluate ``model`` (a local HF checkpoint) on lm-eval ``tasks`` and
    return one RunResult per task (a group expands to its tasks; with
    ``engine="pipeline"`` give task names).

    ``include_path``: folders of more task YAMLs (the tasks shipped in
    ``auditkit_ray/lmeval/tasks`` are always found).
    ``num_fewshot``, ``limit``, ``seed`` (one number for all four of lm-eval's
    seeds, or four: python, numpy, torch, few-shot) and ``bootstrap_iters``
    mean what they mean to lm-eval. ``batch_size`` defaults to lm-eval's 1
    (``lm_eval``) or 8 (``pipeline``); ``device`` to ``cpu`` (``lm_eval``) or
    ``auto`` (``pipeline``: the GPU Ray gives the actor). ``shard_size``,
    ``generation_actors``, ``execution`` (more ExecutionSpec fields) and
    ``address`` configure the pipeline; ``data_dir`` is where it writes the
    task's docs as JSONL (default ``~/.cache/auditkit-ray/lmeval``)."""
    laps = _Laps()
    import_lm_eval()  # first: without the extra, this is the one error
    if engine not in ENGINES:
        raise ConfigError(f"lmeval: engine {engine!r} is not one of {', '.join(ENGINES)}")
    if dtype not in ("float32", "bfloat16", "float16", "auto"):
        raise ConfigError(f"lmeval: dtype {dtype!r} is not one of float32, bfloat16, float16, auto")
    names = _task_names(tasks)
    path = _check_model(model)
    seeds = seeds_of(seed)
    opts = TaskOptions(tuple(str(p) for p in include_path), num_fewshot, seeds[3])
    from ..store.base import open_store

    loaded = load_tasks(names, opts)
    st = open_store(store)
    common = dict(path=path, seeds=seeds, opts=opts, limit=limit, dtype=dtype, trust_remote_code=trust_remote_code,
                  store=st, store_path=store, bootstrap_iters=bootstrap_iters, index=index, laps=laps)
    if engine == "lm_eval":
        return _run_direct(loaded, batch_size=batch_size or 1, device=device or "cpu", **common)
    if device not in (None, "auto", "cpu", "cuda"):
        raise ConfigError(
            f"lmeval: engine 'pipeline' takes device auto, cpu or cuda (Ray picks the GPU), not {device!r}")
    if loaded.groups:
        raise ConfigError("lmeval: engine 'pipeline' takes task names, not groups or tags "
                          f"({', '.join(loaded.groups)}); "
                          "list the tasks, or use engine 'lm_eval'")
    return _run_pipeline(loaded, batch_size=batch_size or 8, device=device or "auto", address=address,
                         shard_size=shard_size,
                         generation_actors=generation_actors, execution=execution or {},
                         data_dir=Path(data_dir) if data_dir else default_data_dir(), progress=progress, **common)


# --------------------------------------------------------------------------- shared pieces
def _model_spec(path: Path, dtype: str, batch_size: int, device: str, trust_remote_code: bool) -> Any:
    from ..backends.hf import HFSettings as HFBackend

    return HFBackend(type="hf", path=str(path), dtype=dtype, batch_size=batch_size,
                     device=device,  # type: ignore[arg-type]
                     trust_remote_code=trust_remote_code)


def _lm_meta(engine: str, task: Any, ident: dict, *, lm_version: str, seeds: tuple, limit: Any, bootstrap_iters: int,
             opts: TaskOptions, **extra: Any) -> dict[str, Any]:
    return {
        "engine": engine, "task": ident["name"], "version": ident["version"], "n_shot": ident["num_fewshot"],
        "output_type": ident["output_type"], "config_hash": ident["config_hash"], "lm_eval_version": lm_version,
        "higher_is_better": jsonable(task.higher_is_better()), "limit": limit, "bootstrap_iters": bootstrap_iters,
        "seeds": {"python": seeds[0], "numpy": seeds[1], "torch": seeds[2], "fewshot": seeds[3]},
        "include_path": opts.paths(), "config": task_config(task), **extra,
    }


def _table_bytes(table: Any) -> bytes:
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


# --------------------------------------------------------------------------- engine "lm_eval"
def _make_lm(path: Path, dtype: str, batch_size: int, device: str, trust_remote_code: bool) -> Any:
    from lm_eval.api.registry import get_model

    return get_model("hf").create_from_arg_obj(
        {"pretrained": str(path), "dtype": dtype, "trust_remote_code": trust_remote_code},
        {"batch_size": batch_size, "device": device},
    )


def _run_direct(loaded: Any, *, path: Path, seeds: tuple, opts: TaskOptions, limit: Any, dtype: str,
                trust_remote_code: bool,
                store: Any, store_path: str, bootstrap_iters: int, index: bool, batch_size: int,
                device: str, laps: _Laps) -> list[RunResult]:
    import lm_eval

    from ..pipeline.identity import model_identity

    # lm-eval takes devices such as "cuda:1"; the device is not part of the identity
    kind = "cuda" if device.startswith("cuda") else ("cpu" if device == "cpu" else "auto")
    mspec = _model_spec(path, dtype, batch_size, kind, trust_remote_code)
    mident = model_identity(SimpleNamespace(model=mspec))  # path, settings, checkpoint hash, provenance
    lm_version = lm_eval_version()
    results: dict[str, RunResult] = {}
    todo = []
    for tname, task in loaded.tasks.items():
        ident = task_identity(task)
        fp = fingerprint({"kind": "lm_eval_run", "engine": "lm_eval", "package_version": __version__,
                          "lm_eval_version": lm_version,
                          "model": mident, "task": ident, "limit": limit, "seeds": list(seeds),
                          "bootstrap_iters": bootstrap_iters})
        hit = _cached(store, fp)
        if hit is not None:
            results[tname] = hit.model_copy(update={"perf": hit.perf.reused(laps.lap())})
        else:
            todo.append((tname, task, ident, fp))
    if todo:
        lm = _make_lm(path, dtype, batch_size, device, trust_remote_code)  # once for every task
        for tname, task, ident, fp in todo:
            t0 = time.perf_counter()
            with offline(loaded.local):
                out = lm_eval.simple_evaluate(
                    model=lm, tasks=[task], num_fewshot=opts.num_fewshot, limit=limit, log_samples=True,
                    bootstrap_iters=bootstrap_iters, random_seed=seeds[0], numpy_random_seed=seeds[1],
                    torch_random_seed=seeds[2], fewshot_random_seed=seeds[3], task_manager=loaded.manager)
            evaluated = time.perf_counter() - t0
            result = _direct_result(out, task, tname, ident, fp, wall=laps.lap(), evaluated_s=evaluated, mspec=mspec,
                                    mident=mident,
                                    lm_version=lm_version,
                                    seeds=seeds, opts=opts, limit=limit, bootstrap_iters=bootstrap_iters, store=store,
                                    store_path=store_path, device=device)
            _record(store, result, index)
            results[tname] = result
    return [results[t] for t in loaded.tasks]


def _direct_result(out: dict, task: Any, tname: str, ident: dict, fp: str, *, wall: float, evaluated_s: float,
                   mspec: Any, mident: dict,
                   lm_version: str, seeds: tuple, opts: TaskOptions, limit: Any, bootstrap_iters: int, store: Any,
                   store_path: str, device: str) -> RunResult:
    from ..actors import tables
    from ..core.secrets import redact
    from ..store.layout import RunLayout

    generate = task.OUTPUT_TYPE == "generate_until"
    by_doc: dict[int, dict[str, Any]] = {}
    for ex in out["samples"][tname]:
        d = by_doc.setdefault(int(ex["doc_id"]), {"ex": ex, "per_filter": {}, "filtered": {}})
        d["per_filter"][ex["filter"]] = {m: ex[m] for m in ex["metrics"]}
        d["filtered"][ex["filter"]] = ex["filtered_resps"][0] if generate else None
    items: list[dict] = []
    targets: list[str] = []
    gens: list[dict] = []
    scores: list[list[dict]] = []
    per_doc: list[list[dict]] = []
    for doc_id in sorted(by_doc):
        d = by_doc[doc_id]
        ex = d["ex"]
        sid, target = sample_id(doc_id), _target_text(ex["target"])
        if generate:
            raw = list(ex["resps"][0])
            rows = [({"sample_id": sid, "repeat": r, "choice": None, "prompt": ex["arguments"][0][0]},
                     {"text": text, "raw_text": text}) for r, text in enumerate(raw)]
        else:
            raw = [list(r[0]) for r in ex["resps"]]
            rows = [({"sample_id": sid, "repeat": 0, "choice": k, "prompt": a[0]},
                     {"text": a[1], "raw_text": a[1], "finish_reason": "loglikelihood"})
                    for k, a in enumerate(ex["arguments"])]
        doc = [s.model_dump(mode="json") for s in doc_scores(task, d["per_filter"], d["filtered"], raw)]
        per_doc.append(doc)
        for k, (req, gen) in enumerate(rows):
            items.append({"request": req})
            targets.append(target)
            gens.append(gen)
            scores.append(doc if k == 0 else [])
    n_docs = len(by_doc)
    layout = RunLayout(fp, fp, max(1, n_docs))
    worker = {"engine": "lm_eval", "host": socket.gethostname(), "pid": os.getpid(), "scored_at": time.time()}
    table = tables.run_table(0, items, targets, gens, [{} for _ in items], scores, worker)
    store.replace(layout.shard(0), _table_bytes(table))
    store.replace(layout.manifest, json.dumps({"name": tname, "fingerprint": fp, "engine": "lm_eval", "n_shards": 1,
                                               "shard_size": layout.shard_size, "n_samples": n_docs,
                                               "state": "complete"},
                                              indent=2).encode())
    metrics = summaries(task, collect_items(per_doc), higher_is_better=out["higher_is_better"][tname], ident=ident,
                        lm_version=lm_version, bootstrap_iters=bootstrap_iters, reported=out["results"][tname])
    meta = _lm_meta("lm_eval", task, ident, lm_version=lm_version, seeds=seeds, limit=limit,
                    bootstrap_iters=bootstrap_iters,
                    opts=opts, n_samples=jsonable(out.get("n-samples", {}).get(tname)),
                    results=jsonable(out["results"][tname]))
    meta["n_shot"] = out.get("n-shot", {}).get(tname, ident["num_fewshot"])
    meta["version"] = jsonable(out.get("versions", {}).get(tname, ident["version"]))
    metadata: dict[str, Any] = {"lm_eval": meta, "n_shards": 1, "shard_size": layout.shard_size}
    if "provenance" in mident:
        metadata["provenance"] = mident["provenance"]
    config = {"name": f"lm_eval:{tname}/{Path(mspec.path).name}", "engine": "lm_eval",
              "model": mspec.model_dump(mode="json"), "dataset": {"path": f"lm_eval:{tname}"},
              "lm_eval": {"task": tname, "num_fewshot": opts.num_fewshot, "limit": limit, "include_path": opts.paths(),
                          "seeds": list(seeds), "bootstrap_iters": bootstrap_iters, "device": device},
              "seed": seeds[0], "store": {"path": store_path}}
    return RunResult(
        run_id=fp[:16], name=config["name"], fingerprint=fp,
        dataset_fingerprint=dataset_fingerprint(ident, limit, seeds),
        package_version=__version__, seed=seeds[0], config=redact(config), metrics=metrics,
        # a sample is a document, as the metrics' n counts (a multiple-choice one makes a request per choice)
        perf=Perf(wall_s=wall, generation_s=evaluated_s, samples=n_docs, generated=n_docs,
                  throughput_samples_per_s=n_docs / wall if wall else None),
        samples_path=store.uri(layout.shards_dir), backend={**redact(mident), "engine": "lm_eval"},
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), metadata=metadata,
    )


# --------------------------------------------------------------------------- engine "pipeline"
def _build_requests(task: Any, limit: Any, seeds: tuple) -> dict[int, list[Any]]:
    """The task's Instances per doc id, built as lm-eval's evaluator builds
    them (same seeds), in request order."""
    import random

    import numpy as np
    from lm_eval.evaluator_utils import get_sample_size

    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seeds[0])
    np.random.seed(seeds[1])
    try:
        task.build_all_requests(limit=get_sample_size(task, limit), rank=0, world_size=1, cache_requests=False,
                                rewrite_requests_cache=False, system_instruction=None, apply_chat_template=False,
                                fewshot_as_multiturn=True, chat_template=None, tokenizer_name="")
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
    by_doc: dict[int, list[Any]] = {}
    for inst in task.instances:
        by_doc.setdefault(int(inst.doc_id), []).append(inst)
    return {d: sorted(v, key=lambda i: i.idx) for d, v in sorted(by_doc.items())}


def _generation_settings(tname: str, gen_kwargs: dict) -> dict[str, Any]:
    from lm_eval.models.utils import normalize_gen_kwargs

    kw = dict(normalize_gen_kwargs(dict(gen_kwargs), DEFAULT_MAX_GEN_TOKS))
    until = [u for u in kw.pop("until", []) if u]
    max_new = int(kw.pop("max_gen_toks"))
    sampling = bool(kw.pop("do_sample", False))
    temperature = float(kw.pop("temperature", 0.0) or 0.0)
    top_p = kw.pop("top_p", None)
    top_k = kw.pop("top_k", None)
    if kw:
        raise ConfigError(f"lm-eval task {tname!r}: generation_kwargs {sorted(kw)} have no equivalent in the hf "
                          "backend; "
                          "use engine 'lm_eval'")
    return {"max_new_tokens": max_new, "temperature": temperature if sampling else 0.0, "top_p": float(top_p or 1.0),
            "top_k": int(top_k) if top_k else None, "stop": until}


def _docs_dataset(task: Any, tname: str, limit: Any, seeds: tuple, data_dir: Path) -> tuple[Path, dict[str, Any]]:
    """Write the task's docs as a JSONL dataset (one sample per doc: its
    prompt, its choices or continuation, its doc) and say how to run it."""
    out_type = task.OUTPUT_TYPE
    if out_type not in ("generate_until", "multiple_choice", "loglikelihood"):
        raise ConfigError(f"lm-eval task {tname!r}: output_type {out_type!r} is not supported by engine 'pipeline' "
                          "(generate_until, multiple_choice, loglikelihood are); use engine 'lm_eval'")
    lines: list[str] = []
    gen_kwargs: dict | None = None
    repeats = 1
    for doc_id, insts in _build_requests(task, limit, seeds).items():
        args = [inst.args for inst in insts]
        ctx = args[0][0]
        if not isinstance(ctx, str) or any(a[0] != ctx for a in args) or any(len(a) != 2 for a in args):
            raise ConfigError(f"lm-eval task {tname!r}: doc {doc_id} has requests with different or non-text contexts "
                              "(multiple inputs, mutual information, multimodal); use engine 'lm_eval'")
        doc = insts[0].doc
        rec: dict[str, Any] = {"id": sample_id(doc_id), "input": ctx, "target": _target_text(task.doc_to_target(doc)),
                               "doc_id": doc_id, "doc": jsonable(doc)}
        if out_type == "multiple_choice":
            if len(insts) != len(task.doc_to_choice(doc)):
                raise ConfigError(f"lm-eval task {tname!r}: doc {doc_id} has {len(insts)} requests for "
                                  f"{len(task.doc_to_choice(doc))} choices; use engine 'lm_eval'")
            rec["choices"] = [a[1] for a in args]
        elif out_type == "loglikelihood":
            rec["continuation"] = args[0][1]
        else:
            if gen_kwargs is None:
                gen_kwargs, repeats = dict(args[0][1]), int(insts[0].repeats or 1)
            elif dict(args[0][1]) != gen_kwargs:
                raise ConfigError(
                    f"lm-eval task {tname!r}: generation_kwargs differ between docs; use engine 'lm_eval'")
        lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=True))
    if not lines:
        raise ConfigError(f"lm-eval task {tname!r}: no docs")
    text = "\n".join(lines) + "\n"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"{tname}-{digest}.jsonl"
    if not path.exists():
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    how: dict[str, Any] = {"n_docs": len(lines)}
    if out_type == "multiple_choice":
        how["prompt"] = {"request": "choices", "choice_prefix": ""}
    elif out_type == "loglikelihood":
        how["prompt"] = {"request": "loglikelihood", "continuation": "{{ continuation }}"}
    else:
        how["prompt"] = {"request": "generate"}
        how["generation"] = _generation_settings(tname, gen_kwargs or {})
        how["repeats"] = repeats
    return path, how


def _run_pipeline(loaded: Any, *, path: Path, seeds: tuple, opts: TaskOptions, limit: Any, dtype: str,
                  trust_remote_code: bool,
                  store: Any, store_path: str, bootstrap_iters: int, index: bool, batch_size: int, device: str,
                  address: str | None, shard_size: int, generation_actors: int, execution: dict, data_dir: Path,
                  progress: bool, laps: _Laps) -> list[RunResult]:
    from ..config.loader import run_spec_from_dict
    from ..pipeline.driver import evaluate_specs
    from ..pipeline.identity import run_fingerprint
    from .metric import REF

    lm_version = lm_eval_version()
    model = _model_spec(path, dtype, batch_size, device, trust_remote_code).model_dump(mode="json")
    results: dict[str, RunResult] = {}
    todo = []
    for tname, task in loaded.tasks.items():
        ident = task_identity(task)
        docs, how = _docs_dataset(task, tname, limit, seeds, data_dir)
        spec = run_spec_from_dict({
            "name": f"pipeline:{tname}/{path.name}",
            "model": model,
            "dataset": {"path": str(docs), "format": "jsonl", "id_field": "id", "input_field": "input",
                        "target_field": "target",
                        "choices_field": "choices" if task.OUTPUT_TYPE == "multiple_choice" else None},
            "prompt": how["prompt"],
            "generation": how.get("generation", {}),
            "repeats": how.get("repeats", 1),
            "metrics": [{"name": REF, "as": "lm_eval", "params": {
                "task": tname, "config_hash": ident["config_hash"], "lm_eval_version": lm_version,
                "bootstrap_iters": bootstrap_iters, **opts.as_params()}}],
            "seed": seeds[0],
            "execution": {"shard_size": shard_size, "generation_actors": generation_actors, **execution},
            "store": {"path": store_path},
            "experiment": {"tags": {"lm_eval_task": tname, "engine": "pipeline"}},
            "tracking": {"index": index},
        }, f"<lm-eval task {tname}>")
        hit = _cached(store, run_fingerprint(spec), spec.shard_size)
        if hit is not None:
            results[tname] = hit.model_copy(update={"perf": hit.perf.reused(laps.lap())})
        else:
            todo.append((tname, task, ident, spec, how))
    if todo:
        with offline(loaded.local):  # the scoring actors load the task too
            raw = evaluate_specs([s for _, _, _, s, _ in todo], address=address, progress=progress)
        for (tname, task, ident, spec, how), res in zip(todo, raw):
            result = _map_pipeline_result(res, task, ident, how, lm_version=lm_version, seeds=seeds, opts=opts,
                                          limit=limit,
                                          bootstrap_iters=bootstrap_iters)
            _record(store, result, index)
            results[tname] = result
    return [results[t] for t in loaded.tasks]


def _map_pipeline_result(res: RunResult, task: Any, ident: dict, how: dict, *, lm_version: str, seeds: tuple,
                         opts: TaskOptions, limit: Any, bootstrap_iters: int) -> RunResult:
    """Replace the pipeline's summaries by lm-eval's aggregates over the
    stored per-sample items, and record the task's lm-eval facts."""
    from ..core.rowjson import loads as row_loads
    from ..store.samples import read_samples_table

    table = read_samples_table(res, ["sample_id", "scores"]).to_pylist()
    per_doc, seen = [], set()
    for row in table:  # sample order; a doc's scores sit on its first row
        if row["sample_id"] in seen:
            continue
        seen.add(row["sample_id"])
        per_doc.append(row_loads(row["scores"]))
    metrics = summaries(task, collect_items(per_doc), higher_is_better=task.higher_is_better(), ident=ident,
                        lm_version=lm_version, bootstrap_iters=bootstrap_iters)
    meta = _lm_meta("pipeline", task, ident, lm_version=lm_version, seeds=seeds, limit=limit,
                    bootstrap_iters=bootstrap_iters,
                    opts=opts, n_samples={"effective": how["n_docs"], "original": len(task.eval_docs)})
    return res.model_copy(update={
        "metrics": metrics,
        "dataset_fingerprint": dataset_fingerprint(ident, limit, seeds),
        "metadata": {**res.metadata, "lm_eval": meta},
        "config": {**res.config, "engine": "pipeline",
                   "lm_eval": {"task": ident["name"], "num_fewshot": opts.num_fewshot, "limit": limit,
                               "include_path": opts.paths(), "seeds": list(seeds), "bootstrap_iters": bootstrap_iters}},
    })
