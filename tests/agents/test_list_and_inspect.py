"""``auditkit-ray list`` and ``auditkit-ray inspect`` on the repo's agent example, through the console script
in a subprocess as a user runs them: content checked, ``--json`` parsed back."""

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("auditkit-ray"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
TRACE, TOOLS = str(EXAMPLES / "trace.jsonl"), str(EXAMPLES / "tools.jsonl")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "NO_COLOR": "1"})


def test_the_example_trace_is_what_the_scripted_agent_records(scripted):
    lines = [ln for c in scripted.RECORDED for ln in scripted.record(c)]
    assert Path(TRACE).read_text().splitlines() == lines, "run python examples/agents/scripted_agent.py --record"


def test_list_names_every_kind_with_direction_requirements_and_extra_and_json_parses_back():
    p = cli("list", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    by = {(r["kind"], r["name"]): r for r in rows}
    assert {r["kind"] for r in rows} == {"backend", "metric", "annotator", "judge", "oracle"}
    assert by[("backend", "hf")]["requires"] == ["path"] and by[("backend", "hf")]["extra"] == "hf"
    assert by[("backend", "agent")]["extra"] is None and ("backend", "command") in by
    assert by[("metric", "tool_call_match")]["requires"] == ["reference_tool_calls"]
    assert by[("metric", "tool_call_match")]["direction"] == "maximize"
    assert by[("metric", "loop_frequency")]["direction"] == "minimize"
    assert by[("metric", "bleu")]["extra"] == "metrics" and by[("metric", "exact_match")]["extra"] is None
    assert by[("judge", "g_eval")]["extra"] == "judges" and ("metric", "g_eval") not in by
    assert by[("oracle", "final_state")]["requires"] == ["expected_state"]
    assert by[("annotator", "regex")]["requires"] == ["name", "pattern"]

    only = cli("list", "oracles")
    assert only.returncode == 0 and "oracles:" in only.stdout and "final_state" in only.stdout
    assert "metrics:" not in only.stdout and "exact_match" not in only.stdout
    same = json.loads(cli("list", "--kind", "oracle", "--json").stdout)
    assert [r["name"] for r in same] == sorted(n for k, n in by if k == "oracle")
    bad = cli("list", "widgets")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown kind 'widgets'" in bad.stderr


def test_inspect_shows_parallel_and_sequential_calls_eligible_metrics_what_is_missing_and_oracle_needs(tmp_path):
    p = cli("inspect", TRACE, "--dataset", TOOLS, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert list(tmp_path.iterdir()) == []  # read-only: nothing written
    eps = {e["id"]: e for e in json.loads(p.stdout)["episodes"]}
    tokyo, flight = eps["parallel-multiple-tokyo"], eps["sequential-flight"]
    assert [c["name"] for c in tokyo["turns"][0]["calls"]] == ["get_weather", "get_time"]
    assert tokyo["turns"][0]["parallel"] and tokyo["parallel_turns"] == 1 and tokyo["n_turns"] == 1
    assert [[c["name"] for c in t["calls"]] for t in flight["turns"]] == [["search_flights"], ["book_flight"]]
    assert flight["parallel_turns"] == 0 and "sequential across turns" in flight["structure"]

    ok = {m["name"]: m for m in flight["eligible"]}
    no = {m["name"]: m for m in flight["not_eligible"]}
    assert ok["tool_call_match"]["value"] == 1.0 and ok["final_state"]["value"] == 1.0
    assert "judge" in ok["g_eval"]["note"] and ok["g_eval"].get("value") is None  # listed, never called
    assert no["hit_rate_at_k"]["missing"] == ["retrieved_contexts"]
    assert "judge verdict" in no["judge_assertion"]["reason"]
    # the Tokyo case has no expected state: the state oracle is not ready, and says why
    tokyo_no = {m["name"]: m for m in tokyo["not_eligible"]}
    assert tokyo_no["final_state"]["missing"] == ["expected_state"]
    oracles = {o["name"]: o for o in tokyo["oracles"]}
    assert not oracles["final_state"]["eligible"] and "sample.expected_state" in oracles["final_state"]["needs"]
    assert oracles["answer_check"]["eligible"]

    # without the samples, every reference-based metric lacks its reference
    bare = json.loads(cli("inspect", TRACE, "--episode", "sequential-flight", "--metric", "tool_call_match",
                          "--metric", "redundancy_ratio", "--json").stdout)["episodes"]
    assert [e["id"] for e in bare] == ["sequential-flight"]
    assert [m["missing"] for m in bare[0]["not_eligible"]] == [["reference_tool_calls"]]
    assert [m["name"] for m in bare[0]["eligible"]] == ["redundancy_ratio"]

    text = cli("inspect", TRACE, "--dataset", TOOLS).stdout
    assert "turn 0 (parallel):" in text and "search_flights" in text and "not eligible" in text
    assert "final_state: needs sample.expected_state" in text

    missing = cli("inspect", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no such trace file" in missing.stderr
