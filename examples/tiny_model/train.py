#!/usr/bin/env python
"""Train a small Llama-architecture model on arithmetic word problems, offline,
deterministically, in a few minutes on two CPU cores.

    python examples/tiny_model/train.py                       # the committed model
    python examples/tiny_model/train.py --out /tmp/wp --steps 20 --no-test-file   # a quick try

The task: one-step word problems whose answer is a whole number::

    Tom has 12 apples and buys 7 more. How many apples does Tom have? Answer: 19 apples.
    There are 30 cards in a box and 4 cards on a table. What is the total? Answer: 34

Some templates answer with the bare number, others with the number and a unit
("19 apples."), so exact match on the raw output is lower than exact match on
the number extracted by a regex -- on purpose: the gap between the two is what
an evaluator must show.

Held-out questions: every question is assigned to the test side or the
training side by a hash of its text alone (one in five is a test question).
The test set (``examples/data/word_problems_test.jsonl``) draws only
test-side questions and the training stream only training-side ones, so no
test question is ever seen in training. The arithmetic *facts* do recur
across phrasings (``12 + 7`` with other names, objects or templates): the
test measures reading an unseen problem -- which numbers, which operation --
and recalling the fact, not adding numbers the model never added. (A split by
fact, tried first, left this model size and budget at about 7%: a 3-layer
model does not learn to generalise 2-digit addition in 900 steps.)

Determinism: the data stream, the initialisation and the batch order come from
``--seed``; training runs on one thread with
``torch.use_deterministic_algorithms(True)``, so the saved
``model.safetensors`` is byte-identical for a given seed, machine and library
versions (``--check-determinism`` trains twice and compares the hashes).

The tokenizer is ``build.py``'s byte-level BPE (vocabulary 512, digits split
one per token) trained on word problems from the same generator.
Importable (load the file with ``importlib``, as the tests do):
``train(out, seed=..., steps=...)`` returns the per-step losses, ``test_items()``
the test set, ``problems(seed, side)`` the generator.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
DEFAULT_OUT = EXAMPLES / "models" / "word-problems"
DEFAULT_TEST_FILE = EXAMPLES / "data" / "word_problems_test.jsonl"

# -- the recipe (every number here is in the model card) ----------------------
DEFAULT_SEED = 0
DEFAULT_STEPS = 900
BATCH = 64
LR = 1e-3
WARMUP = 50
WEIGHT_DECAY = 0.01
HIDDEN = 192
LAYERS = 3
HEADS = 3            # head dim 64: vLLM's CPU backend needs >= 32
INTERMEDIATE = 512
TEST_ITEMS = 300
TEST_SEED = 20240601
TEST_FRACTION = 5    # one question in five is a test-side question

# -- the generator ---------------------------------------------------------------
NAMES = ["Tom", "Anna", "Ben", "Mia", "Sam", "Lily", "Max", "Emma", "Leo", "Zoe", "Noah", "Ava", "Jack", "Ella",
         "Omar", "Nina"]
OBJECTS = ["apples", "pencils", "books", "marbles", "cookies", "stickers", "cards", "coins", "shells", "stamps",
           "balloons", "flowers"]

#: (operation, question template, answer template); {n} name, {o} object, {x} the answer.
TEMPLATES: list[tuple[str, str, str]] = [
    ("add", "{n} has {a} {o} and buys {b} more. How many {o} does {n} have?", "{x} {o}."),
    ("add", "{n} had {a} {o}. A friend gave {n} {b} more. How many {o} does {n} have now?", "{x} {o}."),
    ("add", "There are {a} {o} in a box and {b} {o} on a table. What is the total?", "{x}"),
    ("add", "{n} found {a} {o} on Monday and {b} {o} on Tuesday. How many {o} did {n} find?", "{x}"),
    ("sub", "{n} has {a} {o} and gives away {b}. How many {o} are left?", "{x} {o}."),
    ("sub", "{n} had {a} {o} and lost {b} of them. How many {o} does {n} have now?", "{x}"),
    ("sub", "A jar holds {a} {o}. {n} takes out {b}. How many {o} are still in the jar?", "{x} {o}."),
    ("sub", "{n} wants {a} {o} and already has {b}. How many more {o} does {n} need?", "{x}"),
]
ADD_RANGE = (1, 30)   # a, b in [1, 30]
SUB_RANGE = (2, 40)   # a in [2, 40], b in [1, a - 1]


@dataclass(frozen=True)
class Problem:
    op: str
    a: int
    b: int
    question: str
    answer: int
    completion: str  # what follows "Answer:" in training, e.g. " 19 apples."

    @property
    def fact(self) -> tuple[str, int, int]:
        return (self.op, self.a, self.b)


def is_test_question(question: str) -> bool:
    """The fixed train/test partition of questions: a hash of the question text alone."""
    return hashlib.sha256(question.encode("utf-8")).digest()[0] % TEST_FRACTION == 0


def _problem(rng: random.Random) -> Problem:
    op, q, ans = TEMPLATES[rng.randrange(len(TEMPLATES))]
    if op == "add":
        a, b = rng.randint(*ADD_RANGE), rng.randint(*ADD_RANGE)
        x = a + b
    else:
        a = rng.randint(*SUB_RANGE)
        b = rng.randint(1, a - 1)
        x = a - b
    name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
    return Problem(op, a, b, q.format(n=name, a=a, b=b, o=obj), x, " " + ans.format(x=x, o=obj))


def problems(seed: int, side: str):
    """An endless stream of problems whose questions are on ``side`` ('train' or 'test')."""
    rng = random.Random(f"word-problems:{side}:{seed}")
    want_test = side == "test"
    while True:
        p = _problem(rng)
        if is_test_question(p.question) == want_test:
            yield p


def test_items(n: int = TEST_ITEMS, seed: int = TEST_SEED) -> list[dict]:
    """The held-out test set: the first ``n`` distinct test-side questions of the test stream."""
    out, seen = [], set()
    for p in problems(seed, "test"):
        if p.question in seen:
            continue
        seen.add(p.question)
        out.append({"id": f"wp-{len(out):04d}", "question": p.question, "answer": str(p.answer),
                    "operation": p.op, "reference": p.completion.strip()})
        if len(out) == n:
            return out
    raise AssertionError("unreachable")


def write_test_file(path: Path, n: int = TEST_ITEMS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for item in test_items(n):
            fh.write(json.dumps(item, sort_keys=True) + "\n")
    return path


# -- tokenizer, model, training ---------------------------------------------------------
def _build_module():
    spec = importlib.util.spec_from_file_location("_auditkit_tiny_model_build", HERE / "build.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def make_tokenizer(seed: int):
    stream = problems(seed + 1_000_003, "train")
    lines = [f"{p.question} Answer:{p.completion}" for p in (next(stream) for _ in range(3000))]
    return _build_module().build_tokenizer(lines)


def make_config(tokenizer):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=HIDDEN // HEADS,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )


def _encode(tokenizer, p: Problem) -> tuple[list[int], int]:
    """Token ids of prompt + completion + EOS, and the prompt length. The prompt
    is encoded exactly as the ``hf`` backend encodes it (``add_special_tokens``)."""
    prompt = list(tokenizer(f"{p.question} Answer:", add_special_tokens=True)["input_ids"])
    comp = list(tokenizer(p.completion, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
    return prompt + comp, len(prompt)


def _batch(torch, tokenizer, items: list[Problem]):
    enc = [_encode(tokenizer, p) for p in items]
    width = max(len(ids) for ids, _ in enc)
    pad = tokenizer.pad_token_id
    ids = torch.full((len(enc), width), pad, dtype=torch.long)
    mask = torch.zeros((len(enc), width), dtype=torch.long)
    labels = torch.full((len(enc), width), -100, dtype=torch.long)
    for r, (seq, n_prompt) in enumerate(enc):  # right padding: positions stay 0..n-1
        ids[r, : len(seq)] = torch.tensor(seq)
        mask[r, : len(seq)] = 1
        labels[r, n_prompt: len(seq)] = torch.tensor(seq[n_prompt:])  # loss on the answer only
    return ids, mask, labels


def _lr(step: int, steps: int) -> float:
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, steps - WARMUP)
    return LR * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(out: str | os.PathLike | None, seed: int = DEFAULT_SEED, steps: int = DEFAULT_STEPS,
          log_every: int = 50, log=print) -> list[float]:
    """Train and (when ``out`` is given) save model + tokenizer; return the loss of every step."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import GenerationConfig, LlamaForCausalLM

    tokenizer = make_tokenizer(seed)
    config = make_config(tokenizer)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the floats do not depend on the core count
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    losses: list[float] = []
    try:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).to(torch.float32)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.98), weight_decay=WEIGHT_DECAY,
                                foreach=False)
        stream = problems(seed, "train")
        model.train()
        t0, c0 = time.perf_counter(), time.process_time()
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = _lr(step, steps)
            ids, mask, labels = _batch(torch, tokenizer, [next(stream) for _ in range(BATCH)])
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            if log and log_every and (step + 1) % log_every == 0:
                log(f"step {step + 1}/{steps}  loss {losses[-1]:.4f}  "
                    f"{time.perf_counter() - t0:.0f}s wall, {time.process_time() - c0:.0f}s cpu")
        model.eval()
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        model.generation_config = GenerationConfig(
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id, do_sample=False,
        )
        model.save_pretrained(out, safe_serialization=True)
        tokenizer.save_pretrained(out)
        _build_module()._compat_tokenizer_config(out / "tokenizer_config.json")
    return losses


def weights_sha256(out: Path) -> str:
    return hashlib.sha256((Path(out) / "model.safetensors").read_bytes()).hexdigest()


def software() -> dict[str, str]:
    """The versions the weights depend on (byte-identity holds only within them)."""
    import platform

    import tokenizers
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "machine": platform.machine()}


def write_provenance(out: Path, seed: int, steps: int, command: str) -> None:
    (out / "provenance.json").write_text(
        json.dumps(
            {
                "base_model": "word-problems (trained from scratch)",
                "training_script": "examples/tiny_model/train.py",
                "command": command,
                "seed": seed,
                "steps": steps,
                "batch_size": BATCH,
                "architecture": {
                    "type": "LlamaForCausalLM",
                    "hidden_size": HIDDEN,
                    "num_hidden_layers": LAYERS,
                    "num_attention_heads": HEADS,
                    "head_dim": HIDDEN // HEADS,
                    "intermediate_size": INTERMEDIATE,
                    "vocab_size": 512,
                },
                "training_data": {
                    "generator": "examples/tiny_model/train.py:problems(seed, 'train')",
                    "split": f"questions with sha256(question)[0] % {TEST_FRACTION} == 0 are held out for testing",
                    "examples_seen": steps * BATCH,
                },
                "test_data": {
                    "path": "examples/data/word_problems_test.jsonl",
                    "items": TEST_ITEMS,
                    "generator": f"examples/tiny_model/train.py:test_items({TEST_ITEMS}, seed={TEST_SEED})",
                },
                "model_sha256": weights_sha256(out),
                "software": software(),
                "transform": None,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (default: examples/models/word-problems)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    ap.add_argument("--test-file", default=str(DEFAULT_TEST_FILE), help="where to write the held-out test set")
    ap.add_argument("--no-test-file", action="store_true", help="do not (re)write the test set")
    ap.add_argument("--check-determinism", action="store_true",
                    help="train a second time into a temporary folder and compare the weight hashes")
    args = ap.parse_args(argv)
    if not args.no_test_file:
        print(f"wrote {write_test_file(Path(args.test_file))}", file=sys.stderr)
    t0 = time.perf_counter()
    out = Path(args.out)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    train(out, seed=args.seed, steps=args.steps, log=log)
    wall = time.perf_counter() - t0
    command = "python examples/tiny_model/train.py" + ("" if args.seed == DEFAULT_SEED else f" --seed {args.seed}") + (
        "" if args.steps == DEFAULT_STEPS else f" --steps {args.steps}")
    write_provenance(out, args.seed, args.steps, command)
    size = (out / "model.safetensors").stat().st_size
    print(f"wrote {out} in {wall:.1f}s (model.safetensors {size / 2**20:.2f} MiB, sha256 {weights_sha256(out)[:16]})",
          file=sys.stderr)
    if args.check_determinism:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            train(Path(tmp), seed=args.seed, steps=args.steps, log=None)
            same = weights_sha256(Path(tmp)) == weights_sha256(out)
        print(f"second training run: weights {'byte-identical' if same else 'DIFFER'}", file=sys.stderr)
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
