"""Judged metrics against the OpenAI-compatible test server (and the tiny
model through the hf backend): verdicts, unknown on unparsed replies, error
on transport failures, never 0 for either."""

from __future__ import annotations

import math
import re
import socket

import pytest

pytest.importorskip("aiohttp", reason="api judges need the 'judges' extra (aiohttp)")

from auditkit_ray.core.metric import Direction  # noqa: E402
from auditkit_ray.core.registry import build_metric, resolve_metric  # noqa: E402
from auditkit_ray.core.types import Generation, Sample, Status  # noqa: E402
from auditkit_ray.errors import ConfigError  # noqa: E402
from auditkit_ray.judges.base import JudgeReplyError  # noqa: E402
from auditkit_ray.judges.parsers import parse_score, parse_yes_no, split_claims, weighted_score  # noqa: E402
from auditkit_ray.testing import OpenAIServer, ScriptedPolicy  # noqa: E402

KEY = "sk-judge-planted-424242"


def judge(server, tmp_path, **kw):
    return {"type": "api", "base_url": server.base_url, "model": "judge", "api_key": KEY, "backoff_s": 0.01,
            "cache_path": str(tmp_path / "judge-cache.sqlite"), **kw}


def items(*pairs, contexts=None):
    out = []
    for i, (q, a, t) in enumerate(pairs):
        s = Sample(id=f"s{i}", input=q, target=t, retrieved_contexts=contexts)
        out.append((s, Generation(text=a), {"repeat": 0}))
    return out


def _answer_yes_if_correct(body):
    prompt = body["messages"][-1]["content"]
    ref = re.search(r"Reference answer:\n(.*)\n", prompt)
    resp = re.search(r"Response:\n(.*)\n", prompt)
    if "garbage" in resp.group(1):
        return "I am not sure what to say"
    return "Yes." if ref and ref.group(1).strip() == resp.group(1).strip() else "No, it is wrong."


def test_builtins_are_registered_judges_with_their_own_names():
    for name in ("g_eval", "factual_correctness", "grounding"):
        cls = resolve_metric(name)
        assert cls.family == "judge" and cls.direction is Direction.MAXIMIZE and cls.name == name
    assert {"g_eval", "factual_correctness", "grounding"}.isdisjoint({"exact_match", "bleu", "rouge", "token_f1"})
    with pytest.raises(ConfigError, match="params.judge is required"):
        build_metric("factual_correctness", {})
    with pytest.raises(ConfigError, match="params.judge.base_url"):
        build_metric("factual_correctness", {"judge": {"type": "api", "model": "m"}})


def test_factual_correctness_scores_yes_no_and_unparsed_is_unknown_never_zero(tmp_path):
    with OpenAIServer(ScriptedPolicy(_answer_yes_if_correct), api_key=KEY) as s:
        m = build_metric("factual_correctness", {"judge": judge(s, tmp_path)})
        scores = m.evaluate_batch(items(("2+2?", "4", "4"), ("3+3?", "7", "6"), ("1+1?", "garbage", "2")))
        assert s.requests == 3
        m.evaluate_batch(items(("2+2?", "4", "4")))
        assert s.requests == 3, "the second batch came from the judge cache"
    (a,), (b,), (c,) = scores
    assert (a.status, a.value, a.metadata["verdict"]) == (Status.SCORED, 1.0, "yes")
    assert (b.status, b.value) == (Status.SCORED, 0.0)
    assert c.status is Status.UNKNOWN and c.value is None and "no yes/no verdict" in c.reason
    assert m._backend is not None and m.backend is m._backend, "the judge backend loads once per metric instance"


def test_a_judge_transport_failure_is_an_error(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = {"type": "api", "base_url": f"http://127.0.0.1:{port}/v1", "model": "j", "max_retries": 1, "backoff_s": 0.01,
           "cache_path": str(tmp_path / "c.sqlite")}
    (s,), = build_metric("factual_correctness", {"judge": cfg}).evaluate_batch(items(("q", "a", "a")))
    assert s.status is Status.ERROR and "judge request failed" in s.reason and "cannot reach" in s.reason
    with OpenAIServer(ScriptedPolicy("yes"), api_key="other-key") as srv:
        (s401,), = build_metric("g_eval", {"judge": judge(srv, tmp_path)}).evaluate_batch(items(("q", "a", None)))
    assert s401.status is Status.ERROR and "HTTP 401" in s401.reason and KEY not in s401.reason


def test_g_eval_weights_the_score_by_top_logprobs(tmp_path):
    reply = {"content": "4", "top_logprobs": [{"4": math.log(0.6), "3": math.log(0.3), "x": math.log(0.1)}]}
    with OpenAIServer(ScriptedPolicy(reply)) as s:
        m = build_metric("g_eval", {"judge": judge(s, tmp_path), "criteria": "correctness"})
        (sc,), = m.evaluate_batch(items(("q", "a", None)))
        assert s.bodies[0]["logprobs"] is True and s.bodies[0]["top_logprobs"] == 5
        assert "correctness" in s.bodies[0]["messages"][0]["content"]
    assert sc.status is Status.SCORED and sc.metadata["method"] == "logprobs"
    assert sc.value == pytest.approx((4 * 0.6 + 3 * 0.3) / 0.9)


def test_g_eval_falls_back_to_the_mean_of_samples_without_logprobs(tmp_path):
    answers = iter(["Score: 4", "5", "I cannot rate this", "4", "3"] * 3)
    with OpenAIServer(ScriptedPolicy(lambda b: next(answers))) as s:
        m = build_metric("g_eval", {"judge": judge(s, tmp_path, cache=False), "samples": 4})
        (sc,), = m.evaluate_batch(items(("q", "a", None)))
        temps = [b["temperature"] for b in s.bodies]
    assert temps[0] == 0 and temps[1:] == [1.0] * 4, "one greedy ask for logprobs, then 4 samples"
    assert sc.status is Status.SCORED and sc.metadata["method"] == "sampling"
    assert sc.metadata["parsed"] == 3 and sc.value == pytest.approx(mean_of(sc.metadata["values"]))
    assert sorted(sc.metadata["values"]) == [3.0, 4.0, 5.0]


def mean_of(xs):
    return sum(xs) / len(xs)


def test_g_eval_unparsed_everywhere_is_unknown(tmp_path):
    with OpenAIServer(ScriptedPolicy({"content": "great", "top_logprobs": [{"great": -0.1, "good": -2.0}]})) as s:
        (sc,), = build_metric("g_eval", {"judge": judge(s, tmp_path)}).evaluate_batch(items(("q", "a", None)))
    assert sc.status is Status.UNKNOWN and sc.value is None and "no score token" in sc.reason


def test_grounding_scores_the_share_of_supported_claims(tmp_path):
    def verdict(body):
        prompt = body["messages"][-1]["content"]
        ctx = prompt.split("Claim:")[0]
        claim = prompt.split("Claim:\n")[1].split("\n")[0]
        if "unsure" in claim:
            return "maybe"
        return "yes" if claim.rstrip(".") in ctx else "no"

    ctx = [
        {"id": "d1", "text": "Oslo is the capital of Norway. It has 700000 people."},
        {"id": "d2", "text": "Paris is in France"},
    ]
    with OpenAIServer(ScriptedPolicy(verdict)) as s:
        m = build_metric("grounding", {"judge": judge(s, tmp_path)})
        scores = m.evaluate_batch(
            items(("q", "Oslo is the capital of Norway. Paris is in France. Paris has 9 million people.", None),
                  ("q", "Oslo is the capital of Norway. I am unsure.", None), contexts=ctx)
            + items(("q", "anything", None))
            + items(("q", "Oslo.", None), contexts=[{"id": "d3"}]))
        assert s.requests == 5
    (a,), (b,), (c,), (d,) = scores
    assert a.status is Status.SCORED and a.value == pytest.approx(2 / 3) and a.metadata["supported"] == 2
    assert [v["supported"] for v in a.metadata["claims"]] == [True, True, False]
    assert b.status is Status.UNKNOWN and "claim 2" in b.reason
    assert c.status is Status.NOT_TESTED
    assert d.status is Status.UNKNOWN and "no text" in d.reason


def test_an_hf_judge_on_the_tiny_model_records_its_method_and_never_scores_garbage_as_zero(tiny_model, tmp_path):
    pytest.importorskip("transformers")
    cfg = {"type": "hf", "path": str(tiny_model), "device": "cpu", "num_gpus": 0, "batch_size": 4}
    m = build_metric("g_eval", {"judge": cfg, "samples": 2, "generation": {"max_new_tokens": 3}})
    res = [r[0] for r in m.evaluate_batch(items(("What is 2 plus 2?", "4", None), ("What is 3 plus 3?", "6", None)))]
    for sc in res:
        assert sc.metadata.get("method") == "sampling" and sc.metadata["n"] == 2
        assert sc.status in (Status.SCORED, Status.UNKNOWN)
        if sc.status is Status.SCORED:
            assert 1 <= sc.value <= 5
        else:
            assert sc.value is None and sc.reason
    fc = build_metric("factual_correctness", {"judge": cfg})
    for (sc,) in fc.evaluate_batch(items(("What is 2 plus 2?", "4", "4"))):
        assert (sc.status is Status.SCORED and sc.value in (0.0, 1.0)) or (
            sc.status is Status.UNKNOWN and sc.value is None
        )


def test_judge_identity_and_fingerprint_hold_no_key(tmp_path):
    from auditkit_ray.core.fingerprint import canonical_json

    with OpenAIServer(ScriptedPolicy("yes")) as s:
        m = build_metric("factual_correctness", {"judge": judge(s, tmp_path)})
        ident = m.identity()
    assert KEY not in str(ident) and KEY not in canonical_json(ident)
    assert ident["judge_backend"]["model"] == "judge" and "api_key" not in ident["judge_backend"]
    env = build_metric("factual_correctness", {"judge": {**judge(s, tmp_path), "api_key": "${JUDGE_KEY_FOR_TEST}"}})
    assert "${JUDGE_KEY_FOR_TEST}" in str(env.params)


def test_parsers():
    assert parse_yes_no("Yes, it is.") is True and parse_yes_no("no") is False
    assert parse_yes_no("Answer: NO. yes later") is False
    with pytest.raises(JudgeReplyError):
        parse_yes_no("yesterday nobody came")
    assert parse_score("Score: 4/5", 1, 5) == 4.0
    with pytest.raises(JudgeReplyError, match="outside"):
        parse_score("7", 1, 5)
    with pytest.raises(JudgeReplyError):
        parse_score("v2 is best", 1, 5)
    value, probs = weighted_score(
        [
            {"token": " ", "top": {}},
            {"token": " 2", "top": {" 2": math.log(0.5), "2": math.log(0.25), "5": math.log(0.25)}},
        ],
        1,
        5,
    )
    assert value == pytest.approx(2 * 0.75 + 5 * 0.25) and probs == {2: pytest.approx(0.75), 5: pytest.approx(0.25)}
    assert split_claims("A b. C d!\nE f? ...", 2) == (["A b.", "C d!"], True)
