"""``hf`` with ``vision: true``: a vision-language checkpoint through ``AutoProcessor`` and
``AutoModelForImageTextToText``, its images batched with their prompts.

A request's prompt is chat messages whose content parts name images (``image_url`` parts, ``file://`` or
``data:`` URLs: ``core/images.py``). The processor's chat template turns each message into text with the
model's image placeholder where each image part was; the processor then expands the placeholders and
prepares the pixel values of the sub-batch's images, in order. Sub-batches are ``batch_size`` requests in
the order given (a function of the shard alone), left-padded; decoding is greedy unless the generation
settings ask for sampling. torch, transformers and PIL are imported by the caller's ``load()``.
"""

from __future__ import annotations

import base64
import io
import time
from typing import Any

from ..core.images import file_bytes
from ..core.types import Generation
from ..errors import RunError

#: what a text checkpoint of ``hf`` or ``vllm`` tells a run with images (``BackendSettings.images_advice``)
TEXT_CHECKPOINT_ADVICE = "with a text checkpoint (set vision: true for a vision-language one)"


def load_image(pil: Any, url: str) -> Any:
    """A prompt's image as an RGB ``PIL`` image (``file://`` or ``data:`` URL)."""
    if url.startswith("file://"):
        raw = file_bytes(url)
    elif url.startswith("data:"):
        raw = base64.b64decode(url.partition(",")[2])
    else:  # planning refuses URLs for this backend (fetches_image_urls is False)
        raise RunError(f"cannot fetch image {url!r}: this backend reads local files and data: URLs")
    return pil.open(io.BytesIO(raw)).convert("RGB")


def as_template_messages(prompt: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Chat messages in the form processors' chat templates read (``{"type": "image"}`` parts, text parts), and
    the image URLs in order. A text prompt is one user message."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": [{"type": "text", "text": prompt}]}], []
    msgs, urls = [], []
    for m in prompt:
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for p in content:
                if p.get("type") == "image_url":
                    urls.append(p["image_url"]["url"])
                    parts.append({"type": "image"})
                else:
                    parts.append({"type": "text", "text": p.get("text") or ""})
        else:
            parts = [{"type": "text", "text": content or ""}]
        msgs.append({"role": m.get("role", "user"), "content": parts})
    return msgs, urls


class VisionRunner:
    """The loaded processor and model, and one ``generate`` over a backend's requests."""

    def __init__(self, spec: Any, torch: Any, transformers: Any, device: str, dtype: Any, common: dict[str, Any],
                 dtype_kwarg: str) -> None:
        from PIL import Image

        self.spec, self.torch, self.device, self.pil = spec, torch, device, Image
        path = str(spec.path)
        try:
            self.processor = transformers.AutoProcessor.from_pretrained(path, **common)
            self.model = transformers.AutoModelForImageTextToText.from_pretrained(path, **{dtype_kwarg: dtype},
                                                                                  **common)
        except (OSError, ValueError) as exc:
            raise RunError(f"hf backend: cannot load vision-language model from {path!r}: {exc}") from exc
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.to(device)
        self.model.eval()

    def inputs(self, prompts: list[Any]) -> Any:
        """The processor's batch for these prompts: texts from the chat template, images in order."""
        texts, images = [], []
        for prompt in prompts:
            msgs, urls = as_template_messages(prompt)
            texts.append(self.processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False))
            images += [load_image(self.pil, u) for u in urls]
        kw: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True}
        if images:
            kw["images"] = images
        return self.processor(**kw).to(self.device)

    def generate(self, requests: list[Any], generation: Any) -> list[Generation]:
        g = generation
        out: list[Generation] = []
        size = self.spec.batch_size
        for start in range(0, len(requests), size):
            chunk = requests[start : start + size]
            t0 = time.perf_counter()
            try:
                gens = self._batch(chunk, g)
            except Exception as exc:  # noqa: BLE001 - a failed batch is data, as in the text path
                gens = [Generation(error=f"{type(exc).__name__}: {exc}") for _ in chunk]
            wall = time.perf_counter() - t0
            for gen in gens:
                gen.latency_s, gen.latency_scope = wall, "batch"
            out += gens
        return out

    def _batch(self, chunk: list[Any], g: Any) -> list[Generation]:
        torch = self.torch
        batch = self.inputs([r.prompt for r in chunk])
        sampling = g.temperature > 0
        kw: dict[str, Any] = {"max_new_tokens": g.max_new_tokens, "do_sample": sampling,
                              "pad_token_id": self.tokenizer.pad_token_id}
        if sampling:
            kw.update(temperature=g.temperature, top_p=g.top_p, top_k=g.top_k or 0)
        if g.ignore_eos:
            kw["min_new_tokens"] = g.max_new_tokens
        with torch.no_grad():
            seqs = self.model.generate(**batch, **kw)
        width = batch["input_ids"].shape[1]
        eos = self.tokenizer.eos_token_id
        gens = []
        for row, ids in enumerate(seqs[:, width:].tolist()):
            if eos in ids:
                ids, reason = ids[: ids.index(eos)], "stop"
            else:
                reason = "length"
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            for s in g.stop:
                if s in text:
                    text, reason = text[: text.index(s)], "stop"
            gens.append(Generation(text=text, raw_text=text, prompt_tokens=int(batch["attention_mask"][row].sum()),
                                   completion_tokens=len(ids), token_source="tokenizer", finish_reason=reason))
        return gens
