#!/usr/bin/env python
"""Build the benchmark model: a Llama-architecture causal LM large enough that
generation (not framework overhead) dominates, with random weights.

    python benchmarks/build_bench_model.py [--out benchmarks/.cache/bench-model]
        [--hidden 512] [--layers 8] [--head-dim 64] [--seed 0]

``examples/tiny_model/build.py`` hard-codes its size (hidden 128, 2 layers),
so this script reuses its tokenizer (byte-level BPE, vocabulary 512, trained
offline on its built-in corpus) and its tokenizer-config fix-up, and
initialises a bigger ``LlamaConfig``: hidden 512, 8 layers, 8 heads of dim 64,
intermediate 1376 (about 27 M parameters). Nothing is downloaded and nothing
is trained: outputs are noise, which is fine for timing (every system gets
the same prompts, greedy, the same number of new tokens).

Importable: ``build(out, hidden=512, layers=8, head_dim=64, seed=0)``; it
returns early when ``out`` already holds a model built with the same
settings (recorded in ``bench_model.json``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / ".cache" / "bench-model"


def _tiny_build_module():
    path = ROOT / "examples" / "tiny_model" / "build.py"
    spec = importlib.util.spec_from_file_location("_ak_tiny_build", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def build(out_dir: str | os.PathLike = DEFAULT_OUT, *, hidden: int = 512, layers: int = 8, head_dim: int = 64,
          intermediate: int | None = None, seed: int = 0) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = Path(out_dir)
    if hidden % head_dim:
        raise SystemExit(f"hidden {hidden} is not a multiple of head dim {head_dim}")
    settings = {"hidden": hidden, "layers": layers, "head_dim": head_dim,
                "intermediate": intermediate or int(round(hidden * 8 / 3 / 32)) * 32, "seed": seed}
    stamp = out / "bench_model.json"
    if stamp.exists() and (out / "model.safetensors").exists():
        try:
            if json.loads(stamp.read_text())["settings"] == settings:
                return out
        except (ValueError, KeyError):
            pass
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tiny = _tiny_build_module()
    tokenizer = tiny.build_tokenizer(tiny.corpus_lines(seed))
    heads = hidden // head_dim
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=settings["intermediate"],
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=head_dim,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, do_sample=False,
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    tiny._compat_tokenizer_config(out / "tokenizer_config.json")
    n_params = sum(p.numel() for p in model.parameters())
    stamp.write_text(json.dumps({"settings": settings, "parameters": n_params}, indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--intermediate", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = build(args.out, hidden=args.hidden, layers=args.layers, head_dim=args.head_dim,
                intermediate=args.intermediate, seed=args.seed)
    info = json.loads((out / "bench_model.json").read_text())
    print(
        f"bench model at {out} ({info['parameters']:,} parameters) in {time.perf_counter() - t0:.1f}s", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
