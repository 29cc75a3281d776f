"""A dataset of images and questions end to end through the real Ray pipeline (issue 34), against the
OpenAI-compatible test server: the server names each image's colour from the bytes it receives, so every
answer is right only if every image arrived whole with its own question; the per-sample table keeps
each sample's image reference."""

from __future__ import annotations

import base64
import json

import pytest

pytest.importorskip("aiohttp", reason="the api backend needs the 'api' extra (aiohttp)")

from image_data import COLOURS, image_dataset, png  # noqa: E402  (tests/support)

from auditkit_ray.api import evaluate, samples_table  # noqa: E402
from auditkit_ray.testing import OpenAIServer, ScriptedPolicy  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_cluster")

BY_BYTES = {png(rgb): name for name, rgb in COLOURS.items()}


def colour_of(body: dict) -> str:
    parts = body["messages"][-1]["content"]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    if len(urls) != 1 or not urls[0].startswith("data:image/png;base64,"):
        return "?"
    return BY_BYTES.get(base64.b64decode(urls[0].partition(",")[2]), "?")


def test_images_and_questions_run_end_to_end_and_the_table_keeps_the_image_references(make_spec, tmp_path):
    data = image_dataset(tmp_path / "data")
    with OpenAIServer(ScriptedPolicy(colour_of)) as server:
        spec = make_spec(
            data=data,
            model={"type": "api", "base_url": server.base_url, "model": "vision", "cache": False},
            dataset={"path": str(data), "input_field": "question", "target_field": "answer", "images_field": "image"},
            prompt={"template": "{{ question }}"},
            metrics=["exact_match"],
            execution={"shard_size": 2},
        )
        res = evaluate(spec)
        assert server.requests == 4
    assert res.metrics["exact_match"].mean == 1.0
    rows = {r["sample_id"]: r for r in samples_table(res).to_pylist()}
    for sid, rec in ((json.loads(x)["id"], json.loads(x)) for x in data.read_text().splitlines()):
        parts = json.loads(rows[sid]["prompt"])[0]["content"]
        assert parts[0]["image_url"]["url"] == (data.parent / rec["image"]).resolve().as_uri()
        assert rows[sid]["text"] == rec["answer"]


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    """The tiny LLaVA model and its images, built by the repo's script (random weights, no download)."""
    pytest.importorskip("transformers", reason="the tiny vision model needs the 'hf' extra")
    pytest.importorskip("PIL", reason="the image processor needs Pillow (the 'hf' extra)")
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "tiny_vlm" / "build.py"
    loaded = importlib.util.spec_from_file_location("tiny_vlm_build", script)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module.build(tmp_path_factory.mktemp("tiny-vlm"), seed=0)


def plain_generate(model_dir, rows: list[dict], max_new_tokens: int) -> list[str]:
    """The same processor and inputs through transformers alone: one left-padded batch, greedy."""
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(str(model_dir))
    processor.tokenizer.padding_side = "left"
    model = AutoModelForImageTextToText.from_pretrained(str(model_dir)).eval()
    texts = [processor.apply_chat_template([{"role": "user", "content": [{"type": "image"},
                                                                          {"type": "text", "text": r["question"]}]}],
                                           add_generation_prompt=True, tokenize=False) for r in rows]
    images = [Image.open(model_dir / r["image"]).convert("RGB") for r in rows]
    batch = processor(text=texts, images=images, return_tensors="pt", padding=True)
    with torch.no_grad():
        seqs = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                              pad_token_id=processor.tokenizer.pad_token_id)
    eos = processor.tokenizer.eos_token_id
    out = []
    for ids in seqs[:, batch["input_ids"].shape[1]:].tolist():
        ids = ids[: ids.index(eos)] if eos in ids else ids
        out.append(processor.tokenizer.decode(ids, skip_special_tokens=True))
    return out


def test_the_tiny_vision_model_through_hf_equals_plain_transformers_generate_sample_by_sample(make_spec, tiny_vlm):
    data = tiny_vlm / "images.jsonl"
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    spec = make_spec(
        data=data,
        model={"type": "hf", "path": str(tiny_vlm), "vision": True, "batch_size": len(rows), "device": "cpu",
               "num_gpus": 0},
        dataset={"path": str(data), "input_field": "question", "target_field": "answer", "images_field": "image"},
        prompt={"template": "{{ question }}"},
        generation={"max_new_tokens": 6},
        metrics=["exact_match"],
        execution={"shard_size": len(rows)},
    )
    res = evaluate(spec)
    got = {r["sample_id"]: r["text"] for r in samples_table(res).to_pylist()}
    want = dict(zip((r["id"] for r in rows), plain_generate(tiny_vlm, rows, 6)))
    assert got == want
    assert len(set(want.values())) == len(rows), "one question, four images: each image must change the answer"
