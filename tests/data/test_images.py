"""Images in samples (issue 34): how references are read, where the prompt puts them, what enters the
fingerprint, and that a backend that cannot take them stops the plan (no Ray: planning is the driver's)."""

from __future__ import annotations

import base64
import json

import pytest
from image_data import image_dataset, png

from auditkit_ray import DataError
from auditkit_ray.adapters.prompt import PromptAdapter
from auditkit_ray.config.models import RunSpec
from auditkit_ray.data import load_samples
from auditkit_ray.pipeline.identity import dataset_identity, generation_fingerprint
from auditkit_ray.pipeline.plan import check_dataset


def run_spec(path, model=None, **dataset) -> RunSpec:
    return RunSpec.model_validate({
        "model": model or {"type": "api", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
        "dataset": {"path": str(path), "input_field": "question", "target_field": "answer",
                    "images_field": "image", **dataset},
    })


def test_a_relative_image_path_resolves_against_the_dataset_file_and_the_table_keeps_the_reference(tmp_path):
    spec = run_spec(image_dataset(tmp_path / "d", n=2))
    samples, raws = load_samples(spec.dataset)
    red = (tmp_path / "d" / "img" / "red.png").resolve().as_uri()
    assert samples[0].images == [red]
    assert samples[0].metadata["image"] == "img/red.png", "the sample's own reference is kept as written"
    prompt = PromptAdapter(spec.prompt, spec.dataset, 0).build(samples[0], raws[0])
    assert prompt == [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": red}},
                                                   {"type": "text", "text": "Which colour is this image?"}]}]


def test_a_system_prompt_stays_a_message_of_its_own_and_the_images_come_first_in_the_user_message(tmp_path):
    spec = run_spec(image_dataset(tmp_path, n=1))
    spec.prompt.system, spec.prompt.template = "Answer in one word.", "Q: {{ question }}"
    s, r = load_samples(spec.dataset)
    msgs = PromptAdapter(spec.prompt, spec.dataset, 0).build(s[0], r[0])
    assert [m["role"] for m in msgs] == ["system", "user"] and msgs[0]["content"] == "Answer in one word."
    assert [p["type"] for p in msgs[1]["content"]] == ["image_url", "text"]
    assert msgs[1]["content"][1]["text"] == "Q: Which colour is this image?"


def test_data_urls_https_urls_and_lists_of_images_pass_as_they_are(tmp_path):
    data = "data:image/png;base64," + base64.b64encode(png((1, 2, 3))).decode()
    rows = [{"id": "a", "question": "q", "answer": "x", "image": [data, "https://example.org/cat.png"]}]
    (tmp_path / "d.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (s,), _ = load_samples(run_spec(tmp_path / "d.jsonl").dataset)
    assert s.images == [data, "https://example.org/cat.png"]


@pytest.mark.parametrize("ref, want", [
    ("img/missing.png", "image file"),
    ("s3://bucket/notes.txt", "is not an image file"),  # refused before any request to S3
    ("data:image/png;base64,@@@", "not valid base64"),
    ("ftp://host/cat.png", "unsupported image URL scheme"),
    ("notes.txt", "is not an image file"),
], ids=["missing", "s3-not-an-image", "bad-base64", "scheme", "not-an-image"])
def test_a_bad_image_reference_fails_naming_the_file_line_sample_and_field(tmp_path, ref, want):
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "s7", "question": "q", "answer": "a", "image": ref}) + "\n")
    with pytest.raises(DataError) as err:
        load_samples(run_spec(tmp_path / "d.jsonl").dataset)
    msg = str(err.value)
    assert want in msg and "d.jsonl:1" in msg and "'s7'" in msg and "'image'" in msg, msg


def test_chat_messages_with_content_parts_read_and_their_local_images_resolve(tmp_path):
    (tmp_path / "cat.png").write_bytes(png((9, 9, 9)))
    msgs = [{"role": "user", "content": [{"type": "text", "text": "What is it?"},
                                         {"type": "image_url", "image_url": {"url": "cat.png"}}]}]
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "c", "question": msgs, "answer": "cat"}) + "\n")
    spec = run_spec(tmp_path / "d.jsonl", images_field=None)
    s, r = load_samples(spec.dataset)
    prompt = PromptAdapter(spec.prompt, spec.dataset, 0).build(s[0], r[0])
    assert prompt[0]["content"][1] == {"type": "image_url", "image_url": {"url": (tmp_path / "cat.png").as_uri()}}
    assert dataset_identity(spec)["images"]["local_images"] == 1


def test_a_changed_image_changes_the_generation_fingerprint_and_a_dataset_without_images_has_no_image_key(tmp_path):
    spec = run_spec(image_dataset(tmp_path, n=2))
    before = generation_fingerprint(spec)
    assert generation_fingerprint(spec) == before
    (tmp_path / "img" / "green.png").write_bytes(png((0, 161, 0), w=3))  # same file name, other bytes
    assert generation_fingerprint(spec) != before
    plain = run_spec(tmp_path / "images.jsonl", images_field=None)
    ident = dataset_identity(plain)
    assert "images" not in ident and "images_field" not in ident["selection"]


def test_a_text_only_backend_given_an_image_sample_fails_the_plan_naming_the_backend_and_the_sample(tmp_path):
    path = image_dataset(tmp_path, n=2)
    for model, named in [({"type": "echo"}, "backend 'echo'"),
                         ({"type": "simulated"}, "backend 'simulated'"),
                         ({"type": "hf", "path": str(tmp_path)}, "backend 'hf'"),  # a text checkpoint (vision unset)
                         ({"type": "vllm", "path": str(tmp_path), "num_gpus": 0},
                          "backend 'vllm' with a text checkpoint"),
                         ({"type": "api", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                           "endpoint": "completions"}, "backend 'api' with endpoint 'completions'")]:
        with pytest.raises(DataError) as err:
            check_dataset(run_spec(path, model=model))
        msg = str(err.value)
        assert named in msg and "cannot take images" in msg and "sample 'i0'" in msg, msg
    assert check_dataset(run_spec(path)) == 2, "the api chat backend takes them"
    assert check_dataset(run_spec(path, model={"type": "hf", "path": str(tmp_path), "vision": True})) == 2
    assert check_dataset(run_spec(path, model={"type": "vllm", "path": str(tmp_path), "vision": True,
                                               "num_gpus": 0})) == 2


def test_a_sample_without_an_image_in_an_images_dataset_stays_text(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "t", "question": "plain", "answer": "a"}) + "\n")
    spec = run_spec(tmp_path / "d.jsonl", model={"type": "echo"})
    s, r = load_samples(spec.dataset)
    assert s[0].images is None and PromptAdapter(spec.prompt, spec.dataset, 0).build(s[0], r[0]) == "plain"
    assert check_dataset(spec) == 1


def test_an_https_image_on_a_backend_that_fetches_no_urls_fails_the_plan_and_vision_stays_out_of_text_identities(
        tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "u", "question": "q", "answer": "a",
                                                  "image": "https://example.org/x.png"}) + "\n")
    vlm = {"type": "hf", "path": str(tmp_path), "vision": True}
    with pytest.raises(DataError, match=r"backend 'hf' does not fetch image URLs.*sample 'u'"):
        check_dataset(run_spec(tmp_path / "d.jsonl", model=vlm))
    assert check_dataset(run_spec(tmp_path / "d.jsonl")) == 1, "the api backend's server fetches it"
    for kind in ("hf", "vllm"):
        text_only = RunSpec.model_validate({"model": {"type": kind, "path": "m"}, "dataset": {"path": "d"}}).model
        assert "vision" not in text_only.settings_identity(), f"{kind}: text checkpoints keep their fingerprints"
        vlm_spec = RunSpec.model_validate({"model": {"type": kind, "path": "m", "vision": True},
                                           "dataset": {"path": "d"}}).model
        assert vlm_spec.settings_identity()["vision"] is True


def test_with_a_data_root_an_image_path_that_leads_out_of_it_fails_naming_the_sample(tmp_path, monkeypatch):
    root = tmp_path / "root"
    image_dataset(root, n=1)
    (tmp_path / "secret.png").write_bytes(png((0, 0, 0)))
    (root / "out.jsonl").write_text(json.dumps({"id": "x", "question": "q", "answer": "a",
                                                "image": "../secret.png"}) + "\n")
    monkeypatch.setenv("AUDITKIT_RAY_DATA_ROOT", str(root))
    assert load_samples(run_spec(root / "images.jsonl").dataset)[0][0].images
    with pytest.raises(DataError, match=r"sample 'x'.*outside the data root"):
        load_samples(run_spec(root / "out.jsonl").dataset)


def test_runs_planned_together_share_no_rows_across_backends_that_differ_in_taking_images(tmp_path):
    from auditkit_ray.pipeline.plan import build_plans

    path = image_dataset(tmp_path, n=1)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")  # planning reads no weights (but checks a file is there)
    (tmp_path / "ckpt" / "model.safetensors").write_bytes(b"")
    specs = []
    for model in ({"type": "hf", "path": str(tmp_path / "ckpt"), "vision": True},
                  {"type": "hf", "path": str(tmp_path / "ckpt")}):
        s = run_spec(path, model=model)
        s.store.path, s.execution.shard_size = str(tmp_path / "store"), 8  # else their shard sizes differ
        specs.append(s)
    with pytest.raises(DataError, match=r"backend 'hf' with a text checkpoint.*cannot take images.*sample 'i0'"):
        build_plans(specs)


def _two_images(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(png((230, 20, 20)))
    (tmp_path / "img" / "b.png").write_bytes(png((20, 200, 40)))
    path = tmp_path / "two.jsonl"
    path.write_text(json.dumps({"id": "t0", "question": "Same colour?", "answer": "no",
                                "image": ["img/a.png", "img/b.png"]}) + "\n")
    return path, [(tmp_path / "img" / n).resolve().as_uri() for n in ("a.png", "b.png")]


def test_a_template_places_each_image_where_its_placeholder_stands(tmp_path):
    path, (a, b) = _two_images(tmp_path)
    spec = run_spec(path)
    spec.prompt.system, spec.prompt.template = "Be brief.", "First {{ image.1 }} then {{ image.0 }}: {{ question }}"
    s, r = load_samples(spec.dataset)
    msgs = PromptAdapter(spec.prompt, spec.dataset, 0).build(s[0], r[0])
    assert msgs == [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [{"type": "text", "text": "First "},
                                                 {"type": "image_url", "image_url": {"url": b}},
                                                 {"type": "text", "text": " then "},
                                                 {"type": "image_url", "image_url": {"url": a}},
                                                 {"type": "text", "text": ": Same colour?"}]}]
    spec.prompt.template = "{{ question }} {{ image }}"  # the field's name alone: all its images, in order
    msgs = PromptAdapter(spec.prompt, spec.dataset, 0).build(s[0], r[0])
    assert [p.get("text") or p["image_url"]["url"] for p in msgs[1]["content"]] == ["Same colour? ", a, b]


@pytest.mark.parametrize("template, want", [
    ("{{ image.0 }} {{ question }}", "places 1 of its 2 images; image(s) 1 (from 0) have no placeholder"),
    ("{{ image.2 }} {{ question }}", "places image 3 ('{{ image.2 }}'), and the sample has 2 image(s)"),
    ("{{ image.url }} {{ question }}", "'{{ image.url }}' names no image"),
])
def test_a_template_that_leaves_out_or_invents_an_image_fails_naming_the_sample(tmp_path, template, want):
    path, _ = _two_images(tmp_path)
    spec = run_spec(path)
    spec.prompt.template = template
    s, r = load_samples(spec.dataset)
    with pytest.raises(DataError, match="sample 't0'") as err:
        PromptAdapter(spec.prompt, spec.dataset, 0).build(s[0], r[0])
    assert want in str(err.value)


def test_a_template_placing_images_keeps_a_sample_without_images_text(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "p", "question": "plain", "answer": "x"}) + "\n")
    spec = run_spec(path)
    spec.prompt.template = "{{ image }}{{ question }}"
    s, r = load_samples(spec.dataset)
    assert PromptAdapter(spec.prompt, spec.dataset, 0).build(s[0], r[0]) == "plain"
