"""`auditkit-ray report` and `auditkit-ray init` from the command line."""

import json
import os
import subprocess
import sys

import pytest

from auditkit_ray.cli import main

FAST = ["--resamples", "200"]


@pytest.mark.parametrize("fmt,check", [
    ("md", lambda t: t.startswith("## ✅ auditkit-ray report: pruning-grid") and "| # | run |" in t),
    ("junit", lambda t: t.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites')),
    ("html", lambda t: t.startswith("<!DOCTYPE html>") and t.rstrip().endswith("</html>")),
    ("json", lambda t: json.loads(t)["format"] == "auditkit-ray-report" and len(json.loads(t)["runs"]) == 6),
    ("badge", lambda t: json.loads(t)["schemaVersion"] == 1),
    ("text", lambda t: t.startswith("pruning-grid  6 runs") and "\033[" not in t),
])
def test_report_writes_each_format_to_a_file(sweep_dir, tmp_path, capsys, fmt, check):
    out = tmp_path / f"report.{fmt}"
    assert main(["report", str(sweep_dir), "--format", fmt, "--output", str(out), *FAST]) == 0
    assert check(out.read_text(encoding="utf-8"))
    assert f"wrote {out}" in capsys.readouterr().err


def test_report_prints_to_stdout_and_reads_run_directories(sweep_runs, capsys):
    assert main(["report", str(sweep_runs[0]), str(sweep_runs[2] / "result.json"), "-f", "md", *FAST]) == 0
    out = capsys.readouterr().out
    assert "2 run(s)" in out and "tiny/path=tiny-model-p50/quantization=None" in out


def test_a_failing_gate_exits_1_after_writing_the_report(sweep_dir, tmp_path, capsys):
    out = tmp_path / "junit.xml"
    rc = main(["report", str(sweep_dir), "-f", "junit", "-o", str(out), "--fail-under", "exact_match=0.7", *FAST])
    err = capsys.readouterr().err
    assert rc == 1 and out.exists() and "gate(s) failed" in err and "is under 0.7" in err


def test_a_baseline_given_by_name_drives_regressions_and_max_regression(sweep_dir, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(
        [
            "report",
            str(sweep_dir),
            "-f",
            "json",
            "-o",
            str(out),
            "--baseline",
            "tiny/path=tiny-model/quantization=None",
            "--max-regression",
            "exact_match=20%",
            *FAST,
        ]
    )
    doc = json.loads(out.read_text())
    assert rc == 1 and doc["baseline"] == "tiny/path=tiny-model/quantization=None"
    assert doc["regressions"][0]["grade"] == "fail" and not doc["ok"]
    assert {f.split(":")[0] for f in doc["failures"]} == {"tiny/path=tiny-model-p50/quantization=None",
                                                          "tiny/path=tiny-model-p50/quantization=int8-dynamic"}


@pytest.mark.parametrize("argv,needle", [
    (["report", "/nonexistent/run"], "no such run"),
    (["report", "{sweep}", "--baseline", "nobody"], "--baseline 'nobody'"),
    (["report", "{sweep}", "--metric", "bleu"], "bleu"),
    (["report", "{sweep}", "--fail-under", "output_length=3"], "use --fail-over output_length=VALUE"),
    (["report", "{sweep}", "--format", "pdf"], "invalid choice"),
])
def test_report_usage_errors_exit_2_with_one_line(sweep_dir, capsys, argv, needle):
    argv = [a.replace("{sweep}", str(sweep_dir)) for a in argv]
    assert main(argv + FAST) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_init_writes_files_that_validate_and_refuses_to_overwrite(tmp_path, capsys, monkeypatch):
    from auditkit_ray.config import RunSpec, SweepSpec, expand, load_config

    d = tmp_path / "proj"
    assert main(["init", str(d)]) == 0
    out = capsys.readouterr().out
    assert f"cd {d} && auditkit-ray run run.yaml" in out
    monkeypatch.chdir(d)
    run, sweep = load_config("run.yaml"), load_config("sweep.yaml")
    assert isinstance(run, RunSpec) and run.model.type == "echo"
    assert isinstance(sweep, SweepSpec) and [r.name for r in expand(sweep)] == [
        "starter/field=target",
        "starter/field=prompt",
    ]
    rows = [json.loads(line) for line in (d / run.dataset.path).read_text().splitlines()]
    assert len(rows) == 8 and all({"id", "question", "answer"} <= set(r) for r in rows)
    assert main(["validate", "run.yaml"]) == 0 and main(["validate", "sweep.yaml"]) == 0
    assert main(["init", str(d)]) == 2
    assert "already exist; pass --force" in capsys.readouterr().err
    assert main(["init", str(d), "--force"]) == 0


def test_init_output_runs_end_to_end_and_reports(tmp_path):
    """init -> `auditkit-ray run` and `auditkit-ray sweep` on a real local Ray (echo backend, no model) -> report."""
    pytest.importorskip("ray", reason="running the starter needs the 'ray' extra (make test installs it)")
    d = tmp_path / "proj"
    assert main(["init", str(d)]) == 0
    env = {**os.environ, "AUDITKIT_RAY_DB": str(tmp_path / "db.sqlite"), "RAY_ADDRESS": ""}
    code = ("import sys; from auditkit_ray.cli import main; "
            "rc = main(['run', 'run.yaml', '--json']) or main(['sweep', 'sweep.yaml', '--quiet']); sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code], cwd=d, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    start = out.stdout.index("{")
    result, _ = json.JSONDecoder().raw_decode(out.stdout[start:])
    m = result["metrics"]
    # the echo backend answers "The answer is <target>": the raw output never matches, the extracted number always does
    assert m["exact_match"]["mean"] == 0.0 and m["exact_match@number"]["mean"] == 1.0 and m["exact_match"]["n"] == 8
    [sweep] = list((d / "results" / "sweeps").iterdir())
    report = tmp_path / "report.md"
    assert main(["report", str(sweep), "-f", "md", "-o", str(report), "--baseline", "starter/field=target", *FAST]) == 0
    md = report.read_text()
    assert "starter/field=prompt" in md and "### Regressions vs starter/field=target" in md
