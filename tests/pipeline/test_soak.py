"""Soak: 100k samples (5 consecutive runs of 20k in one driver process)
through the echo backend with every deterministic metric on 2 CPUs. Memory
stays bounded (the peak RSS after the fifth run is about that after the
first: nothing accumulates from run to run), and no file descriptors or
actors leak. The figures are printed; no timing is asserted."""

import json
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1] / "support"


def test_soak_100k_samples_memory_bounded_no_leaked_files_or_actors(tmp_path):
    out = subprocess.run([sys.executable, str(SUPPORT / "soak_run.py"), "100000", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"soak figures: {figures}")
    first, last = figures["run1"], figures["run5"]
    assert sum(f["n"] for f in figures.values()) == 100000
    assert last["peak_rss_mb"] < 1.2 * first["peak_rss_mb"], figures  # no growth from run to run
    assert last["open_fds"] <= first["open_fds"] + 8, figures
    assert all(f["free_cpus"] == 2.0 for f in figures.values()), figures  # every actor released after each run
