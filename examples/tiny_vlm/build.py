#!/usr/bin/env python
"""Build a tiny vision-language model (LLaVA architecture) in HF format, offline, in seconds, and a few images.

    python examples/tiny_vlm/build.py [--out build/tiny-vlm] [--seed 0]

Nothing is downloaded. The tokenizer is the word-problems model's (``examples/models/word-problems``) with
an ``<image>`` token added; the image processor is a ``CLIPImageProcessor`` for 16 x 16 images; the model is
a ``LlavaForConditionalGeneration`` over a 1-layer CLIP vision tower (patches of 4 pixels: 16 image tokens)
and a 2-layer Llama, with random weights from ``--seed``. Its answers are noise: it exists to exercise the
``hf`` backend's image path (``vision: true``), not to see. ``OUT/images/`` gets a few 16 x 16 PNGs of one
colour each, and ``OUT/images.jsonl`` a dataset of questions about them (paths relative to it).

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
SIZE, PATCH = 16, 4
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
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER_FROM))
    tokenizer.add_tokens([AddedToken(IMAGE_TOKEN, special=True, normalized=False)], special_tokens=True)
    tokenizer.padding_side = "left"
    # the PIL one where transformers has it: the default needs torchvision, which the hf extra leaves out
    processor_cls = getattr(transformers, "CLIPImageProcessorPil", None) or transformers.CLIPImageProcessor
    image_processor = processor_cls(size={"shortest_edge": SIZE}, crop_size={"height": SIZE, "width": SIZE})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=PATCH,
                               vision_feature_select_strategy="full", chat_template=CHAT_TEMPLATE,
                               image_token=IMAGE_TOKEN, num_additional_image_tokens=1)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              image_size=SIZE, patch_size=PATCH, projection_dim=32)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    config = LlavaConfig(vision_config=vision, text_config=text,
                         image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
                         vision_feature_select_strategy="full", vision_feature_layer=-1,
                         projector_hidden_act="gelu")
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
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
