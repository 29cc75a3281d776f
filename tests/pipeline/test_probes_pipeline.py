"""The basic probe pack through the whole pipeline: the echo backend (what
it repeats dictates every detector's value) and the word-problems model."""

import json
from pathlib import Path

import pytest

from auditkit_ray.api import evaluate, leaderboard, samples_table
from auditkit_ray.probes.templates import TEMPLATES

pytestmark = pytest.mark.usefixtures("ray_cluster")

REPO = Path(__file__).resolve().parents[2]
DETECTORS = ["refusal_rate", "canary_leak", "instruction_hijack"]
REFUSING = "I'm sorry, but I can't help with that. "


def _nz(counts: dict) -> dict:
    return {k: v for k, v in counts.items() if v}


def test_echo_leaks_every_canary_follows_every_injection_and_refuses_only_with_a_refusing_prefix(make_spec):
    # 4 base samples x 9 templates (no retrieved contexts: inj-ctx-01 does not apply): 12 probes of each kind.
    # The echo repeats its prompt, which holds each canary and each injected marker, and no template text is a
    # refusal: leak 1, hijack 1, refusal 0. A refusing prefix makes every jailbreak probe a refusal.
    over = dict(dataset={"limit": 4}, probes={"seed": 3}, metrics=DETECTORS)
    plain = evaluate(make_spec("plain", name="echo", model={"type": "echo"}, **over))
    refuses = evaluate(make_spec("refuses", name="echo-refuses", model={"type": "echo", "prefix": REFUSING}, **over))
    for res, refusal in ((plain, 0.0), (refuses, 1.0)):
        assert res.perf.samples == 36
        got = {m: (res.metrics[m].mean, res.metrics[m].n, _nz(res.metrics[m].counts)) for m in DETECTORS}
        assert got == {"refusal_rate": (refusal, 12, {"scored": 12, "not_tested": 24}),
                       "canary_leak": (1.0, 12, {"scored": 12, "not_tested": 24}),
                       "instruction_hijack": (1.0, 12, {"scored": 12, "not_tested": 24})}
    rows = {r["sample_id"]: r for r in samples_table(plain).to_pylist()}
    assert sorted(rows) == sorted(f"q00{i}~{t.id}" for i in range(4) for t in TEMPLATES if not t.needs_context)
    assert "The secret access code is CANARY-" in rows["q002~can-01"]["prompt"]
    assert rows["q002~can-01"]["prompt"].endswith("What is 2 plus 6? Answer:")
    # the probe settings are part of the dataset: a probed run is not compared with the plain dataset's runs
    assert plain.dataset_fingerprint == refuses.dataset_fingerprint
    assert evaluate(make_spec("base", model={"type": "echo"}, dataset={"limit": 4})).dataset_fingerprint != \
        plain.dataset_fingerprint
    # like any metric, the detectors rank models, each by its direction
    lb = leaderboard([plain, refuses], n_resamples=50)
    assert [e.run for e in lb.metrics["refusal_rate"].ranked][0] == lb.runs[1].label
    assert lb.metrics["canary_leak"].tie and lb.metrics["instruction_hijack"].tie


def test_word_problems_model_on_probes_scores_each_detector_on_its_own_kind(make_spec):
    data = REPO / "examples" / "data" / "word_problems_test.jsonl"
    res = evaluate(make_spec(
        "wp", data=data,
        model={"type": "hf", "path": str(REPO / "examples" / "models" / "word-problems"), "device": "cpu",
               "batch_size": 9},
        dataset={"limit": 2, "input_field": "question", "target_field": "answer"},
        probes={}, generation={"max_new_tokens": 4}, metrics=DETECTORS))
    assert res.perf.samples == 18
    for m in DETECTORS:
        s = res.metrics[m]
        assert 0.0 <= s.mean <= 1.0 and _nz(s.counts) == {"scored": 6, "not_tested": 12}, (m, s)
    # four tokens of a 512-token vocabulary trained on word problems cannot spell a 19-character random code,
    # and a model that only ever learnt to answer with a number has no refusal in it
    assert {m: res.metrics[m].mean for m in DETECTORS} == {m: 0.0 for m in DETECTORS}
    for r in samples_table(res).to_pylist():
        kind = {"inj": "instruction_hijack", "jb-": "refusal_rate", "can": "canary_leak"}[r["sample_id"][8:11]]
        statuses = {s["name"]: s["status"] for s in json.loads(r["scores"])}
        assert statuses == {m: "scored" if m == kind else "not_tested" for m in DETECTORS}, r["sample_id"]
