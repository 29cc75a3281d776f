"""Every benchmark's ``--smoke`` mode runs, exits 0 and prints its figure lines.

A smoke run measures nothing meaningful and nothing here asserts a speed:
this keeps the scripts in ``benchmarks/`` from rotting as the package moves.
Each test runs its own benchmark's smoke mode (most of its time is process
and Ray start-up, not computation), so each has its own time limit and
pytest-xdist spreads them over its workers (``make test`` runs with ``-n``);
the generation benchmark shares ``benchmarks/.cache/bench-model-smoke`` with
tests/benchmarks/test_vllm_peers.py and runs in that file's group
(``xdist_group_of`` in tests/conftest.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
TIMEOUT_S = 560  # under pytest-timeout's 600 s per test: a loaded host can take minutes for vLLM's start
FIGURE = re.compile(r"^[A-Za-z0-9_.\-]+: \S.*$")

pytestmark = pytest.mark.slow


def _registry() -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("_bench_run_all", BENCH / "run_all.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]  (its _common: benchmarks is on pytest's pythonpath)
    return dict(mod.BENCHMARKS)


BENCHMARKS = _registry()

#: figures each smoke run must print (a system that cannot run here prints
#: ``<name>: skipped (...)`` instead, which also matches)
EXPECTED = {
    "generation": ["gen.plain-hf", "gen.auditkit-hf", "gen.lm_eval-hf", "gen.plain-hf.time_to_first_token",
                   "gen.auditkit-hf.time_to_first_token"],
    "scaling": ["scaling.ray_start", "scaling.n1.wall", "scaling.n2.wall", "scaling.n2.driver_rss_peak",
                "goal.efficiency_ge_0.9_up_to_16", "goal.driver_rss_flat"],
    "overlap": ["overlap.generate_only", "overlap.judge_only", "overlap.overlapped",
                "overlap.ratio.overlapped_vs_slower_stage", "goal.overlapped_le_1.15x_slower_stage"],
    "scoring_overhead": ["scoring.ray_start", "scoring.auditkit.throughput", "scoring.loop.throughput",
                         "scoring.ratio.auditkit_vs_loop", "scoring.means_match_loop", "scoring.stage.generate_cpu",
                         "scoring.stage.score_cpu", "goal.ge_1.5x_loop_excluding_ray_start"],
    "resume": ["resume.interrupted.calls", "resume.resumed.calls", "resume.uninterrupted.calls",
               "resume.repeated.samples", "resume.results_match_uninterrupted", "goal.repeated_le_one_shard"],
    "plan": ["plan.driver_alone", "plan.in_tasks", "plan.same_plan", "plan.sweep.separately", "plan.sweep.shared",
             "plan.sweep.shared.rows_held"],
    "compare": ["compare.auditkit.merge", "compare.auditkit.leaderboard", "compare.auditkit.peak_rss",
                "compare.pandas.total", "compare.ratio.total.auditkit_vs_pandas", "compare.rankings_match_pandas"],
    "api": ["api.ray_start", "api.client.rps", "api.auditkit.rps", "api.auditkit.window.rps",
            "api.ratio.auditkit_vs_client", "goal.ge_0.8x_client"],
    "sweep_schedule": ["schedule.fifo.makespan", "schedule.pack.makespan", "schedule.pack.ratio",
                       "schedule.pack.gpu_occupancy", "schedule.ratio.fifo_vs_pack", "goal.pack_le_1.15x_lower_bound"],
    "store_reads": ["store_reads.latency0ms.merge.prefetch1", "store_reads.latency20ms.merge.prefetch8",
                    "store_reads.latency20ms.ratio", "store_reads.summaries_match"],
    "vllm_raydata": ["w8.plain", "w8.raydata", "w8.auditkit-continuous", "goal.vllm_backend_ge_1.0x_raydata",
                     "goal.vllm_backend_ge_1.0x_plain"],
    "gpu": ["gpu.plain.prompts_per_s", "gpu.auditkit.prompts_per_s", "gpu.auditkit.tokens_per_s",
            "gpu.ratio.auditkit_vs_plain", "gpu.fixed_length_held", "gpu.bytes_per_decode_step.weights"],
    "startup": ["startup.plain.wall", "startup.cli-cold.wall", "startup.cli-resident.wall",
                "startup.cli-warm-fresh.wall", "startup.ratio.cli-resident_vs_plain",
                "startup.first_token_gap.cli-cold", "startup.idle_cluster.memory",
                "goal.resident_other_folder_le_0.5x_plain"],
    "signals": ["signals.run-private.SIGINT.stop", "signals.run-private.SIGTERM.stop",
                "signals.ratio.run-private.term_vs_int", "goal.term_le_1.5x_int"],
    "noninferiority": ["ni.tango", "ni.wald", "ni.t", "ni.bootstrap-t", "goal.tango_within_0.01_in_its_region",
                       "goal.tango_never_above_alpha_plus_0.01", "goal.bootstrap_t_within_0.01_from_n_100"],
    "validate": ["validate.run_file.cpu", "validate.grid500.cpu", "validate.grid5000.per_run",
                 "validate.ratio.per_run", "validate.grid5000_bad_cell.one_line_naming_the_cell",
                 "goal.per_run_linear"],
    "scale": ["scale.auditkit.n2000.run", "scale.auditkit.n20000.compare", "scale.auditkit.n20000.leaderboard",
              "scale.ratio.run.peak_rss", "scale.resume.n20000.generated_again", "scale.resume.n20000.merge.ratio",
              "goal.run_peak_le_1.5x_smallest", "goal.resume_regenerates_le_one_shard_per_actor"],
}


def _needs() -> str | None:
    for mod, extra in (("ray", "ray"), ("pyarrow", "ray"), ("psutil", "bench"), ("pandas", "dev")):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (pip install -e '.[{extra}]')"
    return None


def run_smoke(name: str, out_dir: Path) -> dict:
    """``benchmarks/<name's script> --smoke --json``: its exit status, output, JSON file and wall time."""
    why = _needs()
    if why:
        pytest.skip(why)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONUNBUFFERED": "1"}
    js = out_dir / f"{name}.json"
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(BENCH / BENCHMARKS[name]), "--smoke", "--json", str(js)],
                              cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, stdout, stderr = -1, exc.stdout or "", f"timed out after {TIMEOUT_S} s\n{exc.stderr or ''}"
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "json": js, "s": time.perf_counter() - t0}


def test_every_benchmark_has_expectations():
    assert sorted(BENCHMARKS) == sorted(EXPECTED), "add the new benchmark's figures to EXPECTED"
    for script in BENCHMARKS.values():
        assert (BENCH / script).is_file()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_smoke_mode_prints_its_figures(tmp_path, name):
    r = run_smoke(name, tmp_path)
    tail = "\n".join(r["stderr"].strip().splitlines()[-20:])
    assert r["rc"] == 0, f"{name} --smoke exited {r['rc']} after {r['s']:.0f} s:\n{tail}"
    lines = [ln for ln in r["stdout"].splitlines() if ln.strip()]
    assert lines, f"{name} --smoke printed no figures:\n{tail}"
    bad = [ln for ln in lines if not FIGURE.match(ln)]
    assert not bad, f"{name}: stdout lines that are not 'name: value unit': {bad}"
    names = {ln.split(": ", 1)[0] for ln in lines}
    for want in EXPECTED[name]:
        assert any(n == want or n.startswith(want + ".") for n in names), (
            f"{name}: no figure {want!r} in {sorted(names)}"
        )
    data = json.loads(Path(r["json"]).read_text())
    assert data["mode"] == "smoke" and data["figures"] and data["machine"]["cpus"]
