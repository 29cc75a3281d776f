"""shields.io endpoint badges, and the terminal tables (coloured on a terminal, plain when piped)."""

import io
import json
import re

from auditkit_ray.core.result import load_run
from auditkit_ray.report.badge import badge
from auditkit_ray.report.terminal import format_run, format_sweep, print_run, print_sweep, use_color

ANSI = re.compile(r"\033\[[0-9;]*m")
SHIELDS_COLORS = {"brightgreen", "green", "yellowgreen", "yellow", "orange", "red", "blue", "lightgrey"}


def test_the_badge_has_the_shields_endpoint_fields(tmp_path, kit, report_of):
    run = kit.write_run(tmp_path, "r", accuracy=0.8, seed=1)
    b = badge(report_of(run))
    assert set(b) == {"schemaVersion", "label", "message", "color"}
    assert b["schemaVersion"] == 1 and b["label"] == "exact_match" and b["message"] == "80.0%"
    assert b["color"] in SHIELDS_COLORS and b["color"] == "green"
    assert json.loads(json.dumps(b)) == b


def test_the_badge_reads_direction_gates_and_a_chosen_metric(tmp_path, sweep_dir, kit, report_of):
    best = badge(report_of(sweep_dir))
    assert best["message"] == "90.0% (best of 6)" and best["color"] == "brightgreen"
    length = badge(report_of(sweep_dir, metrics=["output_length"]), label="words")
    assert length["label"] == "words" and length["color"] == "blue" and length["message"].startswith("8.2")
    run = kit.write_run(tmp_path, "r", accuracy=0.8, seed=1)
    gated = badge(report_of(run, fail_under={"exact_match": 0.9}))
    assert gated["color"] == "red" and gated["message"] == "80.0%"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_output_is_plain_when_piped_and_coloured_on_a_terminal(monkeypatch, sweep_runs):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    result = load_run(sweep_runs[5])
    piped, tty = io.StringIO(), _Tty()
    print_run(result, file=piped)
    print_run(result, file=tty)
    assert "\033[" not in piped.getvalue()
    assert "\033[" in tty.getvalue()
    assert ANSI.sub("", tty.getvalue()) == piped.getvalue()  # same table, columns aligned either way
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(_Tty())


def test_the_run_table_shows_direction_mean_interval_n_and_unscored_counts(sweep_runs):
    text = format_run(load_run(sweep_runs[5]))
    head, rule, *rows = text.splitlines()[1:5]
    assert head.split()[:5] == ["metric", "dir", "mean", "95%", "CI"] and "unscored (unknown/not_tested/error)" in head
    em = next(r for r in text.splitlines() if r.startswith("exact_match"))
    assert "↑" in em and "39" in em.split() and "1 (0/0/1)" in em  # one error is unscored, not a zero
    assert "↓" in next(r for r in text.splitlines() if r.startswith("output_length"))


def test_the_sweep_table_marks_the_best_run_per_metric_through_its_direction(sweep_runs):
    results = [load_run(p) for p in sweep_runs]
    text = format_sweep(results, title="pruning-grid")
    lines = text.splitlines()
    best = [ln for ln in lines if " * " in ln or ln.rstrip().endswith("*")]
    em_best = next(ln for ln in lines if "tiny/path=tiny-model/quantization=None" in ln and "exact_match" in ln)
    assert "0.9000 *" in em_best
    ol = lines.index(next(ln for ln in lines if ln.startswith("output_length")))
    ol_rows = lines[ol:ol + len(results)]
    starred = [ln for ln in ol_rows if re.search(r"\d \*", ln)]
    assert len(starred) == 1 and "tiny/path=tiny-model/quantization=None" in starred[0]  # the shortest output wins (↓)
    assert best
    tty = _Tty()
    print_sweep(results, file=tty, title="x")
    assert "\033[1;32m" in tty.getvalue()  # best marked green on a terminal
