#!/usr/bin/env python
"""The GPU workload (issue 32): the ``hf`` backend on one GPU against a plain transformers ``generate`` loop.

    python benchmarks/bench_gpu.py [--smoke | --quick | --full] [--cpu] [--json FILE | --out FILE]
        [--bandwidth-gbs 4800] [--dtype bfloat16] [--prompts N] [--batch B] [--new-tokens T]

The model is a Llama-architecture causal LM of about 1.1 B parameters with random weights, built here from a
``LlamaConfig`` (hidden 2048, 16 layers, 32 heads of dim 64 with 8 key/value heads, intermediate 8192,
vocabulary 32000; nothing is downloaded) with the tokenizer of ``examples/tiny_model/build.py``, and written to a
temporary folder. Its output-layer rows of the end-of-sequence and padding tokens are zeroed: their logit is
0 and greedy decoding, whose largest of 32000 random logits is positive, never picks them, so every prompt
generates exactly ``--new-tokens`` tokens (the work is known; both systems are checked for it).

The prompts (``What is A plus B? Answer:``, A and B of two digits) all tokenize to the same length, so the
backend's length sort keeps the dataset's order and its sub-batches of ``--batch`` are the plain loop's
batches: the same batches on the same GPU, greedy, in ``--dtype``.

- ``plain``: ``AutoModelForCausalLM.from_pretrained`` and ``model.generate`` per batch, in this process,
  after one untimed warm-up batch; then the model is freed.
- ``auditkit``: ``auditkit_ray.evaluate`` with the ``hf`` backend, one generation actor holding the GPU, one
  shard per 4 batches. Its generation seconds are the actor's (the first batch's warm-up included); the
  end-to-end figure adds the actor's start, the model load and the scoring.

Figures: prompts/s and generated tokens/s of each, their ratios to the plain loop, and the decode rate against
the memory-bandwidth bound. One decode step of a batch reads every weight once (the embedding table aside:
one row per sequence) plus the key/value cache; ``bytes per step x decode steps/s`` against the GPU's bandwidth
(``--bandwidth-gbs``, else from the device name: H200 4800, H100 3350, A100 2039 GB/s ...) is the fraction of
the bound reached. Decode steps/s are ``batches x (T - 1) / (generation seconds - batches x prefill seconds)``,
the prefill of one batch timed on its own (``max_new_tokens=1``) in the plain loop.

Without a CUDA device the benchmark prints ``gpu: skipped (...)``; ``--cpu`` runs it on the CPU instead, by
default with the ``--smoke`` sizes (a model of hidden 64, 2 layers, 16 prompts, 8 new tokens: seconds, a check
that the code runs, not a performance figure).
"""

from __future__ import annotations

import gc
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    Recorder,
    call_quietly,
    note,
    parser,
    print_machine,
    rmtree,
    start_ray,
    stop_ray,
    with_tmpdir,
    write_jsonl,
)

#: model shapes per mode
MODELS = {
    "full": {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
             "head_dim": 64, "intermediate_size": 8192, "vocab_size": 32000},
    "smoke": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
              "head_dim": 32, "intermediate_size": 128, "vocab_size": 512},
}
MODELS["quick"] = MODELS["full"]
#: (prompts, batch, new tokens) per mode
SIZES = {"full": (256, 32, 128), "quick": (64, 32, 64), "smoke": (16, 4, 8)}
BATCHES_PER_SHARD = 4

#: peak memory bandwidth in GB/s by a fragment of ``torch.cuda.get_device_name()`` (first match wins)
BANDWIDTH_GBS = [("H200", 4800.0), ("H100 PCIe", 2000.0), ("H100 NVL", 3900.0), ("H100", 3350.0),
                 ("GH200", 4000.0), ("B200", 8000.0), ("A100-SXM4-80GB", 2039.0), ("A100 80GB PCIe", 1935.0),
                 ("A100", 1555.0), ("L40S", 864.0), ("L40", 864.0), ("A10G", 600.0), ("A10", 600.0), ("L4", 300.0),
                 ("T4", 320.0), ("V100", 900.0)]


def bandwidth_for(device_name: str) -> float | None:
    for fragment, gbs in BANDWIDTH_GBS:
        if fragment in device_name:
            return gbs
    return None


# ----------------------------------------------------------------------------- the model
def _tiny_build():
    path = Path(__file__).resolve().parents[1] / "examples" / "tiny_model" / "build.py"
    spec = importlib.util.spec_from_file_location("_ak_tiny_build", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def build_model(out: Path, shape: dict[str, int], device: str, dtype: str, seed: int = 0) -> dict[str, Any]:
    """A random-weight Llama checkpoint in ``dtype`` with the tiny model's tokenizer; returns its facts."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tiny = _tiny_build()
    tok = tiny.build_tokenizer(tiny.corpus_lines(seed))
    shape = {**shape, "vocab_size": max(shape["vocab_size"], len(tok))}
    config = LlamaConfig(**shape, max_position_embeddings=1024, tie_word_embeddings=False,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         dtype=dtype)
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: seconds on a GPU for 1 B parameters
        model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    with torch.no_grad():
        for t in (tok.eos_token_id, tok.pad_token_id):
            model.lm_head.weight[t].zero_()
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id, do_sample=False)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    tiny._compat_tokenizer_config(out / "tokenizer_config.json")
    params = sum(p.numel() for p in model.parameters())
    embed = model.model.embed_tokens.weight.numel()
    del model
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"parameters": params, "embedding_parameters": embed, **shape}


def records(n: int) -> list[dict[str, Any]]:
    """Questions whose prompts all tokenize to one length (two-digit numbers; digits are single tokens)."""
    out = []
    for i in range(n):
        a, b = 10 + (i * 37) % 90, 10 + (i * 53 + 7) % 90
        out.append({"id": f"p{i:05d}", "question": f"What is {a} plus {b}?", "answer": str(a + b)})
    return out


def prompt_of(rec: dict[str, Any]) -> str:
    return f"{rec['question']} Answer:"  # the run's template: "{{ question }} Answer:"


# ----------------------------------------------------------------------------- the two systems
def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def plain_loop(model_dir: Path, recs: list[dict[str, Any]], batch: int, new_tokens: int, dtype: str,
               device: str) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if device == "cpu":
        torch.set_num_threads(1)  # as the generation actor runs torch (one CPU per actor)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype)).to(device).eval()
    eos = model.generation_config.eos_token_id
    chunks = [recs[i : i + batch] for i in range(0, len(recs), batch)]

    def run(model: Any, chunk: list[dict[str, Any]], t: int) -> Any:
        enc = tok([prompt_of(r) for r in chunk], return_tensors="pt", padding=True).to(device)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=t, do_sample=False, pad_token_id=tok.pad_token_id,
                                 eos_token_id=eos)
        return enc["input_ids"].shape[1], out[:, enc["input_ids"].shape[1]:]

    run(model, chunks[0], new_tokens)  # warm-up: CUDA context, kernels, allocator
    prefill = []
    for _ in range(3):
        _sync(torch, device)
        t0 = time.perf_counter()
        run(model, chunks[0], 1)
        _sync(torch, device)
        prefill.append(time.perf_counter() - t0)
    texts, lengths, widths = [], [], set()
    _sync(torch, device)
    t0 = time.perf_counter()
    for chunk in chunks:
        width, gen = run(model, chunk, new_tokens)
        widths.add(width)
        gen = gen.cpu()
        lengths.extend(int(n) for n in (gen != tok.pad_token_id).sum(dim=1))
        texts.extend(tok.batch_decode(gen, skip_special_tokens=True))
    _sync(torch, device)
    seconds = time.perf_counter() - t0
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    embed_bytes = model.model.embed_tokens.weight.numel() * model.model.embed_tokens.weight.element_size()
    elem = next(model.parameters()).element_size()
    del model
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"seconds": seconds, "prefill_s": statistics.median(prefill), "texts": texts, "lengths": lengths,
            "prompt_widths": sorted(widths), "batches": len(chunks), "weight_bytes": weight_bytes,
            "embed_bytes": embed_bytes, "element_size": elem}


def auditkit_run(model_dir: Path, data: Path, store: Path, n: int, batch: int, new_tokens: int, dtype: str,
                 device: str) -> dict[str, Any]:
    from auditkit_ray.api import evaluate, samples_table

    spec = {
        "name": "bench-gpu",
        "model": {"type": "hf", "path": str(model_dir), "dtype": dtype, "device": device, "batch_size": batch,
                  "num_gpus": 1.0 if device == "cuda" else 0.0},
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer", "limit": n},
        "prompt": {"template": "{{ question }} Answer:"},
        "generation": {"max_new_tokens": new_tokens, "temperature": 0},
        "metrics": ["exact_match"],
        "execution": {"shard_size": batch * BATCHES_PER_SHARD, "generation_actors": 1},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }
    t0 = time.perf_counter()
    res = call_quietly(lambda: evaluate(spec, progress=False))
    wall = time.perf_counter() - t0
    t = samples_table(res).sort_by("sample_id")
    errors = [e for e in t.column("error").to_pylist() if e]
    if errors:
        raise SystemExit(f"bench_gpu: the auditkit run had {len(errors)} failed samples, the first: {errors[0]}")
    # every sample of a batch carries that batch's generate() time (latency_scope "batch")
    batch_s = sorted(set(x for x in t.column("latency_s").to_pylist() if x is not None))
    return {"seconds": res.perf.generation_s, "wall_s": wall, "batch_s": batch_s, "texts": t.column("text").to_pylist(),
            "lengths": t.column("completion_tokens").to_pylist(),
            "prompt_tokens": sorted(set(t.column("prompt_tokens").to_pylist())),
            "model_size_bytes": res.perf.model_size_bytes}


# ----------------------------------------------------------------------------- main
def _mode(argv: list[str]) -> str | None:
    for m in ("smoke", "quick", "full"):
        if f"--{m}" in argv:
            return m
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--out", dest="json", metavar="FILE", help="the same as --json")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (default sizes: --smoke)")
    ap.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], help="default bfloat16 (float32 on CPU)")
    ap.add_argument("--bandwidth-gbs", type=float, help="the GPU's memory bandwidth (default: from its name)")
    ap.add_argument("--prompts", type=int, help="prompts (default by mode: 256, 64, 16)")
    ap.add_argument("--batch", type=int, help="prompts per batch (default 32; smoke 4)")
    ap.add_argument("--new-tokens", type=int, help="tokens generated per prompt (default 128, 64, 8)")
    a = ap.parse_args(argv)
    if a.cpu and _mode(argv) is None:
        a.mode = "smoke"
    print_machine()
    rec = Recorder("gpu", a.mode)

    missing = [m for m in ("torch", "transformers", "tokenizers", "ray") if importlib.util.find_spec(m) is None]
    if missing:
        rec.emit("gpu", "skipped", f"(not installed: {', '.join(missing)})")
        rec.save(a.json)
        return 0
    import torch

    if a.cpu:
        device, device_name = "cpu", "cpu"
    elif torch.cuda.is_available():
        device, device_name = "cuda", torch.cuda.get_device_name(0)
    elif a.mode == "smoke":  # the smoke run checks the code wherever it is
        device, device_name = "cpu", "cpu"
    else:
        rec.emit("gpu", "skipped", "(no CUDA device: torch.cuda.is_available() is False; --cpu runs it on the CPU)")
        rec.save(a.json)
        return 0
    dtype = a.dtype or ("bfloat16" if device == "cuda" else "float32")
    n0, b0, t0 = SIZES[a.mode]
    n, batch, new_tokens = a.prompts or n0, a.batch or b0, a.new_tokens or t0
    n -= n % batch  # whole batches only: every batch the same shape in both systems
    if n <= 0 or new_tokens < 2:
        ap.error("--prompts must hold at least one --batch and --new-tokens must be >= 2")
    bandwidth = a.bandwidth_gbs or (bandwidth_for(device_name) if device == "cuda" else None)

    work = with_tmpdir("bench-gpu-")
    try:
        t_build = time.perf_counter()
        facts = build_model(work / "model", MODELS[a.mode], device, dtype)
        build_s = time.perf_counter() - t_build
        note(f"model: {facts['parameters']:,} parameters, built and written in {build_s:.1f}s; {n} prompts, batch "
             f"{batch}, {new_tokens} new tokens, {dtype} on {device_name}")
        recs = records(n)
        data = write_jsonl(work / "prompts.jsonl", recs)
        rec.setting(device=device, device_name=device_name, dtype=dtype, prompts=n, batch=batch,
                    new_tokens=new_tokens, batches_per_shard=BATCHES_PER_SHARD, model=facts,
                    bandwidth_gbs=bandwidth, bandwidth_source="--bandwidth-gbs" if a.bandwidth_gbs else
                    ("device name" if bandwidth else None), torch=torch.__version__)

        plain = plain_loop(work / "model", recs, batch, new_tokens, dtype, device)
        note(f"plain: {plain['seconds']:.2f}s for {plain['batches']} batches "
             f"(prefill {plain['prefill_s'] * 1e3:.1f} ms)")
        start_ray(num_gpus=None if device == "cuda" else 0)
        try:
            ours = auditkit_run(work / "model", data, work / "store", n, batch, new_tokens, dtype, device)
        finally:
            stop_ray()
        note(f"auditkit: generation {ours['seconds']:.2f}s, evaluate {ours['wall_s']:.2f}s")
    finally:
        rmtree(work)

    batches, tokens = plain["batches"], n * new_tokens
    rec.emit("gpu.model.parameters", facts["parameters"])
    rec.emit("gpu.model.build_s", build_s, "s")
    fixed = set(plain["lengths"]) == {new_tokens} and set(ours["lengths"]) == {new_tokens}
    rec.emit("gpu.fixed_length_held", fixed, f"(every prompt {new_tokens} new tokens in both systems)")
    same_batches = len(plain["prompt_widths"]) == 1 and ours["prompt_tokens"] == plain["prompt_widths"]
    rec.emit("gpu.same_batches", same_batches, f"(one prompt length: {plain['prompt_widths']})")
    match = sum(x == y for x, y in zip(plain["texts"], ours["texts"]))
    rec.emit("gpu.outputs_match_plain", f"{match}/{n}", "samples")

    for name, r in (("plain", plain), ("auditkit", ours)):
        rec.emit(f"gpu.{name}.generate_s", r["seconds"], "s")
        rec.emit(f"gpu.{name}.prompts_per_s", n / r["seconds"], "prompts/s")
        rec.emit(f"gpu.{name}.tokens_per_s", tokens / r["seconds"], "tokens/s")
    rec.emit("gpu.auditkit.end_to_end_s", ours["wall_s"], "s (actor start, model load, generation, scoring)")
    # where the generation time goes: each batch's generate() in the actor against the warmed loop's mean batch
    # (the actor's first batch also warms CUDA up; the loop warms up before its clock starts)
    plain_batch = plain["seconds"] / batches
    rec.emit("gpu.plain.batch_s.mean", plain_batch, "s (after a warm-up batch)")
    if ours["batch_s"]:
        med = statistics.median(ours["batch_s"])
        rec.emit("gpu.auditkit.batch_s.median", med, f"s (of {len(ours['batch_s'])} batches)")
        rec.emit("gpu.auditkit.batch_s.max", ours["batch_s"][-1], "s")
        rec.emit("gpu.auditkit.batch_s.sum", sum(ours["batch_s"]), "s (generate_s less this: the time between batches)")
        rec.emit("gpu.ratio.median_batch_auditkit_vs_plain", plain_batch / med, "x")
    rec.emit("gpu.ratio.auditkit_vs_plain", plain["seconds"] / ours["seconds"], "x (prompts/s and tokens/s)")
    rec.emit("gpu.ratio.end_to_end_vs_plain", plain["seconds"] / ours["wall_s"], "x")

    # the bandwidth bound of a decode step: every weight once (the embedding table: one row per sequence) and
    # the key/value cache of every position so far (mean over the decode steps)
    elem = plain["element_size"]
    weights = plain["weight_bytes"] - plain["embed_bytes"] + batch * facts["hidden_size"] * elem
    prompt_len = plain["prompt_widths"][0]
    kv_per_position = 2 * facts["num_hidden_layers"] * facts["num_key_value_heads"] * facts["head_dim"] * elem
    kv_mean = batch * kv_per_position * (prompt_len + new_tokens / 2)
    per_step = weights + kv_mean
    rec.emit("gpu.bytes_per_decode_step.weights", weights / 1e6, "MB")
    rec.emit("gpu.bytes_per_decode_step.kv_cache_mean", kv_mean / 1e6, "MB")
    rec.emit("gpu.prefill_per_batch", plain["prefill_s"] * 1e3, "ms")
    if bandwidth:
        rec.emit("gpu.bandwidth", bandwidth, "GB/s")
        rec.emit("gpu.bound.decode_steps_per_s", bandwidth * 1e9 / per_step, "steps/s")
    else:
        rec.emit("gpu.bandwidth", "n/a", "(unknown device: pass --bandwidth-gbs)")
    for name, r in (("plain", plain), ("auditkit", ours)):
        decode_s = r["seconds"] - batches * plain["prefill_s"]
        if decode_s <= 0:
            rec.emit(f"gpu.{name}.decode_steps_per_s", "n/a", "(generation shorter than its prefills)")
            continue
        steps = batches * (new_tokens - 1) / decode_s
        rec.emit(f"gpu.{name}.decode_steps_per_s", steps, "steps/s")
        rec.emit(f"gpu.{name}.decode_read_rate", steps * per_step / 1e9, "GB/s")
        if bandwidth:
            rec.emit(f"gpu.{name}.fraction_of_bandwidth_bound", steps * per_step / (bandwidth * 1e9), "")
    rec.save(a.json)
    if not fixed:
        note("bench_gpu: not every prompt generated the fixed length; the token figures assume it")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
