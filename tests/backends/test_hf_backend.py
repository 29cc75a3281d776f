"""The ``hf`` backend against a real (tiny) Llama checkpoint built offline by
``examples/tiny_model/build.py``."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from auditkit_ray.backends.base import Request  # noqa: E402
from auditkit_ray.backends.hf import HFBackend  # noqa: E402
from auditkit_ray.backends.hf import HFSettings as HFSpec  # noqa: E402
from auditkit_ray.config.models import GenerationSettings  # noqa: E402
from auditkit_ray.errors import RunError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "examples" / "tiny_model" / "build.py"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

PROMPTS = [
    "What is 3 plus 4? Answer:",
    "Hello",
    "What is 12 minus 5? Answer:",
    "x",
    "The quick brown fox",
    "What is 7 times 2?",
    "Answer the question with a number.",
]


@pytest.fixture(scope="module")
def builds(tiny_model, tmp_path_factory):
    """Seed 0 built three times in all (the session's tiny model, which the same script built with its default
    seed 0, and one more here) and seed 1 once: two builds at once on the machine's 2 cores."""
    root = tmp_path_factory.mktemp("tiny")
    outs = {"b": (root / "seed0-b", 0), "c": (root / "seed1", 1)}
    procs = {
        k: subprocess.Popen(
            [sys.executable, str(BUILD), "--out", str(p), "--seed", str(s)],
            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for k, (p, s) in outs.items()
    }
    for k, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"build {k} failed:\n{err}"
    return {"a": tiny_model, **{k: p for k, (p, _) in outs.items()}}


@pytest.fixture(scope="module")
def model_dir(tiny_model) -> Path:
    """The session's tiny model: the tests that only load it wait for no build of their own."""
    return tiny_model


def make(model_dir, seed=0, batch_size=3, **gen) -> HFBackend:
    spec_kw = {k: gen.pop(k) for k in ("quantization", "chat_template") if k in gen}
    spec = HFSpec(type="hf", path=str(model_dir), device="cpu", batch_size=batch_size, **spec_kw)
    gen.setdefault("max_new_tokens", 12)
    backend = HFBackend(spec, GenerationSettings(**gen), seed)
    backend.load()
    return backend


def reqs(prompts=PROMPTS):
    return [Request(sample_id=f"s{i}", prompt=p) for i, p in enumerate(prompts)]


def _hashes(d: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir()) if f.is_file()}


# --------------------------------------------------------------------------- build
def test_build_is_deterministic_per_seed(builds):
    a, b, c = (_hashes(builds[k]) for k in "abc")
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(a)
    assert a == b
    assert c["model.safetensors"] != a["model.safetensors"]


def test_built_model_has_the_requested_shape(model_dir):
    import json

    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["model_type"] == "llama"
    assert (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]) == (128, 256, 2)
    assert cfg["hidden_size"] // cfg["num_attention_heads"] == 64
    assert cfg["tie_word_embeddings"] is False


def test_module_import_does_not_import_torch():
    code = ("import sys, auditkit_ray.backends.hf; assert 'torch' not in sys.modules; "
            "assert 'transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)


# --------------------------------------------------------------------------- generate
def test_greedy_is_repeatable_and_in_request_order(model_dir):
    backend = make(model_dir, batch_size=3)
    first = backend.generate(reqs())
    second = backend.generate(reqs())
    assert [g.model_dump(exclude={"latency_s"}) for g in first] == [g.model_dump(exclude={"latency_s"}) for g in second]
    assert all(g.error is None for g in first)
    # order: the prompt token counts are those of the prompts as given
    tok = backend.tokenizer
    assert [g.prompt_tokens for g in first] == [len(tok(p)["input_ids"]) for p in PROMPTS]
    # and each output is what that prompt gives alone (float32: padding changes nothing here)
    alone = make(model_dir, batch_size=1)
    assert [g.raw_text for g in first] == [alone.generate(reqs([p]))[0].raw_text for p in PROMPTS]
    # batch timing: one wall time per sub-batch of 3; sub-batches are cut from
    # the request list sorted by prompt length (ties by position)
    assert all(g.latency_scope == "batch" and g.latency_s > 0 for g in first)
    order = sorted(range(len(first)), key=lambda i: (first[i].prompt_tokens, i))
    assert len({first[i].latency_s for i in order[:3]}) == 1
    assert len({first[i].latency_s for i in order[3:6]}) == 1


def test_stop_strings_truncate_text_not_raw(model_dir):
    full = make(model_dir, max_new_tokens=16).generate(reqs())
    # a long output to cut: its characters 3..4 are the stop string
    long_i = max(range(len(full)), key=lambda i: len(full[i].text))
    ref = full[long_i]
    assert len(ref.text) >= 6, ref
    stop = ref.text[3:5]
    expected = ref.text[: ref.text.find(stop)]
    got = make(model_dir, max_new_tokens=16, stop=[stop, "never-produced"]).generate(reqs())
    g = got[long_i]
    assert g.text == expected
    assert g.finish_reason == "stop"
    assert stop in g.raw_text and g.raw_text != g.text
    assert ref.raw_text.startswith(g.raw_text.rstrip())  # generation stopped early, nothing rewritten
    for x in got + full:
        assert isinstance(x.prompt_tokens, int) and x.prompt_tokens > 0
        assert isinstance(x.completion_tokens, int) and 0 < x.completion_tokens <= 16
        assert x.token_source == "tokenizer"
        assert x.finish_reason in ("stop", "length")
    # without a stop string, hitting max_new_tokens without an EOS reads "length"
    for x in full:
        eos = x.raw_text.endswith("</s>")
        assert x.finish_reason == ("stop" if eos else "length"), x
        if not eos:
            assert x.completion_tokens == 16


def test_sampling_repeats_with_the_same_seed_and_differs_with_another(model_dir):
    kw = {"temperature": 1.0, "max_new_tokens": 16, "batch_size": 4}
    a = [g.raw_text for g in make(model_dir, seed=0, **kw).generate(reqs())]
    b = [g.raw_text for g in make(model_dir, seed=0, **kw).generate(reqs())]
    c = [g.raw_text for g in make(model_dir, seed=1, **kw).generate(reqs())]
    assert a == b
    assert a != c


def test_chat_messages_go_through_the_chat_template(model_dir):
    messages = [{"role": "user", "content": "What is 2 plus 2?"}]
    backend = make(model_dir)
    tok = backend.tokenizer
    rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert rendered == "User: What is 2 plus 2?\nAssistant:"
    (g,) = backend.generate([Request(sample_id="c", prompt=messages)])
    assert g.error is None
    assert g.prompt_tokens == len(tok(rendered, add_special_tokens=False)["input_ids"])
    # chat_template: true wraps a plain string as one user message
    (w,) = make(model_dir, chat_template=True).generate([Request(sample_id="c", prompt="What is 2 plus 2?")])
    assert w.model_dump(exclude={"latency_s"}) == g.model_dump(exclude={"latency_s"})


def test_a_bad_request_fails_alone(model_dir):
    backend = make(model_dir, batch_size=4)
    out = backend.generate(reqs(["What is 1 plus 1? Answer:", "9 " * 600, "Hello"]))
    assert out[1].error and "tokens" in out[1].error
    assert out[0].error is None and out[2].error is None
    assert out[0].raw_text == backend.generate(reqs(["What is 1 plus 1? Answer:"]))[0].raw_text


# --------------------------------------------------------------------------- loglikelihood
def _manual_loglikelihood(backend, context, continuation):
    import torch

    tok, model = backend.tokenizer, backend.model
    ctx = tok(context, add_special_tokens=False)["input_ids"]
    whole = tok(context + continuation, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx):]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([whole])).logits[0].double()
    lp = torch.log_softmax(logits, dim=-1)
    total = sum(float(lp[len(ctx) - 1 + k, t]) for k, t in enumerate(cont))
    greedy = all(int(lp[len(ctx) - 1 + k].argmax()) == t for k, t in enumerate(cont))
    return total, greedy


def test_loglikelihood_matches_the_logits_and_flags_greedy(model_dir):
    backend = make(model_dir, batch_size=2, max_new_tokens=6)
    context = "What is 3 plus 4? Answer:"
    (greedy_gen,) = backend.generate(reqs([context]))
    greedy_text = greedy_gen.text
    assert greedy_text
    pairs = [
        (context, greedy_text),
        ("The quick brown", " fox jumps"),
        (context, " 7"),
        ("Hello", " world, this is a longer continuation"),
    ]
    got = backend.loglikelihood(pairs)
    assert len(got) == len(pairs)
    for (ctx, cont), (ll, is_greedy) in zip(pairs, got):
        m_ll, m_greedy = _manual_loglikelihood(backend, ctx, cont)
        assert ll == pytest.approx(m_ll, abs=1e-4)
        assert is_greedy == m_greedy
        assert ll < 0
    assert got[0][1] is True
    assert got[3][1] is False  # a long arbitrary continuation is not the model's greedy one


# --------------------------------------------------------------------------- quantization, size, errors
def test_int8_dynamic_loads_generates_and_is_smaller(model_dir):
    fp32 = make(model_dir)
    q = make(model_dir, quantization="int8-dynamic")
    out = q.generate(reqs())
    assert all(g.error is None and g.completion_tokens > 0 for g in out)
    size_fp32, size_q = fp32.model_size_bytes(), q.model_size_bytes()
    n_params = sum(p.numel() for p in fp32.model.parameters())
    assert size_fp32 == 4 * n_params + sum(b.numel() * b.element_size() for b in fp32.model.buffers())
    assert 0 < size_q < size_fp32 / 2
    q.close()
    assert q.model is None


def test_int8_dynamic_refuses_cuda(model_dir):
    spec = HFSpec(type="hf", path=str(model_dir), device="cuda", quantization="int8-dynamic")
    with pytest.raises(RunError, match="cuda|CUDA|CPU"):
        HFBackend(spec, GenerationSettings(), 0).load()


def test_missing_model_path_names_the_path(tmp_path):
    missing = tmp_path / "no-such-model"
    spec = HFSpec(type="hf", path=str(missing), device="cpu")
    with pytest.raises(RunError) as info:
        HFBackend(spec, GenerationSettings(), 0).load()
    assert str(missing) in str(info.value)


def test_per_sample_limits_without_eos_generate_exactly_each_samples_own_length(model_dir):
    # generation.ignore_eos + max_new_tokens_field: the pipeline puts each sample's limit in its request
    caps = [2, 9, 5, 1, 7, 3, 4]
    rs = [Request(sample_id=f"s{i}", prompt=p, metadata={"max_new_tokens": c})
          for i, (p, c) in enumerate(zip(PROMPTS, caps))]
    got = make(model_dir, batch_size=3, ignore_eos=True).generate(rs)
    assert [g.completion_tokens for g in got] == caps
    assert all(g.finish_reason == "length" and g.error is None for g in got)
    # each row is the row generated alone to its own limit: one call to the longest limit, then cut
    for i, (p, c) in enumerate(zip(PROMPTS, caps)):
        alone = make(model_dir, batch_size=1, ignore_eos=True, max_new_tokens=c).generate(reqs([p]))[0]
        assert got[i].raw_text == alone.raw_text, (i, c)
