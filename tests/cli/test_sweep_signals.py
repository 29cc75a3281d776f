"""A sweep stops at once on SIGINT or SIGTERM (issue 45): its running cell's pipeline is stopped rather than
waited for, and the one line says how many shards are stored and how to resume. The real console script, in
a subprocess. The latency is measured and printed (``-s``), not asserted: the behaviour is, as a cell of 12
shards of 0.6 s each that was not left to finish."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from console import EXE, check_clean_stderr


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_sweep_at_once_naming_the_stored_shards(sig, code, word, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i:02d}", "q": f"q{i}", "a": "x"}) + "\n" for i in range(24)))
    sim = {"type": "simulated", "fixed_cost_s": 0.6, "per_token_s": 0.0}
    store = tmp_path / "store"
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "night", "base": {
        "dataset": {"path": str(data), "input_field": "q", "target_field": "a"}, "metrics": ["exact_match"],
        "execution": {"shard_size": 2, "generation_actors": 1}, "store": {"path": str(store)},
        "tracking": {"index": False}},
        "runs": [{"name": "a", "model": sim}, {"name": "b", "model": {**sim, "tokens_per_output": 3}}]}))
    p = subprocess.Popen([EXE, "sweep", "sweep.json", "--quiet"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and p.poll() is None and not list(store.glob("runs/*/*/shard-*.parquet")):
        time.sleep(0.05)
    assert p.poll() is None, "the sweep ended before a shard was stored: " + p.stderr.read()
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    print(f"sweep {word}: exit {p.returncode} {time.monotonic() - t0:.2f}s after the signal")
    assert p.returncode == code, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert lines and lines[0].startswith(f"{word}: sweep night: "), err
    assert lines[0].endswith("cells done); run the same command again to resume from them"), lines[0]
    assert all(ln.startswith("(Ray and library log lines of this command: ") for ln in lines[1:]), err
    check_clean_stderr(err)
    stored = int(lines[0].split(": ")[2].split(" of ")[0])
    assert lines[0].split(": ")[2].startswith(f"{stored} of 24 shards are stored (0 of 2 cells done)"), lines[0]
    # the running cell was stopped, not waited for: it had 12 shards to go through
    assert 1 <= stored < 12, lines[0]
    assert stored == len(list(store.glob("runs/*/*/shard-*.parquet")))
    (manifest,) = store.glob("sweeps/*/manifest.json")
    doc = json.loads(manifest.read_text())
    assert doc["state"] == "interrupted" and sorted(c["state"] for c in doc["cells"]) == ["interrupted", "queued"]
