"""Markdown for pull requests renders as GitHub tables (parsed with markdown-it-py)."""

import pytest
from markdown_it import MarkdownIt

from auditkit_ray.report.markdown import format_markdown


def _md() -> MarkdownIt:
    # GitHub-flavoured tables on top of CommonMark (raw HTML allowed, as on GitHub)
    return MarkdownIt("commonmark").enable("table")


def _text(inline) -> str:
    return "".join(c.content for c in (inline.children or []) if c.type in ("text", "code_inline")).strip()


def tables(md: str) -> list[dict]:
    """Every table: header cells, body rows (rendered text) and whether a cell is bold."""
    out, cur, row, section = [], None, None, None
    for tok in _md().parse(md):
        if tok.type == "table_open":
            cur = {"head": [], "rows": [], "bold": []}
        elif tok.type in ("thead_open", "tbody_open"):
            section = tok.type[:5]
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "inline" and cur is not None and row is not None:
            row.append(_text(tok))
            if section == "tbody":
                cur["bold"].append(any(c.type == "strong_open" for c in tok.children or []))
        elif tok.type == "tr_close":
            (cur["head"] if section == "thead" else cur["rows"]).append(row)
            row = None
        elif tok.type == "table_close":
            cur["head"] = cur["head"][0]
            out.append(cur)
            cur = None
    return out


def test_the_leaderboard_renders_as_a_github_table_ranked_with_intervals_and_marks(sweep_dir, report_of, kit):
    md = format_markdown(report_of(sweep_dir))
    board = next(t for t in tables(md) if t["head"][:2] == ["#", "run"])
    assert board["head"][2:] == ["exact_match ↑", "token_f1 ↑", "output_length ↓", "n"]
    assert len(board["rows"]) == len(kit.GRID)
    assert all(len(r) == len(board["head"]) for r in board["rows"])
    means = [float(r[2].split()[0]) for r in board["rows"]]
    assert means == sorted(means, reverse=True)  # ranked by the first metric, higher is better
    assert board["rows"][0][1] == "tiny/path=tiny-model/quantization=None" and board["rows"][0][0] == "1"
    assert "[" in board["rows"][0][2] and "]" in board["rows"][0][2]  # the interval
    assert board["bold"][2]  # the best mean is bold
    assert board["rows"][-1][2].endswith("†")  # the 50%-pruned int8 run is significantly worse than the best
    assert "### Regressions" not in md  # no baseline, no regressions section


def test_with_a_baseline_regressions_come_first_worst_first(sweep_dir, sweep_runs, report_of):
    md = format_markdown(report_of(sweep_dir, baseline=str(sweep_runs[0])))
    assert md.index("### Regressions vs") < md.index("### Leaderboard")
    regs = tables(md)[0]
    assert regs["head"][:2] == ["run", "metric"]
    grades = [r[8] for r in regs["rows"]]
    order = {"❌ fail": 0, "⚠️ warn": 1, "n.s.": 2, "not comparable": 3, "pass": 4}
    assert grades == sorted(grades, key=order.__getitem__) and grades[0] == "❌ fail"
    first = regs["rows"][0]
    assert first[0] == "tiny/path=tiny-model-p50/quantization=int8-dynamic" and first[1] in ("exact_match", "token_f1")
    assert "tiny/path=tiny-model/quantization=None" not in [
        r[0] for r in regs["rows"]
    ]  # the baseline itself is not listed
    assert "▼" in md and "Newly wrong samples" in md


def test_gates_are_listed_failed_first(sweep_dir, report_of):
    md = format_markdown(report_of(sweep_dir, fail_under={"exact_match": 0.7}))
    gates = next(t for t in tables(md) if t["head"][0] == "result")
    results = [r[0] for r in gates["rows"]]
    assert results[:2] == ["❌ FAIL", "❌ FAIL"] and results[2:] == ["✅ ok"] * 4
    assert md.startswith("## ❌")


def test_a_hostile_run_name_cannot_break_a_table_or_inject_html(tmp_path, kit, report_of):
    evil = "evil|run <script>alert(1)</script> *x* _y_ [z](http://e)"
    a = kit.write_run(tmp_path, "plain", accuracy=0.8, seed=1)
    b = kit.write_run(tmp_path, evil, accuracy=0.7, seed=2)
    md = format_markdown(report_of(a, b))
    for t in tables(md):
        assert all(len(r) == len(t["head"]) for r in t["rows"]), t
    board = next(t for t in tables(md) if t["head"][:2] == ["#", "run"])
    assert evil in [r[1] for r in board["rows"]]  # shown literally
    html = _md().render(md)
    assert "<script>" not in html and "&lt;script&gt;" in html and 'href="http://e"' not in html


@pytest.mark.parametrize("metric", ["token_f1", "output_length"])
def test_metric_selection_ranks_by_the_first_chosen_metric_through_its_direction(sweep_dir, report_of, metric):
    md = format_markdown(report_of(sweep_dir, metrics=[metric]))
    board = next(t for t in tables(md) if t["head"][:2] == ["#", "run"])
    assert board["head"][2:] == [f"{metric} {'↑' if metric == 'token_f1' else '↓'}", "n"]
    means = [float(r[2].split()[0]) for r in board["rows"]]
    assert means == sorted(means, reverse=metric == "token_f1")
