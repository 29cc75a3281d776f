"""``hf``: a local transformers checkpoint, batched, left-padded.

The ``requests`` list given to ``generate`` is the batch the pipeline chose
from the shard; it is cut into sub-batches of ``spec.batch_size`` in the
given order, so which requests share a forward pass (and so the padding, and
the sampling seed) is a function of that list only. Inside a sub-batch the
rows are sorted by prompt length and the results put back in request order.

torch and transformers are imported in ``load()`` and the methods, never at
module import, so the package stays importable without the ``hf`` extra.
"""

from __future__ import annotations

import gc
import sys
import time
import warnings
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from ..core.backends import CheckpointSettings
from ..core.types import Generation
from ..errors import MissingExtraError, RunError
from .base import Backend, Request
from .hf_vision import TEXT_CHECKPOINT_ADVICE
from .seeds import seed63
from .tokens import encode_pair, encode_prompt, encode_prompts
from .transformers_compat import skip_sklearn_import

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class HFSettings(CheckpointSettings):
    """transformers, batched, prompts length-sorted inside a batch, left padding."""

    type: Literal["hf"]
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    batch_size: int = Field(8, ge=1)
    quantization: Literal["int8-dynamic"] | None = None
    pruning: dict[str, Any] | None = Field(None, description="recorded provenance of a pruned checkpoint")
    chat_template: bool = False
    trust_remote_code: bool = False
    num_gpus: float = Field(1.0, ge=0, description="GPUs per generation actor when the cluster has GPUs")
    vision: bool = Field(False, description="a vision-language checkpoint: loaded with AutoProcessor and "
                         "AutoModelForImageTextToText, its prompts' images batched with them (docs/images.md)")

    # batch composition is fixed by the shard, so batch_size stays in identity
    not_in_identity: ClassVar[frozenset[str]] = CheckpointSettings.not_in_identity | {"device", "num_gpus"}
    extra: ClassVar[str | None] = "hf"

    def needs_gpu(self) -> bool:
        return self.num_gpus > 0

    def load_in_thread(self) -> bool:
        return True  # imports and from_pretrained; torch's thread count is set by the caller

    def takes_images(self) -> bool:
        return self.vision  # a text-only checkpoint would drop them

    def images_advice(self) -> str:
        return TEXT_CHECKPOINT_ADVICE

    def settings_identity(self) -> dict[str, Any]:
        out = super().settings_identity()
        if not self.vision:  # unset: text checkpoints keep the fingerprints they had
            out.pop("vision", None)
        return out


def _import_torch_transformers():
    try:
        import torch

        if "transformers.generation" not in sys.modules and _in_ray_actor():
            skip_sklearn_import()
        import transformers
    except ImportError as exc:
        raise MissingExtraError("transformers", "hf") from exc
    return torch, transformers


def _in_ray_actor() -> bool:
    """In a Ray actor (a process of ours), not a caller's own process. Ray is
    only looked up, never imported: a process without it is no actor."""
    ray = sys.modules.get("ray")
    try:
        return bool(ray and ray.is_initialized() and ray.get_runtime_context().get_actor_id())
    except Exception:  # noqa: BLE001 - another Ray: assume not
        return False


def _dtype_kwarg(transformers: Any) -> str:
    """``from_pretrained``'s dtype argument: ``dtype`` since transformers 4.56
    (``torch_dtype`` is deprecated in 5.x), ``torch_dtype`` before."""
    try:
        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    except ValueError:
        return "dtype"
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _is_oom(torch: Any, exc: BaseException) -> bool:
    oom_types = tuple(
        t for t in (getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None)) if t
    )
    if oom_types and isinstance(exc, oom_types):
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg)


class HFBackend(Backend):
    def __init__(self, spec: Any, generation: Any, seed: int = 0) -> None:
        super().__init__(spec, generation, seed)
        self.model: Any = None
        self.tokenizer: Any = None
        self.device: str | None = None
        self._max_positions: int | None = None
        self._vision: Any = None  # hf_vision.VisionRunner when spec.vision

    # ------------------------------------------------------------------ loading
    def load(self) -> None:
        torch, transformers = _import_torch_transformers()
        spec = self.spec
        path = Path(spec.path).expanduser()
        if not path.exists():
            raise RunError(f"hf backend: model path {str(spec.path)!r} does not exist")

        if spec.device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif spec.device == "cuda" and not torch.cuda.is_available():
            raise RunError("hf backend: device 'cuda' requested but no CUDA device is available")
        else:
            device = spec.device
        if spec.quantization == "int8-dynamic" and device != "cpu":
            raise RunError(
                "hf backend: quantization 'int8-dynamic' (torch dynamic quantization) runs on CPU only; "
                "set device: cpu"
            )
        if spec.quantization == "int8-dynamic" and spec.dtype in ("bfloat16", "float16"):
            raise RunError("hf backend: quantization 'int8-dynamic' needs dtype float32 (or auto)")

        common: dict[str, Any] = {"trust_remote_code": spec.trust_remote_code}
        if spec.revision:
            common["revision"] = spec.revision
        if spec.vision:
            if spec.quantization:
                raise RunError("hf backend: quantization is for text checkpoints; vision: true takes none")
            from .hf_vision import VisionRunner

            dtype = "auto" if spec.dtype == "auto" else getattr(torch, _DTYPES[spec.dtype])
            self._vision = VisionRunner(spec, torch, transformers, device, dtype, common, _dtype_kwarg(transformers))
            self.model, self.tokenizer, self.device = self._vision.model, self._vision.tokenizer, device
            return
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), **common)
            dtype: Any = "auto" if spec.dtype == "auto" else getattr(torch, _DTYPES[spec.dtype])
            # An actor given several GPUs (num_gpus > 1: Ray sets CUDA_VISIBLE_DEVICES
            # to all of them) spreads the layers over them with accelerate.
            spread = device == "cuda" and torch.cuda.device_count() > 1
            extra = {"device_map": "auto"} if spread else {}
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(path), **{_dtype_kwarg(transformers): dtype}, **common, **extra
            )
        except (OSError, ValueError) as exc:
            # transformers' reasons run over several lines: the first says what is wrong (the rest is in the log)
            why = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            raise RunError(f"hf backend: cannot load model from {str(spec.path)!r}: {why}") from exc

        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if spread:
            device = str(next(model.parameters()).device)  # inputs go to the first shard
        else:
            model.to(device)
        model.eval()
        if spec.quantization == "int8-dynamic":
            if model.dtype != torch.float32:
                model = model.float()
            with warnings.catch_warnings():
                # torch.ao.quantization is deprecated upstream (torchao replaces it) but still works
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.simplefilter("ignore", UserWarning)
                from torch.ao.quantization import quantize_dynamic

                model = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
            model.eval()
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self._max_positions = getattr(model.config, "max_position_embeddings", None)

    def _require_loaded(self) -> None:
        if self.model is None:
            self.load()

    def warm_up(self) -> None:
        """On a GPU, one short generate right after the load: CUDA's kernel loading and the allocator's first
        growth happen here, while the driver plans, rather than in the first shard (0.70x a plain loop over a
        whole generation, 0.97x per batch after the first: benchmarks/RESULTS.md). Its own seed: no run's
        sampling depends on it (each sub-batch seeds itself)."""
        torch, _ = _import_torch_transformers()
        if self._vision is not None or not str(self.device or "").startswith("cuda"):
            return
        ids = torch.tensor([[self.tokenizer.pad_token_id or 0] * 4], device=self.device)
        with torch.no_grad():
            self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=2,
                                do_sample=False, pad_token_id=self.tokenizer.pad_token_id)

    # ------------------------------------------------------------------ helpers
    def _eos_ids(self) -> list[int]:
        ids: list[int] = []
        gc_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        for v in (gc_eos, self.tokenizer.eos_token_id):
            if v is None:
                continue
            for i in v if isinstance(v, (list, tuple)) else [v]:
                if i not in ids:
                    ids.append(int(i))
        return ids

    def _encode_prompt(self, prompt: Any) -> list[int]:
        return encode_prompt(self.tokenizer, prompt, self.spec.chat_template)

    def _sub_batches(self, n: int) -> list[list[int]]:
        size = self.spec.batch_size
        return [list(range(i, min(i + size, n))) for i in range(0, n, size)]

    # ------------------------------------------------------------------ generate
    def generate(self, requests: list[Request]) -> list[Generation]:
        """Encode every prompt, sort the request list by prompt length (ties by
        position), cut it into sub-batches of ``batch_size`` and return results
        in the original order. Sorting the whole list (not only inside a
        sub-batch) is what saves padding; the composition is still a function
        of the request list alone, so the pipeline's determinism holds."""
        torch, _ = _import_torch_transformers()
        self._require_loaded()
        if self._vision is not None:
            return self._vision.generate(requests, self.generation)
        results: list[Generation | None] = [None] * len(requests)
        encoded = encode_prompts(self._encode_prompt, requests, results, self._max_positions,
                                 f"the model takes at most {self._max_positions}")
        encoded.sort(key=lambda e: (len(e[1]), e[0]))
        size = self.spec.batch_size
        for start in range(0, len(encoded), size):
            chunk = encoded[start : start + size]
            first = requests[min(i for i, _ in chunk)]
            t0 = time.perf_counter()
            try:
                caps = {i: (requests[i].metadata or {}).get("max_new_tokens", self.generation.max_new_tokens)
                        for i, _ in chunk}
                gens = self._generate_sub_batch(torch, chunk, seed63(self.seed, first.sample_id, first.repeat), caps)
            except Exception as exc:  # noqa: BLE001
                if _is_oom(torch, exc):
                    self._empty_cache(torch)
                    raise RunError(
                        f"out of memory in hf generation (sub-batch of {len(chunk)}, batch_size {size}): {exc}"
                    ) from exc
                err = f"{type(exc).__name__}: {exc}"
                gens = {i: Generation(error=err) for i, _ in chunk}
            wall = time.perf_counter() - t0
            for i, g in gens.items():
                g.latency_s = wall
                g.latency_scope = "batch"
                results[i] = g
        return [r if r is not None else Generation(error="no result") for r in results]

    def _generate_sub_batch(self, torch: Any, encoded: list[tuple[int, list[int]]], seed: int,
                            caps: dict[int, int]) -> dict[int, Generation]:
        """One ``model.generate`` call to the longest of the rows' own limits (``caps``); each row is then cut
        to its own limit (greedy decoding is causal, so a row cut at k tokens is the row generated to k)."""
        from transformers import GenerationConfig

        tok, model, g = self.tokenizer, self.model, self.generation
        # length-sorted rows (longest first); results are keyed by request index
        rows = sorted(encoded, key=lambda e: -len(e[1]))
        pad_id = tok.pad_token_id
        width = max(len(ids) for _, ids in rows)
        input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (_, ids) in enumerate(rows):
            input_ids[r, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[r, width - len(ids):] = 1
        eos_ids = self._eos_ids()
        sampling = g.temperature > 0
        longest = max(caps.values())
        cfg = GenerationConfig(
            max_new_tokens=longest,
            min_new_tokens=longest if g.ignore_eos else None,
            do_sample=sampling,
            temperature=g.temperature if sampling else None,
            top_p=g.top_p if sampling else None,
            top_k=(g.top_k or 0) if sampling else None,  # 0: no top-k filter
            num_beams=1,
            pad_token_id=pad_id,
            eos_token_id=eos_ids or None,
            bos_token_id=tok.bos_token_id,
            stop_strings=list(g.stop) or None,  # early exit only; the text is cut below
        )
        kwargs: dict[str, Any] = {}
        if g.stop:
            kwargs["tokenizer"] = tok
        if sampling:
            torch.manual_seed(seed)
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention.to(self.device),
                generation_config=cfg,
                **kwargs,
            )
        out = out[:, width:].cpu().tolist()

        gens: dict[int, Generation] = {}
        eos_set = set(eos_ids)
        for r, (i, ids) in enumerate(rows):
            gen_ids = out[r][:caps[i]]
            n, hit_eos = len(gen_ids), False
            for k, t in enumerate(gen_ids):
                if t in eos_set:
                    n, hit_eos = k + 1, True
                    break
            else:
                if pad_id not in eos_set:
                    while n > 0 and gen_ids[n - 1] == pad_id:
                        n -= 1
            gen_ids = gen_ids[:n]
            raw = tok.decode(gen_ids, skip_special_tokens=False)
            text = tok.decode(gen_ids, skip_special_tokens=True)
            cut = min((p for p in (text.find(s) for s in g.stop if s) if p >= 0), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
            elif hit_eos:
                finish = "stop"
            elif n >= caps[i]:
                finish = "length"
            else:
                finish = "stop"
            gens[i] = Generation(
                text=text,
                raw_text=raw,
                prompt_tokens=len(ids),
                completion_tokens=n,
                token_source="tokenizer",
                finish_reason=finish,
            )
        return gens

    # ------------------------------------------------------------------ loglikelihood
    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        return encode_pair(self.tokenizer, context, continuation)

    def loglikelihood(self, pairs: list[tuple[str, str]]) -> list[tuple[float, bool]]:
        """Sum of the continuation's token log-probabilities given the context,
        and whether the continuation is the greedy one (lm-eval semantics)."""
        torch, _ = _import_torch_transformers()
        self._require_loaded()
        results: list[tuple[float, bool] | None] = [None] * len(pairs)
        for idx in self._sub_batches(len(pairs)):
            try:
                self._loglikelihood_sub_batch(torch, pairs, idx, results)
            except Exception as exc:  # noqa: BLE001
                if _is_oom(torch, exc):
                    self._empty_cache(torch)
                    raise RunError(f"out of memory in hf loglikelihood (sub-batch of {len(idx)}): {exc}") from exc
                raise
        assert all(r is not None for r in results)
        return results  # type: ignore[return-value]

    def _loglikelihood_sub_batch(self, torch: Any, pairs, idx: list[int], results: list) -> None:
        rows = []  # (request index, input ids, continuation ids)
        for i in idx:
            ctx, cont = self._encode_pair(*pairs[i])
            if not cont:
                results[i] = (0.0, True)
                continue
            seq = (ctx + cont)[:-1]
            if self._max_positions and len(seq) > self._max_positions:
                seq = seq[-self._max_positions:]  # keep the end: the continuation is scored whole
            rows.append((i, seq, cont))
        if not rows:
            return
        rows.sort(key=lambda r: -len(r[1]))
        width = max(len(r[1]) for r in rows)
        pad_id = self.tokenizer.pad_token_id
        # right padding: positions of the real tokens stay 0..n-1 without position_ids
        input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (_, seq, _) in enumerate(rows):
            input_ids[r, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            attention[r, : len(seq)] = 1
        with torch.inference_mode():
            logits = self.model(
                input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device)
            ).logits.float()
            logprobs = torch.log_softmax(logits, dim=-1).cpu()
        for r, (i, seq, cont) in enumerate(rows):
            n = len(cont)
            lp = logprobs[r, len(seq) - n: len(seq)]  # positions predicting the continuation
            target = torch.tensor(cont, dtype=torch.long)
            total = float(lp.gather(-1, target.unsqueeze(-1)).sum())
            greedy = bool((lp.argmax(dim=-1) == target).all())
            results[i] = (total, greedy)

    # ------------------------------------------------------------------ misc
    def model_size_bytes(self) -> int | None:
        if self.model is None:
            return None
        torch, _ = _import_torch_transformers()
        total = sum(p.numel() * p.element_size() for p in self.model.parameters())
        total += sum(b.numel() * b.element_size() for b in self.model.buffers())
        # dynamically quantized Linear layers keep their weights in packed params,
        # which are neither parameters nor buffers
        for m in self.model.modules():
            packed = getattr(m, "_packed_params", None)
            if packed is None or not hasattr(packed, "_weight_bias"):
                continue
            w, b = packed._weight_bias()
            total += w.numel() * w.element_size()
            if b is not None:
                total += b.numel() * b.element_size()
        return int(total)

    @staticmethod
    def _empty_cache(torch: Any) -> None:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def close(self) -> None:
        self.model = None
        self.tokenizer = None
        self._vision = None
        gc.collect()
        try:
            import torch
        except ImportError:  # pragma: no cover
            return
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
