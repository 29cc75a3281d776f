"""The CLI over a real local Ray: run, generate then rescore, runs list/query/
show/sync, sweep --dry-run, and provenance from a pruned checkpoint."""

import json

import pytest
import yaml

from auditkit_ray.cli import main

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")


def _file(tmp_path, name, spec):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True)))
    return p


def test_generate_then_rescore_applies_new_metrics_without_generating(make_spec, tmp_path, capsys):
    spec = make_spec(model={"type": "simulated", "output": "prompt", "fixed_cost_s": 0.0})
    assert main(["generate", str(_file(tmp_path, "run.yaml", spec)), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "stored 40 outputs" in out
    run_dir = out.split("auditkit-ray rescore ")[1].split()[0]
    assert main(["rescore", run_dir, "--metric", "contains", "--metric", "output_length", "--json", "--quiet"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert (
        set(res["metrics"]) == {"contains", "output_length"} and res["perf"]["generated"] == 0
        and res["perf"]["rescored"] == 40
    )  # read, not generated
    assert res["backend"]["backend"] == "precomputed" and res["metrics"]["contains"]["n"] == 40


def test_runs_list_query_show_and_sync(make_spec, tmp_path, capsys):
    db = str(tmp_path / "idx.sqlite")
    spec = make_spec(tracking={"db": db}, experiment={"name": "x", "tags": {"team": "red"}})
    assert main(["run", str(_file(tmp_path, "run.yaml", spec)), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--db", db, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["metrics"]["exact_match"]["mean"] == 1.0
    assert main(["runs", "query", "--db", db, "--metric", "exact_match>0.99", "--tag", "team=red"]) == 0
    assert rows[0]["fingerprint"][:12] in capsys.readouterr().out
    assert main(["runs", "query", "--db", db, "--metric", "exact_match<0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["runs", "show", rows[0]["fingerprint"][:8], "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["model"]["type"] == "simulated"
    db2 = str(tmp_path / "idx2.sqlite")
    assert main(["runs", "sync", "--db", db2, "--store", str(tmp_path / "store")]) == 0
    assert "indexed 1 runs" in capsys.readouterr().out
    assert main(["runs", "query", "--db", db, "--metric", "exact_match>>1"]) == 2


def test_sweep_dry_run_prints_the_plan_without_running(make_spec, tmp_path, capsys, arith):
    sweep = {
        "name": "dry",
        "base": make_spec().model_dump(mode="json", by_alias=True),
        "grid": {"seed": [0, 1], "model.per_token_s": [0.0, 0.001]},
    }
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump(sweep))
    assert main(["sweep", str(p), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 runs in 2 model cells" in out and out.count("shards 0/5 todo") == 4
    assert not (tmp_path / "store" / "runs").exists(), "a dry run writes no shards"


def test_provenance_of_a_pruned_checkpoint_reaches_metadata_and_fingerprint(make_spec, tiny_grid):
    from auditkit_ray.api import evaluate
    from auditkit_ray.pipeline.identity import run_fingerprint

    hf = {"type": "hf", "path": str(tiny_grid["p50"]), "batch_size": 8}
    spec = make_spec(model=hf, generation={"max_new_tokens": 2}, dataset={"limit": 8})
    res = evaluate(spec)
    assert res.metadata["provenance"]["transform"]["amount"] == 0.5
    base = make_spec(
        model={**hf, "path": str(tiny_grid["p25"])}, generation={"max_new_tokens": 2}, dataset={"limit": 8}
    )
    assert run_fingerprint(base) != res.fingerprint


def test_sweep_prints_one_leaderboard_and_writes_the_html_report(make_spec, tmp_path, capsys):
    sweep = {"name": "rep", "base": make_spec().model_dump(mode="json", by_alias=True),
             "grid": {"model.output": ["target", "prompt"]}}
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump(sweep))
    html = tmp_path / "out" / "report.html"
    assert main(["sweep", str(p), "--quiet", "--report", str(html)]) == 0
    out = capsys.readouterr().out
    assert "2 runs" in out and "exact_match" in out and f"HTML report: {html}" in out
    text = html.read_text()
    assert "<html" in text.lower() and "t/output=prompt" in text and "http://" not in text and "https://" not in text
