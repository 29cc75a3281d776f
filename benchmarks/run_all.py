#!/usr/bin/env python
"""Run every benchmark, one after the other, in the same mode.

    python benchmarks/run_all.py [--smoke | --quick | --full] [--only generation,scaling] [--json-dir DIR]

Each benchmark runs as its own process (so each starts its own Ray) and its
figure lines (``name: value unit``) are passed through to stdout; its
progress notes go to stderr. ``--json-dir`` keeps one JSON file of figures
and settings per benchmark. The exit status is the first non-zero one.

Adding a workload: write ``benchmarks/bench_<name>.py`` with ``--smoke``,
``--quick``, ``--full`` and ``--json`` (see ``_common.parser``), and add it
to ``BENCHMARKS`` below; the smoke test picks it up from there.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH, PY, ROOT, note, parser, print_machine  # noqa: E402

#: name -> script, in the order they run. The vLLM systems of workload 1
#: run with ``bench_generation.py --backend vllm`` (not part of run_all).
BENCHMARKS = {
    "generation": "bench_generation.py",
    "scaling": "bench_scaling.py",
    "overlap": "bench_overlap.py",
    "scoring_overhead": "bench_scoring_overhead.py",
    "resume": "bench_resume.py",
    "compare": "bench_compare.py",
    "api": "bench_api.py",
    "store_reads": "bench_store_reads.py",
    "plan": "bench_plan.py",
    "sweep_schedule": "bench_sweep_schedule.py",
    "vllm_raydata": "bench_vllm_raydata.py",
    "gpu": "bench_gpu.py",
    "startup": "bench_startup.py",
    "signals": "bench_signals.py",
    "noninferiority": "bench_noninferiority.py",
    "validate": "bench_validate.py",
    "scale": "bench_scale.py",
}


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated subset of: " + ", ".join(BENCHMARKS))
    ap.add_argument("--json-dir", help="write <name>.json per benchmark here")
    a = ap.parse_args(argv)
    names = a.only.split(",") if a.only else list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(unknown)}")
    print_machine()
    rc = 0
    for name in names:
        cmd = [PY, str(BENCH / BENCHMARKS[name]), f"--{a.mode}"]
        if a.json_dir:
            cmd += ["--json", str(Path(a.json_dir) / f"{name}.json")]
        note(f"== {name}: {' '.join(Path(c).name if i < 2 else c for i, c in enumerate(cmd))}")
        t0 = time.perf_counter()
        code = subprocess.run(cmd, cwd=str(ROOT)).returncode
        note(f"== {name}: exit {code} after {time.perf_counter() - t0:.0f} s")
        rc = rc or code
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
