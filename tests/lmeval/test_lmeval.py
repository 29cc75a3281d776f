"""The lm-evaluation-harness bridge, engine "lm_eval": the real
lm_eval.simple_evaluate on the repo's tasks over local data, mapped into
RunResults with per-sample tables."""

import json
import math
import os
import shutil
import subprocess
import sys

import pytest

from auditkit_ray.core.metric import Direction

pytest.importorskip("lm_eval", reason="the lm-eval bridge needs the 'lmeval' extra")

from auditkit_ray.api import samples_table  # noqa: E402
from auditkit_ray.lmeval import run_lmeval  # noqa: E402
from auditkit_ray.lmeval.support import TASKS_DIR, TaskOptions, load_tasks, task_identity  # noqa: E402

GEN, MC = "auditkit_arith_gen", "auditkit_arith_mc"


def _scores(result):
    """Per sample id: the scores of its first row (where a doc's scores sit)."""
    out = {}
    for row in samples_table(result).to_pylist():
        out.setdefault(row["sample_id"], {s["name"]: s for s in json.loads(row["scores"])})
    return out


def test_bundled_tasks_load_offline_from_any_directory_and_hash_their_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # data_files are relative to the YAML, not to the working directory
    loaded = load_tasks([GEN, MC], TaskOptions())
    assert loaded.local and set(loaded.tasks) == {GEN, MC}
    assert [len(t.eval_docs) for t in loaded.tasks.values()] == [24, 24]
    ident = task_identity(loaded.tasks[MC])
    assert ident["num_fewshot"] == 1 and ident["output_type"] == "multiple_choice" and str(ident["version"]) == "1.0"

    # the hash follows the content, not the location: two copies hash the same, one changed doc does not
    def copy(dst):
        shutil.copytree(TASKS_DIR, dst)
        for y in dst.glob("*.yaml"):  # the copies' tasks get their own names
            y.write_text(y.read_text().replace("task: auditkit_arith_", "task: copy_arith_"))
        return dst

    def ident_of(folder):
        return task_identity(load_tasks(["copy_arith_mc"], TaskOptions((str(folder),))).tasks["copy_arith_mc"])

    a, b = copy(tmp_path / "a"), copy(tmp_path / "b")
    assert ident_of(a) == ident_of(b)
    data = b / "data" / "arith_test.jsonl"
    lines = data.read_text().splitlines()
    lines[0] = lines[0].replace('"op": "', '"op": "x')
    data.write_text("\n".join(lines) + "\n")
    assert ident_of(b)["config_hash"] != ident_of(a)["config_hash"]
    # few-shot override follows simple_evaluate: a count replaces the YAML's
    assert task_identity(load_tasks([MC], TaskOptions(num_fewshot=0)).tasks[MC])["num_fewshot"] == 0


@pytest.mark.slow  # lm_eval itself on the tiny model (the module's direct runs)
def test_lm_eval_results_map_to_run_results_with_directions_stderr_nshot_and_version(direct_runs):
    gen, mc = direct_runs[GEN], direct_runs[MC]
    assert set(gen.metrics) == {"exact_match@strict-match", "exact_match@flexible-extract",
                                "abs_error@strict-match", "abs_error@flexible-extract"}
    assert set(mc.metrics) == {"acc", "acc_norm", "brier_score"}
    # directions from lm-eval's higher_is_better
    assert gen.metadata["lm_eval"]["higher_is_better"] == {"exact_match": True, "abs_error": False}
    assert gen.metrics["abs_error@strict-match"].direction is Direction.MINIMIZE
    assert gen.metrics["exact_match@strict-match"].direction is Direction.MAXIMIZE
    assert (mc.metrics["brier_score"].direction is Direction.MINIMIZE
            and mc.metrics["acc"].direction is Direction.MAXIMIZE)
    # numbers and stderr exactly as lm-eval reported them (results["results"][task])
    for run in (gen, mc):
        reported = run.metadata["lm_eval"]["results"]
        for name, m in run.metrics.items():
            metric, _, filt = name.partition("@")
            key = f"{metric},{filt or 'none'}"
            assert m.mean == reported[key], (name, m.mean, reported[key])
            se = reported[f"{metric}_stderr,{filt or 'none'}"]
            assert m.stderr == (None if se == "N/A" else se)
    assert mc.metrics["brier_score"].aggregation == "corpus" and mc.metrics["acc"].aggregation == "mean"
    assert gen.metadata["lm_eval"]["n_shot"] == 2 and mc.metadata["lm_eval"]["n_shot"] == 1
    assert str(mc.metadata["lm_eval"]["version"]) == "1.0" and mc.metadata["lm_eval"]["config"]["task"] == MC
    assert mc.metadata["lm_eval"]["lm_eval_version"]
    # provenance as for native runs: checkpoint hash, package version, seed, store layout
    assert mc.backend["checkpoint_hash"] and mc.package_version and mc.seed == 0
    assert f"/runs/{mc.fingerprint}/s24" in mc.samples_path.replace(os.sep, "/")
    assert gen.dataset_fingerprint != mc.dataset_fingerprint
    # the per-sample table: one row per lm-eval request, scores on a doc's first row
    rows = samples_table(mc).to_pylist()
    assert len(rows) == 96 and [r["choice"] for r in rows[:4]] == [0, 1, 2, 3]
    assert rows[0]["prompt"].endswith("Answer:") and rows[0]["text"].startswith(" ")  # target delimiter on the choice
    per = _scores(mc)
    assert len(per) == 24
    acc = [s["acc"]["value"] for s in per.values()]
    assert sum(acc) / len(acc) == mc.metrics["acc"].mean
    brier = next(iter(per.values()))["brier_score"]
    assert brier["status"] == "not_tested" and len(brier["metadata"]["lm_eval_item"][1]) == 4
    texts = [r["text"] for r in samples_table(gen).to_pylist()]
    assert len(texts) == 24 and all(isinstance(t, str) for t in texts)
    err = [s["abs_error@strict-match"]["value"] for s in _scores(gen).values()]
    assert math.isclose(sum(err) / 24, gen.metrics["abs_error@strict-match"].mean)


@pytest.mark.slow  # lm_eval itself on the tiny model (the module's direct runs)
def test_a_second_call_with_the_same_fingerprint_returns_the_stored_result_without_running_lm_eval(
        direct_runs, tiny_model, lmeval_store, monkeypatch):
    import lm_eval

    def boom(*a, **k):
        raise AssertionError("lm_eval.simple_evaluate ran")

    monkeypatch.setattr(lm_eval, "simple_evaluate", boom)
    again = run_lmeval([GEN, MC], tiny_model, store=str(lmeval_store), data_dir=str(lmeval_store / "data"))
    for first, second in zip((direct_runs[GEN], direct_runs[MC]), again):
        assert second.fingerprint == first.fingerprint
        assert {k: v.mean for k, v in second.metrics.items()} == {k: v.mean for k, v in first.metrics.items()}
    # the fingerprint covers the settings: another limit is another run (and would run lm_eval)
    with pytest.raises(AssertionError, match="simple_evaluate ran"):
        run_lmeval([MC], tiny_model, store=str(lmeval_store), limit=5)


@pytest.mark.slow  # lm_eval itself on the tiny model (the module's direct runs)
def test_compare_pairs_lm_eval_runs_per_sample_and_reads_their_directions(direct_runs, pruned_model, lmeval_store):
    from auditkit_ray.compare import compare

    base = direct_runs[MC]
    cand = run_lmeval([MC], pruned_model, store=str(lmeval_store))[0]
    assert cand.dataset_fingerprint == base.dataset_fingerprint and cand.fingerprint != base.fingerprint
    assert cand.metadata["provenance"]  # the pruned checkpoint says where it came from
    report = compare(base, cand, n_resamples=200)
    assert report.dataset_comparable
    acc = report.metrics["acc"]
    assert acc.comparable and acc.paired is not None and acc.paired.n_paired == 24
    assert acc.paired.test == "mcnemar exact" and acc.direction is Direction.MAXIMIZE
    assert acc.paired.same + acc.paired.better + acc.paired.worse == 24
    brier = report.metrics["brier_score"]
    assert brier.direction is Direction.MINIMIZE and brier.comparable
    # lower is better: a brier rise is a regression, a fall an improvement
    assert brier.improvement == pytest.approx(base.metrics["brier_score"].mean - cand.metrics["brier_score"].mean)
    # a run against itself pairs every sample and finds no difference
    self_cmp = compare(base, base, n_resamples=200).metrics["acc_norm"]
    assert self_cmp.paired.n_paired == 24 and self_cmp.paired.same == 24 and self_cmp.delta == 0


def test_lmeval_command_runs_a_task_and_prints_its_results(tiny_model, tmp_path, capsys):
    from auditkit_ray.cli import main

    rc = main(["lmeval", "--tasks", MC, "--model", str(tiny_model), "--limit", "4", "--store", str(tmp_path / "s"),
               "--no-index", "--json", "--bootstrap-iters", "0"])
    out = capsys.readouterr().out
    assert rc == 0
    runs = json.loads(out)
    assert len(runs) == 1 and runs[0]["metrics"]["acc"]["n"] == 4 and runs[0]["metadata"]["lm_eval"]["limit"] == 4
    assert runs[0]["metrics"]["acc"]["stderr"] is None  # no bootstrap, no stderr
    rc = main(["lmeval", "--tasks", "no_such_task", "--model", str(tiny_model), "--store", str(tmp_path / "s")])
    assert rc == 2 and "no_such_task" in capsys.readouterr().err


def test_the_console_script_prints_only_its_own_lines_on_stderr(tiny_model, tmp_path):
    """lm-eval's, transformers' and native libraries' own output (progress bars, log lines, a leak report
    at exit: about 35 lines) goes to the command's log file; stderr holds our one line naming it."""
    import re

    from console import console

    r = console("lmeval", "--tasks", MC, "--model", tiny_model, "--limit", "4", "--store", tmp_path / "s",
                "--no-index", "--bootstrap-iters", "0", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, f"{len(lines)} lines on stderr, ours is one:\n{r.stderr}"
    named = re.fullmatch(r"\(lm-eval's own output: (\S+)\)", lines[0])
    assert named, lines
    log = open(named.group(1), encoding="utf-8").read()
    assert "Running loglikelihood requests" in log  # lm-eval's progress bar, kept
    assert "acc" in r.stdout and "Running" not in r.stdout
    quiet = console("lmeval", "--tasks", MC, "--model", tiny_model, "--limit", "4", "--store", tmp_path / "s",
                    "--no-index", "--bootstrap-iters", "0", "--quiet", cwd=tmp_path, timeout=300)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


_NO_LM_EVAL = """
import sys
sys.modules["lm_eval"] = None  # as if the extra were not installed
from auditkit_ray.cli import main
sys.exit(main(["lmeval", "--tasks", "auditkit_arith_mc", "--model", "{model}"]))
"""


def test_without_the_extra_the_command_names_the_pip_install(tmp_path):
    out = subprocess.run([sys.executable, "-c", _NO_LM_EVAL.format(model=tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'auditkit-ray[lmeval]'" in lines[0], out.stderr
    assert out.stdout == ""


def test_the_bridge_modules_import_without_lm_eval_or_torch():
    code = ("import sys, auditkit_ray.lmeval, auditkit_ray.lmeval.metric, "
            "auditkit_ray.cli.lmeval;"
            "print(','.join(m for m in ('lm_eval', 'torch', 'datasets', 'ray', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
