"""lm-eval tasks through the Ray pipeline (``engine="pipeline"``): the task's
docs sharded over generation actors on (logical) GPUs, each doc scored by
lm-eval's own filters and process_results, the task numbers from lm-eval's
aggregation functions. On the tiny model, float32 and greedy, they must equal
what the real lm_eval.simple_evaluate reports for the same task and settings."""

import json

import pytest

pytest.importorskip("lm_eval", reason="the lm-eval bridge needs the 'lmeval' extra")

from auditkit_ray.api import samples_table  # noqa: E402
from auditkit_ray.lmeval import run_lmeval  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")

TASKS = ["auditkit_arith_gen", "auditkit_arith_mc"]
#: metrics whose per-sample values are 0/1: equal means exactly equal
BINARY = ("exact_match", "acc", "acc_norm")


@pytest.fixture(scope="module")
def both_engines(tiny_model, tmp_path_factory):
    store = tmp_path_factory.mktemp("lmeval-pipeline")
    common = dict(store=str(store), data_dir=str(store / "data"))
    direct = run_lmeval(TASKS, tiny_model, engine="lm_eval", **common)  # lm-eval's reference: batch size 1
    sharded = run_lmeval(
        TASKS, tiny_model, engine="pipeline", shard_size=8, generation_actors=2, **common
    )  # batches of 8
    return {"store": store, "common": common, "direct": dict(zip(TASKS, direct)), "pipeline": dict(zip(TASKS, sharded))}


def _rows(result):
    return samples_table(result).to_pylist()


def _first_scores(rows):
    out = {}
    for r in rows:
        out.setdefault(r["sample_id"], json.loads(r["scores"]))
    return out


@pytest.mark.parametrize("task", TASKS)
def test_pipeline_metrics_equal_lm_eval_direct_on_the_same_task_model_and_settings(both_engines, task):
    d, p = both_engines["direct"][task], both_engines["pipeline"][task]
    assert set(p.metrics) == set(d.metrics) and d.metrics
    print(f"\n{task}: metric, lm_eval direct, pipeline (sharded), stderr direct / pipeline")
    for name, md in sorted(d.metrics.items()):
        mp = p.metrics[name]
        print(f"  {name:30s} {md.mean!r:24} {mp.mean!r:24} {md.stderr!r} / {mp.stderr!r}")
        assert mp.direction == md.direction and mp.aggregation == md.aggregation and mp.n == md.n == 24
        if name.split("@")[0] in BINARY:
            assert mp.mean == md.mean and mp.stderr == md.stderr
        else:  # sums of floats from two processes: equal to float precision
            assert mp.mean == pytest.approx(md.mean, rel=1e-6, abs=1e-9)
            assert (mp.stderr is None) == (md.stderr is None)
            if md.stderr is not None:
                assert mp.stderr == pytest.approx(md.stderr, rel=1e-6)
    assert p.dataset_fingerprint == d.dataset_fingerprint
    assert p.metadata["lm_eval"]["n_shot"] == d.metadata["lm_eval"]["n_shot"]
    assert p.metadata["lm_eval"]["config_hash"] == d.metadata["lm_eval"]["config_hash"]

    # per request: the same prompt (few-shot, target delimiter) and the same output
    rd, rp = _rows(d), _rows(p)
    assert [(r["sample_id"], r["choice"], r["prompt"], r["text"]) for r in rd] == \
           [(r["sample_id"], r["choice"], r["prompt"], r["text"]) for r in rp]
    # per doc: the same lm-eval scores, and (multiple choice) the same log-likelihoods
    sd, sp = _first_scores(rd), _first_scores(rp)
    worst = 0.0
    for sid, scores in sd.items():
        assert [(s["name"], s["status"], s["value"]) for s in scores] == [
            (s["name"], s["status"], s["value"]) for s in sp[sid]
        ]
        a, b = scores[0]["metadata"]["resps"], sp[sid][0]["metadata"]["resps"]
        if isinstance(a[0], list):  # (log-likelihood, is_greedy) per choice
            assert [g for _, g in a] == [g for _, g in b]
            worst = max(worst, max(abs(x[0] - y[0]) for x, y in zip(a, b)))
        else:
            assert a == b
    if task.endswith("_mc"):
        print(f"  largest log-likelihood difference over all choices: {worst:.3g}")
    assert worst < 1e-4


def test_the_pipeline_run_was_sharded_over_gpu_actors(both_engines):
    for task in TASKS:
        p = both_engines["pipeline"][task]
        assert p.metadata["n_shards"] == 3 and p.metadata["lm_eval"]["engine"] == "pipeline"
        workers = {r["worker"] for r in _rows(p)}
        gpus = {g for w in workers for g in json.loads(w)["gpu_ids"]}
        assert gpus, "generation actors were given no GPU"


def test_lm_eval_and_pipeline_runs_compare_paired_and_agree(both_engines):
    from auditkit_ray.compare import compare

    for task in TASKS:
        report = compare(both_engines["direct"][task], both_engines["pipeline"][task], n_resamples=200)
        assert report.dataset_comparable, report.to_dict()
        for name, m in report.metrics.items():
            assert m.comparable, (name, m.reasons)
            if m.aggregation == "mean":
                assert m.paired.n_paired == 24 and m.paired.same == 24 and m.grade == "pass", (name, m.grade)


def test_a_second_pipeline_call_returns_the_stored_results_without_running(both_engines, tiny_model, monkeypatch):
    from auditkit_ray.pipeline import driver

    def boom(*a, **k):
        raise AssertionError("the pipeline ran")

    monkeypatch.setattr(driver, "evaluate_specs", boom)
    again = run_lmeval(
        TASKS, tiny_model, engine="pipeline", shard_size=8, generation_actors=2, **both_engines["common"]
    )
    for task, r in zip(TASKS, again):
        first = both_engines["pipeline"][task]
        assert r.fingerprint == first.fingerprint and r.metrics == first.metrics
    with pytest.raises(AssertionError, match="the pipeline ran"):  # another shard size is another run
        run_lmeval(TASKS[1:], tiny_model, engine="pipeline", shard_size=12, **both_engines["common"])


@pytest.fixture(scope="module")
def bos_model(tiny_model, tmp_path_factory):
    """The tiny model with a tokenizer that prepends BOS by default (as Llama's do)."""
    import shutil

    dst = tmp_path_factory.mktemp("bos") / "model"
    shutil.copytree(tiny_model, dst)
    tj = dst / "tokenizer.json"
    tok = json.loads(tj.read_text())
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
    }
    tj.write_text(json.dumps(tok))
    return dst


def test_loglikelihoods_agree_with_lm_eval_when_the_tokenizer_adds_bos(bos_model, tmp_path):
    common = dict(store=str(tmp_path / "s"), data_dir=str(tmp_path / "d"), limit=8, bootstrap_iters=0)
    d = run_lmeval(["auditkit_arith_mc"], bos_model, **common)[0]
    p = run_lmeval(["auditkit_arith_mc"], bos_model, engine="pipeline", **common)[0]
    sd, sp = _first_scores(_rows(d)), _first_scores(_rows(p))
    worst = max(
        abs(x[0] - y[0]) for sid in sd for x, y in zip(sd[sid][0]["metadata"]["resps"], sp[sid][0]["metadata"]["resps"])
    )
    assert worst < 1e-4, f"log-likelihoods differ by up to {worst:.3g}"
