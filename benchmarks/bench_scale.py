#!/usr/bin/env python
"""Workload 13 (issue 53): ten million samples on one head node, in bounded memory.

    python benchmarks/bench_scale.py [--smoke | --quick | --full] [--baseline-src DIR] [--resume-size N]
                                     [--png FILE] [--json FILE]

Sizes: smoke 2k and 20k samples; quick 100k and 1M; full 100k, 1M and 10M. Each size is a ``simulated`` run
(no model cost: the pipeline, the driver and the store are what is measured) through the console script,
``auditkit-ray run`` on a private local cluster (``AUDITKIT_RAY_WARM=0``), ``exact_match`` and ``token_f1``,
2 generation actors, shards of 5,000 samples (smoke: 500); then ``auditkit-ray compare`` and
``auditkit-ray leaderboard`` of that run against itself loaded twice (two full reads of the per-sample table;
identical outputs, so no resampling runs: the figures are the reading and pairing). Each command's peak RSS is
its process tree's, as ``/usr/bin/time -v`` reports it (``os.wait4``).

Resume (``--resume-size``, default the largest size): the same run into a fresh store, killed (SIGKILL to its
process group) once 90% of its shards are stored, then run again. Figures: the shards whose outputs were stored
at the kill, the shards the second run generated, those it generated again though their outputs were stored
(goal 0; at most one shard per actor may have been lost in flight, and is generated once, by the second run),
and the merge of the resumed run (90% of its shard tallies read from the shards' footers) against the merge of
the same run from the tallies its actors would have sent (in memory), timed in this process.

Baseline (``--baseline-src DIR``: a checkout of the code before, e.g. ``git archive <commit> auditkit_ray``
unpacked in DIR): the run, compare and leaderboard at every size but the largest of full mode, with that code
first on ``PYTHONPATH``, in the same invocation, on the same data.

Figures: per size and command, wall time, samples/s (the run's) and peak RSS; ratios of the largest size's
peak to the smallest's; the resume figures; a PNG of peak RSS against samples (``--png``, default
``benchmarks/scale_memory.png``) when matplotlib is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CLI, ROOT, Recorder, note, parser, print_machine, rmtree, with_tmpdir  # noqa: E402

MiB = 1024 * 1024
SIZES = {"smoke": [2_000, 20_000], "quick": [100_000, 1_000_000], "full": [100_000, 1_000_000, 10_000_000]}
SHARD = {"smoke": 500, "quick": 5_000, "full": 5_000}


def write_data(path: Path, n: int) -> Path:
    """``n`` arithmetic questions (``What is A plus B?``), JSON Lines, written a line at a time."""
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for i in range(n):
            a, b = (i * 7919) % 100, (i * 104729) % 100
            f.write(f'{{"id": "q{i:08d}", "question": "What is {a} plus {b}?", "answer": "{a + b}"}}\n')
    os.replace(tmp, path)
    return path


def run_file(path: Path, data: Path, store: Path, n: int, shard: int, per_shard_s: float = 0.0) -> Path:
    spec = {"name": f"scale-{n}",
            "model": {"type": "simulated", "fixed_cost_s": per_shard_s, "per_token_s": 0.0, "gpu": False,
                      "batch_size": shard},
            "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
            "prompt": {"template": "{{ question }} Answer:"},
            "metrics": ["exact_match", "token_f1"],
            "execution": {"shard_size": shard, "generation_actors": 2},
            "store": {"path": str(store)},
            "tracking": {"index": False}}
    path.write_text(json.dumps(spec))
    return path


def command_rss(args: list[str], src: str | None = None, on_start: Any = None) -> dict[str, Any]:
    """Run the console script (``src`` first on ``PYTHONPATH``); its exit status, wall time, output and peak RSS
    (its process tree's, as ``/usr/bin/time -v`` reports it: ``os.wait4`` on the child)."""
    env = {**os.environ, "AUDITKIT_RAY_WARM": "0", "PYTHONPATH": os.pathsep.join(
        [p for p in (src or str(ROOT), os.environ.get("PYTHONPATH", "")) if p])}
    t0 = time.perf_counter()
    # in the code's own folder: Ray's workers put the driver's working directory on their path
    proc = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=src or str(ROOT), start_new_session=True)
    if on_start is not None:
        on_start(proc)
    import threading

    chunks: dict[str, bytes] = {}

    def drain(name: str, stream: Any) -> None:
        chunks[name] = stream.read()

    threads = [threading.Thread(target=drain, args=(k, s), daemon=True)
               for k, s in (("out", proc.stdout), ("err", proc.stderr))]
    for t in threads:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    for t in threads:
        t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"rc": proc.returncode, "wall": time.perf_counter() - t0, "peak": usage.ru_maxrss * 1024,
            "stdout": chunks.get("out", b"").decode(errors="replace"),
            "stderr": chunks.get("err", b"").decode(errors="replace")}


def run_dir(store: Path) -> Path:
    runs = sorted((store / "runs").iterdir())
    if len(runs) != 1:
        raise SystemExit(f"bench_scale: expected one run in {store}, found {len(runs)}")
    return runs[0]


def measure(rec: Recorder, label: str, n: int, data: Path, work: Path, shard: int, src: str | None) -> dict:
    store = work / f"store-{label}-{n}"
    rmtree(store)
    spec = run_file(work / f"run-{label}-{n}.json", data, store, n, shard)
    note(f"[{label}] run of {n} samples ...")
    r = command_rss(["run", str(spec), "--json"], src)
    if r["rc"] != 0:
        raise SystemExit(f"bench_scale: run ({label}, {n}) exited {r['rc']}:\n{r['stderr'][-3000:]}")
    res = json.loads(r["stdout"][r["stdout"].index("{"):])
    res = res.get("result", res) if isinstance(res, dict) else res
    rate = n / r["wall"]
    rec.emit(f"scale.{label}.n{n}.run.wall", r["wall"], "s")
    rec.emit(f"scale.{label}.n{n}.run.samples_per_s", rate, "samples/s")
    rec.emit(f"scale.{label}.n{n}.run.peak_rss", r["peak"] / MiB, "MiB")
    out = {"run": r["peak"], "rate": rate, "wall": r["wall"], "metrics": _means(res)}
    rd = run_dir(store)
    for cmd in ("compare", "leaderboard"):
        note(f"[{label}] {cmd} of two {n}-sample runs ...")
        c = command_rss([cmd, str(rd), str(rd)], src)
        if c["rc"] not in (0, 1):
            raise SystemExit(f"bench_scale: {cmd} ({label}, {n}) exited {c['rc']}:\n{c['stderr'][-3000:]}")
        rec.emit(f"scale.{label}.n{n}.{cmd}.wall", c["wall"], "s")
        rec.emit(f"scale.{label}.n{n}.{cmd}.peak_rss", c["peak"] / MiB, "MiB")
        out[cmd] = c["peak"]
        out[cmd + "_wall"] = c["wall"]
    out["store"] = store
    return out


def _means(res: Any) -> dict[str, Any]:
    metrics = res.get("metrics", {}) if isinstance(res, dict) else {}
    return {k: (v.get("mean"), v.get("n")) for k, v in metrics.items() if isinstance(v, dict)}


def resume(rec: Recorder, n: int, data: Path, work: Path, shard: int) -> None:
    """Kill a run at 90% of its shards, run it again; what was generated twice, and the merge's cost."""
    store = work / f"store-resume-{n}"
    rmtree(store)
    n_shards = -(-n // shard)
    # a shard's generation takes a moment (20 s over the run at most), so that the watcher sees 90% stored
    spec = run_file(work / f"run-resume-{n}.json", data, store, n, shard, per_shard_s=min(0.3, 20 / n_shards))
    at = {"run": 0, "gen": 0}

    def kill_at_90(proc: subprocess.Popen) -> None:
        import threading

        def watch() -> None:
            while proc.poll() is None:
                runs = list((store / "runs").glob("*/s*/*.parquet")) if (store / "runs").exists() else []
                if len(runs) >= 0.9 * n_shards:
                    at["run"] = len(runs)
                    at["gen"] = len(list((store / "generations").glob("*/*/*.parquet")))
                    os.killpg(proc.pid, signal.SIGKILL)
                    return
                time.sleep(0.2)

        threading.Thread(target=watch, daemon=True).start()

    note(f"[resume] run of {n} samples, killed at 90% of its shards ...")
    killed = command_rss(["run", str(spec)], on_start=kill_at_90)
    if not at["run"]:
        raise SystemExit(f"bench_scale: the run finished before 90% of its shards were seen (rc {killed['rc']})")
    # what the killed run left: outputs stored between the count and the kill count as stored
    at["gen"] = len(list((store / "generations").glob("*/*/*.parquet")))
    note("[resume] the same run again ...")
    again = command_rss(["run", str(spec), "--json"])
    if again["rc"] != 0:
        raise SystemExit(f"bench_scale: the resumed run exited {again['rc']}:\n{again['stderr'][-3000:]}")
    res = json.loads(again["stdout"][again["stdout"].index("{"):])
    res = res.get("result", res)
    generated = int(res["perf"]["generated"])
    gen_shards = -(-generated // shard)
    twice = gen_shards - (n_shards - at["gen"])
    rec.emit(f"scale.resume.n{n}.shards", n_shards, "shards")
    rec.emit(f"scale.resume.n{n}.killed.run_shards_stored", at["run"], "shards")
    rec.emit(f"scale.resume.n{n}.killed.outputs_stored", at["gen"], "shards")
    rec.emit(f"scale.resume.n{n}.resumed.generated", gen_shards, "shards")
    rec.emit(f"scale.resume.n{n}.generated_again", max(0, twice), "shards")
    rec.emit(f"scale.resume.n{n}.resumed.wall", again["wall"], "s")
    rec.emit(f"scale.resume.n{n}.resumed.peak_rss", again["peak"] / MiB, "MiB")
    rec.goal("resume_regenerates_le_one_shard_per_actor", twice <= 2,
             f"{max(0, twice)} shard(s) generated again, 2 actors")
    footers, memory = merge_times(run_dir(store), at["run"])
    rec.emit(f"scale.resume.n{n}.merge.resumed", footers, "s")
    rec.emit(f"scale.resume.n{n}.merge.uninterrupted", memory, "s")
    rec.emit(f"scale.resume.n{n}.merge.ratio", footers / memory, "x")
    rec.goal("resumed_merge_le_1.1x_uninterrupted", footers <= 1.1 * memory,
             f"{footers:.2f} s vs {memory:.2f} s")


def merge_times(rd: Path, stored: int) -> tuple[float, float]:
    """The merge of the finished run with its first ``stored`` shards' tallies read from their footers and the
    rest in memory (a resumed run), and with every tally in memory (an uninterrupted run: the actors sent
    them), each the best of three in this process."""
    from auditkit_ray.actors.tally import run_metrics
    from auditkit_ray.config import run_spec_from_dict
    from auditkit_ray.pipeline.merge import merge, tally_stored
    from auditkit_ray.pipeline.plan import Plan, RunIdentity
    from auditkit_ray.store.base import open_store
    from auditkit_ray.store.layout import RunLayout

    result = json.loads((rd / "result.json").read_text())
    spec = run_spec_from_dict(result["config"])
    store = open_store(spec.store)
    manifest = json.loads((rd / "manifest.json").read_text())
    layout = RunLayout(manifest["fingerprint"], manifest["generation_fingerprint"], manifest["shard_size"])
    ident = RunIdentity(run_fp=manifest["fingerprint"], gen_fp=manifest["generation_fingerprint"],
                        dataset_fp=result["dataset_fingerprint"], model={}, backend={}, config=result["config"])
    plan = Plan(spec=spec, store=store, n_samples=manifest["n_samples"], layout=layout,
                n_shards=manifest["n_shards"], identity=ident)
    metrics = run_metrics(spec)
    kw = dict(wall_s=1.0, generated=0, generation_s=0.0, new_tokens=0)

    def best(fn: Any) -> float:
        out = []
        for _ in range(3):
            tallies = fn()
            t0 = time.perf_counter()
            merge(plan, store, tallies=tallies, **kw)
            out.append(time.perf_counter() - t0)
        return min(out)

    everything = list(range(plan.n_shards))
    return (best(lambda: tally_stored(store, plan, everything[stored:], metrics)),
            best(lambda: tally_stored(store, plan, everything, metrics)))


def plot(path: Path, sizes: list[int], figures: dict[str, dict[int, dict]]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        note("bench_scale: matplotlib is not installed; no PNG")
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, style in (("auditkit", "-"), ("baseline", "--")):
        got = figures.get(label) or {}
        for cmd, marker in (("run", "o"), ("compare", "s"), ("leaderboard", "^")):
            xs = [n for n in sizes if n in got]
            if xs:
                ax.plot(xs, [got[n][cmd] / MiB for n in xs], style, marker=marker,
                        label=f"{cmd} ({'this code' if label == 'auditkit' else 'before'})")
    ax.set_xscale("log")
    ax.set_xlabel("samples")
    ax.set_ylabel("peak RSS of the command (MiB)")
    ax.set_title("auditkit-ray: peak memory against samples (simulated backend)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-src", help="a directory holding the package before (its auditkit_ray/)")
    ap.add_argument("--resume-size", type=int, help="samples of the resume run (default: the largest size)")
    ap.add_argument("--png", default=str(ROOT / "benchmarks" / "scale_memory.png"))
    ap.add_argument("--keep", action="store_true", help="keep the data and stores under benchmarks/.cache/scale")
    a = ap.parse_args(argv)
    print_machine()
    rec = Recorder("scale", a.mode)
    sizes, shard = SIZES[a.mode], SHARD[a.mode]
    rec.setting(sizes=sizes, shard_size=shard, generation_actors=2, metrics=["exact_match", "token_f1"],
                baseline_src=a.baseline_src)
    work = ROOT / "benchmarks" / ".cache" / "scale" if a.keep else with_tmpdir("bench-scale-")
    work.mkdir(parents=True, exist_ok=True)
    figures: dict[str, dict[int, dict]] = {"auditkit": {}}
    try:
        for n in sizes:
            data = write_data(work / f"data-{n}.jsonl", n)
            figures["auditkit"][n] = measure(rec, "auditkit", n, data, work, shard, None)
            if a.baseline_src and not (a.mode == "full" and n == sizes[-1]):
                figures.setdefault("baseline", {})[n] = measure(rec, "baseline", n, data, work, shard,
                                                                a.baseline_src)
                same = figures["baseline"][n]["metrics"] == figures["auditkit"][n]["metrics"]
                rec.emit(f"scale.n{n}.summaries_match_baseline", same)
                rec.emit(f"scale.n{n}.run.rss_ratio_vs_baseline",
                         figures["auditkit"][n]["run"] / figures["baseline"][n]["run"], "x")
                rec.emit(f"scale.n{n}.run.rate_ratio_vs_baseline",
                         figures["auditkit"][n]["rate"] / figures["baseline"][n]["rate"], "x")
            if n != sizes[-1] and not a.keep:
                rmtree(figures["auditkit"][n].pop("store"))
        small, large = sizes[0], sizes[-1]
        got = figures["auditkit"]
        for cmd in ("run", "compare", "leaderboard"):
            ratio = got[large][cmd] / got[small][cmd]
            rec.emit(f"scale.ratio.{cmd}.peak_rss.n{large}_vs_n{small}", ratio, "x")
            rec.goal(f"{cmd}_peak_le_1.5x_smallest", ratio <= 1.5, f"{ratio:.2f}x from {small} to {large} samples")
        for cmd in ("compare", "leaderboard"):
            peak, wall = got[large][cmd], got[large][cmd + "_wall"]
            rec.goal(f"{cmd}_largest_le_1GiB_and_60s", peak <= 1024 * MiB and wall <= 60,
                     f"{peak / MiB:.0f} MiB, {wall:.1f} s at {large}")
        if len(sizes) >= 2:
            mid = sizes[-2]
            per = got[large]["rate"] / got[mid]["rate"]
            rec.emit(f"scale.ratio.samples_per_s.n{large}_vs_n{mid}", per, "x")
        rn = a.resume_size or large
        resume(rec, rn, write_data(work / f"data-{rn}.jsonl", rn), work, shard)
        if a.mode != "smoke" and plot(Path(a.png), sizes, figures):
            rec.emit("scale.png", Path(a.png).relative_to(ROOT) if Path(a.png).is_relative_to(ROOT) else a.png)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
