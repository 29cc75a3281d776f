"""BLEU/chrF/TER equal sacrebleu's corpus scores; ROUGE equals rouge-score;
WER is corpus-level; shards merge to the single-pass corpus score."""

import functools
import random

import pytest

from auditkit_ray import Generation, Sample, Status
from auditkit_ray.core.registry import build_metric
from auditkit_ray.core.summary import Accumulator
from auditkit_ray.metrics.lexical import edit_distance

sacrebleu = pytest.importorskip("sacrebleu", reason="needs the 'metrics' extra")
rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer", reason="needs the 'metrics' extra")

# sacrebleu's README example
README_REFS = [["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
               ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."]]
README_SYS = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]

SACRE = {
    "bleu": (sacrebleu.metrics.BLEU, {}),
    "chrf": (sacrebleu.metrics.CHRF, {}),
    "ter": (sacrebleu.metrics.TER, {}),
}


def _samples(hyps, ref_streams):
    out = []
    for i, h in enumerate(hyps):
        refs = [s[i] for s in ref_streams if s[i] is not None]
        out.append((Sample(id=str(i), input="x", target=refs), Generation(text=h), {}))
    return out


def _corpus(metric, items):
    scores = [s for r in metric.evaluate_batch(items) for s in r]
    return Accumulator([metric]).add_all(scores).summaries()[metric.output_name], scores


@pytest.mark.parametrize("name", ["bleu", "chrf", "ter"])
def test_corpus_score_equals_sacrebleu_on_its_readme_example(name):
    cls, _ = SACRE[name]
    metric = build_metric(name, {"num_refs": 2})
    summary, scores = _corpus(metric, _samples(README_SYS, README_REFS))
    ref = cls().corpus_score(README_SYS, README_REFS)
    assert summary.mean == ref.score
    # with num_refs fixed, the recorded signature is sacrebleu's own
    assert summary.aggregation == "corpus" and summary.signature == _sig(cls, README_SYS, README_REFS)
    assert all(s.metadata["nrefs"] == 2 for s in scores)


def _sig(cls, hyps, refs, **kw):
    m = cls(**kw)
    m.corpus_score(hyps, refs)
    return m.get_signature().format()


def test_readme_bleu_and_chrf_values_are_the_documented_ones():
    bleu, _ = _corpus(build_metric("bleu"), _samples(README_SYS, README_REFS))
    chrf, _ = _corpus(build_metric("chrf"), _samples(README_SYS, README_REFS))
    assert round(bleu.mean, 2) == 48.53 and round(chrf.mean, 2) == 59.73


def test_signature_without_num_refs_is_sacrebleus_minus_nrefs():
    sig = build_metric("bleu").signature()
    assert sig == "case:mixed|eff:no|tok:13a|smooth:exp|version:" + sacrebleu.__version__


WORDS = "the a dog cat man bit sat on mat surprised was not it no one had bitten him first . , !".split()


def _random_corpus(rng, n):
    def sent():
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 15))).capitalize()

    hyps = [sent() for _ in range(n)]
    streams = [[sent() for _ in range(n)]]
    for _ in range(2):  # a variable number of references per segment
        streams.append([sent() if rng.random() < 0.6 else None for _ in range(n)])
    return hyps, streams


CONFIGS = [
    ("bleu", {}),
    ("bleu", {"lowercase": True, "tokenize": "intl"}),
    ("bleu", {"smooth_method": "floor", "smooth_value": 0.1}),
    ("chrf", {}),
    ("chrf", {"word_order": 2}),
    ("chrf", {"lowercase": True, "eps_smoothing": True}),
    ("ter", {}),
    ("ter", {"case_sensitive": True, "no_punct": True}),
]


@pytest.mark.parametrize("name, params", CONFIGS)
def test_corpus_score_equals_sacrebleu_on_random_corpora_with_variable_references(name, params):
    rng = random.Random(hash((name, tuple(sorted(params)))) % 1000)
    cls, _ = SACRE[name]
    for _ in range(5):
        hyps, streams = _random_corpus(rng, rng.randint(1, 40))
        summary, _ = _corpus(build_metric(name, params), _samples(hyps, streams))
        assert summary.mean == cls(**params).corpus_score(hyps, streams).score


@pytest.mark.parametrize("name", ["bleu", "chrf", "ter", "wer"])
def test_shard_statistics_merged_in_any_order_and_split_equal_the_single_pass_corpus_score(name):
    rng = random.Random(5)
    hyps, streams = _random_corpus(rng, 120)
    metric = build_metric(name)
    items = _samples(hyps, streams)
    whole, scores = _corpus(metric, items)
    if name != "wer":
        assert whole.mean == SACRE[name][0]().corpus_score(hyps, streams).score
    for _ in range(20):
        order = scores[:]
        rng.shuffle(order)
        cuts = sorted(rng.sample(range(1, len(order)), rng.randint(1, 8)))
        parts = [Accumulator([metric]).add_all(order[a:b]) for a, b in zip([0] + cuts, cuts + [len(order)])]
        rng.shuffle(parts)
        merged = functools.reduce(lambda a, b: a.merge(b), parts)
        got = merged.summaries()[name]
        # integer statistics (BLEU, chrF, WER) sum exactly; TER's average
        # reference lengths are floats and may differ in the last bit
        assert got.mean == pytest.approx(whole.mean, rel=1e-12, abs=1e-12) and got.n == whole.n
        if name != "ter":
            assert got.mean == whole.mean


def test_per_sample_bleu_is_sentence_bleu_and_stats_are_sacrebleus():
    [s] = build_metric("bleu").evaluate(Sample(id="1", input="x", target="The cat sat on the mat."),
                                        Generation(text="The cat sat on a mat."), {})
    assert s.value == pytest.approx(sacrebleu.sentence_bleu("The cat sat on a mat.", ["The cat sat on the mat."]).score)
    assert s.metadata["stats"] == sacrebleu.metrics.BLEU()._extract_corpus_statistics(
        ["The cat sat on a mat."], [["The cat sat on the mat."]])[0]


def test_empty_prediction_enters_the_corpus_like_sacrebleu():
    hyps, refs = ["", "the dog bit the man"], [["a cat", "the dog bit the man"]]
    summary, scores = _corpus(build_metric("bleu"), _samples(hyps, refs))
    assert [s.status for s in scores] == [Status.SCORED, Status.SCORED]
    assert summary.mean == sacrebleu.corpus_bleu(hyps, refs).score


@pytest.mark.parametrize("name", ["bleu", "chrf", "ter", "wer", "rouge1", "rouge"])
def test_bad_references_give_error_or_not_tested_with_reason(name, bad_sample):
    metric = build_metric(name)
    g = Generation(text="the cat")
    [s] = metric.evaluate(Sample(id="1", input="x"), g, {})
    assert s.status is Status.NOT_TESTED and "target" in s.reason
    [s] = metric.evaluate(Sample(id="1", input="x", target=""), g, {})
    assert s.status is Status.NOT_TESTED
    for target, words in (([["nested"]], "must be a string"), ([float("nan")], "must be a string"),
                          (3.5, "references must be"), ({"a": 1}, "references must be")):
        [s] = metric.evaluate(bad_sample(target=target), g, {})
        assert s.status is Status.ERROR and words in s.reason, (target, s)
    [s] = metric.evaluate(Sample(id="1", input="x", target="the cat"), Generation(text="", error="timeout"), {})
    assert s.status is Status.ERROR and "timeout" in s.reason


def test_num_refs_is_checked_per_sample():
    [s] = build_metric("bleu", {"num_refs": 2}).evaluate(
        Sample(id="1", input="x", target="a"), Generation(text="a"), {}
    )
    assert s.status is Status.ERROR and "expected 2 references" in s.reason


# -- ROUGE ---------------------------------------------------------------------------

ROUGE_PAIRS = [  # (targets, prediction): shapes from rouge-score's own tests
    (["testing one two"], "testing"),
    (["testing one two"], "testing one"),
    (["testing one two"], "testing two"),
    (["testing one two"], "testing one two"),
    (["first text", "first something"], "text first"),
    (["w1 w2 w3 w4 w5"], "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5"),
    (["The quick brown fox jumps over the lazy dog"], "The quick brown dog jumps on the log."),
    (["Running runners ran; the runner's runs."], "runs running ran"),
    (["one two three\nfour five six", "seven"], "one two\nfive six seven"),
]


@pytest.mark.parametrize("use_stemmer", [False, True])
def test_rouge_equals_rouge_score_on_its_test_pairs(use_stemmer):
    types = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    ref = rouge_scorer.RougeScorer(types, use_stemmer=use_stemmer)
    combined = build_metric("rouge", {"use_stemmer": use_stemmer})
    singles = {t: build_metric(t, {"use_stemmer": use_stemmer}) for t in types}
    for targets, pred in ROUGE_PAIRS:
        expect = ref.score_multi(targets, pred)
        sample = Sample(id="1", input="x", target=targets)
        got = {s.name: s for s in combined.evaluate(sample, Generation(text=pred), {})}
        for t in types:
            assert got[f"rouge.{t}"].value == expect[t].fmeasure
            [single] = singles[t].evaluate(sample, Generation(text=pred), {})
            assert single.name == t and single.value == expect[t].fmeasure
            assert single.metadata["precision"] == expect[t].precision


def test_rouge1_known_value_and_mean_aggregation():
    m = build_metric("rouge1")
    scores = [
        s
        for r in m.evaluate_batch(
            [
                (Sample(id="1", input="x", target="testing one two"), Generation(text="testing"), {}),
                (Sample(id="2", input="x", target="a b"), Generation(text="a b"), {}),
            ]
        )
        for s in r
    ]
    assert scores[0].value == pytest.approx(0.5)
    assert Accumulator([m]).add_all(scores).summaries()["rouge1"].mean == pytest.approx(0.75)


@pytest.mark.parametrize("target, pred, words", [
    ("猫がマットの上に座った", "the cat sat", "tokenizer reduced the reference"),
    ("the cat sat", "Кошка сидела на коврике", "tokenizer reduced the prediction"),
    (["猫", "Кошка"], "cat", "all 2 references"),
    ("the cat sat", "...!?", "tokenizer reduced the prediction"),
])
def test_rouge_on_text_its_tokenizer_drops_is_unknown_with_reason_not_zero(target, pred, words):
    for name in ("rouge1", "rougeL", "rougeLsum", "rouge"):
        for s in build_metric(name).evaluate(Sample(id="1", input="x", target=target), Generation(text=pred), {}):
            assert s.status is Status.UNKNOWN and s.value is None, s
            assert words in s.reason and "non-Latin" in s.reason


def test_rouge_empty_prediction_scores_zero_like_rouge_score_and_blank_reference_is_unknown(bad_sample):
    [s] = build_metric("rouge2").evaluate(Sample(id="1", input="x", target="a b c"), Generation(text="  "), {})
    assert s.status is Status.SCORED and s.value == 0.0 and s.reason == "empty prediction"
    [s] = build_metric("rouge2").evaluate(Sample(id="1", input="x", target=["  ", "\n"]), Generation(text="a b"), {})
    assert s.status is Status.UNKNOWN and "empty reference" in s.reason


def test_rouge_refuses_unknown_types_at_build():
    from auditkit_ray import ConfigError

    with pytest.raises(ConfigError, match="types"):
        build_metric("rouge", {"types": ["rouge0", "rougeW"]})


# -- WER -----------------------------------------------------------------------------


def _lev_reference(a, b):
    @functools.lru_cache(maxsize=None)
    def d(i, j):
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


def test_edit_distance_equals_the_recursive_definition_on_random_word_lists():
    rng = random.Random(3)
    for _ in range(300):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 9))]
        b = [rng.choice("abcd") for _ in range(rng.randint(0, 9))]
        assert edit_distance(a, b) == _lev_reference(tuple(a), tuple(b))


def test_wer_is_total_edits_over_total_reference_words_not_a_mean_of_rates():
    items = [
        (Sample(id="1", input="x", target="hello world"), Generation(text="hello duck"), {}),
        (Sample(id="2", input="x", target="a b c d e f g h"), Generation(text="a b c d e f g h"), {}),
        (Sample(id="3", input="x", target=["x y", "completely different words here"]), Generation(text="x y z"), {}),
    ]
    summary, scores = _corpus(build_metric("wer"), items)
    assert [s.value for s in scores] == [0.5, 0.0, 0.5]
    assert [s.metadata["stats"] for s in scores] == [[1, 2], [0, 8], [1, 2]]
    assert summary.mean == pytest.approx(2 / 12) and summary.direction.value == "minimize"


def test_wer_empty_reference_words_follow_the_ter_convention():
    [s] = build_metric("wer", {"remove_punctuation": True}).evaluate(
        Sample(id="1", input="x", target="..."), Generation(text="word"), {})
    assert s.value == 1.0 and s.metadata["stats"] == [1, 0]
    [s] = build_metric("wer", {"lowercase": True}).evaluate(
        Sample(id="1", input="x", target="Hi"), Generation(text="hi"), {}
    )
    assert s.value == 0.0
