#!/usr/bin/env python
"""Build a tiny Llama-architecture causal LM in HF format, offline, in seconds.

    python examples/tiny_model/build.py [--out examples/tiny-model] [--seed 0] [--train-steps N]

Nothing is downloaded: a byte-level BPE tokenizer (vocabulary 512) is trained
with ``tokenizers`` on a built-in corpus of arithmetic sentences, a
``LlamaConfig`` model (hidden 128, 2 layers, 2 heads of dim 64 -- vLLM's CPU
backend needs a head dim of at least 32) is initialised from ``--seed`` and
trained for a few steps on the same corpus so that greedy outputs look like
answers (``What is 12 plus 7? Answer: 19``) rather than noise. The answers are
often wrong; the model exists to exercise backends, not to be good.

The output is byte-for-byte deterministic for a given seed on a given machine
and library versions (training runs single-threaded so the thread count does
not change the floats). Importable too: load this file with ``importlib`` and
call ``build(out_dir, seed=0)``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tiny-model"
VOCAB_SIZE = 512
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]  # ids 0..3
DEFAULT_TRAIN_STEPS = 120
SEQ_LEN = 48
BATCH = 32

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ 'System: ' + message['content'] + '\n' }}"
    "{% elif message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token + '\n' }}"
    "{% else %}{{ message['role'] + ': ' + (message['content'] or '') + '\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

_OPS = {"plus": lambda a, b: a + b, "minus": lambda a, b: a - b, "times": lambda a, b: a * b}

_TEXT = (
    "The quick brown fox jumps over the lazy dog. "
    "Pack my box with five dozen liquor jugs. "
    "Answer the question with a number. Think step by step, then give the final answer. "
    "The answer is correct. The answer is wrong. Yes. No. True. False. "
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz 0123456789 "
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n"
)


def corpus_lines(seed: int, n: int = 3000) -> list[str]:
    """Arithmetic questions, plain and in the chat format, plus some text."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        op = rng.choice(sorted(_OPS))
        a, b = rng.randint(0, 20), rng.randint(0, 20)
        if op == "minus" and b > a:
            a, b = b, a
        q = f"What is {a} {op} {b}?"
        ans = _OPS[op](a, b)
        if i % 3 == 2:
            lines.append(f"User: {q}\nAssistant: {ans}")
        else:
            lines.append(f"{q} Answer: {ans}")
    lines.extend(s.strip() + "." for s in _TEXT.split(". ") if s.strip())
    return lines


def build_tokenizer(lines: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte: any text tokenizes
        show_progress=False,
    )
    tok.train_from_iterator(lines + [_TEXT] * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _train(model, tokenizer, lines: list[str], steps: int, seed: int) -> None:
    import torch

    if steps <= 0:
        return
    eos = tokenizer.eos_token_id
    stream: list[int] = []
    for line in lines:
        stream.extend(tokenizer(line, add_special_tokens=False)["input_ids"])
        stream.append(eos)
    data = torch.tensor(stream, dtype=torch.long)
    n_windows = (len(data) - 1) // SEQ_LEN
    data = data[: n_windows * SEQ_LEN].view(n_windows, SEQ_LEN)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0, foreach=False)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, n_windows, (BATCH,), generator=gen)
        batch = data[idx]
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()


def build(out_dir: str | os.PathLike = DEFAULT_OUT, seed: int = 0, train_steps: int = DEFAULT_TRAIN_STEPS) -> Path:
    """Write the checkpoint and tokenizer to ``out_dir``; return its path."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = corpus_lines(seed)
    tokenizer = build_tokenizer(lines)

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",  # transformers 5 name of torch_dtype
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the floats do not depend on the core count
    try:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).to(torch.float32)
        _train(model, tokenizer, lines, train_steps, seed)
    finally:
        torch.set_num_threads(threads)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    _compat_tokenizer_config(out / "tokenizer_config.json")
    return out


def _compat_tokenizer_config(path: Path) -> None:
    """Let transformers 4.x read the tokenizer too (vLLM may pin it):
    transformers 5 writes ``tokenizer_class: TokenizersBackend``, a class 4.x
    lacks, and keeps the chat template only in ``chat_template.jinja``, which
    4.x before 4.50 does not read."""
    import json

    cfg = json.loads(path.read_text(encoding="utf-8"))
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg["model_input_names"] = ["input_ids", "attention_mask"]  # 4.x adds token_type_ids otherwise
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg.pop("backend", None)
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (default: examples/tiny-model)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-steps", type=int, default=DEFAULT_TRAIN_STEPS,
                    help="optimizer steps on the built-in corpus (0: random weights)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = build(args.out, seed=args.seed, train_steps=args.train_steps)
    print(f"wrote {out} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
