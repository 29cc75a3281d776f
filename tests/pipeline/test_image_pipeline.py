"""A dataset of images and questions end to end through the real Ray pipeline (issue 34), against the
OpenAI-compatible test server: the server names each image's colour from the bytes it receives, so every
answer is right only if every image arrived whole with its own question; the per-sample table keeps
each sample's image reference."""

from __future__ import annotations

import base64
import json

import pytest

pytest.importorskip("aiohttp", reason="the api backend needs the 'api' extra (aiohttp)")

from image_data import COLOURS, build_tiny_vlm, image_dataset, png  # noqa: E402  (tests/support)

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
    """The tiny vision-language model and its images, built by the repo's script (random weights, no
    download)."""
    pytest.importorskip("transformers", reason="the tiny vision model needs the 'hf' extra")
    pytest.importorskip("PIL", reason="the image processor needs Pillow (the 'hf' extra)")
    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))


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


# --------------------------------------------------------------------------- s3:// images (the real moto server)
def _s3_images_dataset(folder, url: str, bucket: str):
    """Four images as objects of ``bucket`` and a local dataset naming them by s3:// URI."""
    import boto3

    c = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (name, rgb) in enumerate(COLOURS.items()):
        c.put_object(Bucket=bucket, Key=f"img/{name}.png", Body=png(rgb))
        rows.append({"id": f"i{i}", "question": "Which colour is this image?", "answer": name,
                     "image": f"s3://{bucket}/img/{name}.png"})
    path = folder / "images.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows, c


def test_s3_images_reach_the_api_server_byte_for_byte_and_the_table_keeps_their_uris(make_spec, tmp_path,
                                                                                     s3_server, s3_bucket):
    data, rows, _ = _s3_images_dataset(tmp_path / "data", s3_server["url"], s3_bucket)
    with OpenAIServer(ScriptedPolicy(colour_of)) as server:
        spec = make_spec(
            data=data,
            model={"type": "api", "base_url": server.base_url, "model": "vision", "cache": False},
            dataset={"path": str(data), "input_field": "question", "target_field": "answer", "images_field": "image",
                     "endpoint_url": s3_server["url"]},
            prompt={"template": "{{ question }}"},
            metrics=["exact_match"],
            execution={"shard_size": 2},
        )
        res = evaluate(spec)
        assert server.requests == 4
        assert all(s3_bucket not in json.dumps(b) for b in server.bodies), "the server gets bytes, never the URI"
    assert res.metrics["exact_match"].mean == 1.0, "every answer is right only if every image arrived whole"
    table = {r["sample_id"]: r for r in samples_table(res).to_pylist()}
    for rec in rows:
        parts = json.loads(table[rec["id"]]["prompt"])[0]["content"]
        assert parts[0]["image_url"]["url"] == rec["image"]


def test_a_changed_s3_image_changes_the_generation_fingerprint(make_spec, tmp_path, s3_server, s3_bucket):
    from auditkit_ray.pipeline.identity import dataset_identity, generation_fingerprint

    data, _, c = _s3_images_dataset(tmp_path / "data", s3_server["url"], s3_bucket)
    spec = make_spec(data=data, model={"type": "api", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
                     dataset={"path": str(data), "input_field": "question", "target_field": "answer",
                              "images_field": "image", "endpoint_url": s3_server["url"]})
    before = generation_fingerprint(spec)
    assert dataset_identity(spec)["images"]["s3_images"] == 4
    c.put_object(Bucket=s3_bucket, Key="img/green.png", Body=png((0, 161, 0)))  # same key, other bytes
    assert generation_fingerprint(spec) != before


@pytest.mark.parametrize("case, expect", [("missing", "no such object"), ("denied", "access denied")])
def test_a_missing_or_unreadable_s3_image_exits_2_naming_the_sample_and_the_uri_before_generation(
        case, expect, tmp_path, s3_server, s3_bucket, capsys):
    import boto3
    import yaml

    from auditkit_ray.cli import main

    c = boto3.client("s3", endpoint_url=s3_server["url"], region_name="us-east-1")
    bucket = s3_bucket
    if case == "denied":  # moto takes any credentials, and keeps bucket policies
        c.put_object(Bucket=bucket, Key="img/red.png", Body=png((255, 0, 0)))
        arn = f"arn:aws:s3:::{bucket}"
        c.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": [arn, f"{arn}/*"]}]}))
    uri = f"s3://{bucket}/img/red.png"
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "s9", "question": "q", "answer": "red", "image": uri}) + "\n")
    with OpenAIServer(ScriptedPolicy("red")) as server:
        cfg = tmp_path / "run.yaml"
        cfg.write_text(yaml.safe_dump({
            "name": "s3img", "model": {"type": "api", "base_url": server.base_url, "model": "m"},
            "dataset": {"path": str(data), "input_field": "question", "target_field": "answer",
                        "images_field": "image", "endpoint_url": s3_server["url"]},
            "store": {"path": str(tmp_path / "store")}, "tracking": {"index": False}}))
        assert main(["run", str(cfg), "--quiet"]) == 2
        assert server.requests == 0, "nothing was generated"
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert expect in lines[0] and "'s9'" in lines[0] and uri in lines[0], lines[0]


# --------------------------------------------------------------------------- images with retrieval
def test_images_with_retrieval_reach_the_server_first_then_the_retrieved_context_and_the_question(make_spec,
                                                                                                  tmp_path):
    data = image_dataset(tmp_path / "data", n=2)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in [
        {"id": "d1", "text": "Colour names: red, green, blue and white describe the image."},
        {"id": "d2", "text": "Trains run on rails between stations."}]))
    with OpenAIServer(ScriptedPolicy(colour_of)) as server:
        spec = make_spec(
            data=data,
            model={"type": "api", "base_url": server.base_url, "model": "vision", "cache": False},
            dataset={"path": str(data), "input_field": "question", "target_field": "answer", "images_field": "image"},
            retrieval={"retriever": "bm25", "corpus": str(corpus), "k": 1},
            prompt={"system": "Answer in one word."},
            metrics=["exact_match"],
            execution={"shard_size": 2},
        )
        res = evaluate(spec)
        bodies = list(server.bodies)
    assert res.metrics["exact_match"].mean == 1.0, "each image arrived whole with its own question"
    assert len(bodies) == 2
    for body in bodies:
        system, user = body["messages"]
        assert system == {"role": "system", "content": "Answer in one word."}
        assert [p["type"] for p in user["content"]] == ["image_url", "text"], "images first, then the text"
        text = user["content"][1]["text"]
        assert "[1] Colour names: red, green, blue and white" in text and "Which colour is this image?" in text
        assert "Trains" not in text, "k: 1 retrieved passage"
