"""Workload 11 (issue 42): a small evaluation from the command line against a plain loop, in one run.

512 prompts (``--n``) through the repo's tiny Llama (``examples/tiny-model``, built by ``make model``), greedy,
32 new tokens, batch 32, one generation actor, exact match: the plain Hugging Face loop of workload 1
(``bench_generation.py --worker plain-hf``) against ``auditkit-ray run``

- ``cli-cold``: the first command on the machine: it starts the warm local cluster (``AUDITKIT_RAY_WARM=1``,
  a fresh ``AUDITKIT_RAY_HOME``);
- ``cli-warm``: the next command, reusing it;
- ``cli-private``: a private cluster for the command (``AUDITKIT_RAY_WARM=0``), generation on the driver's
  own actors, started before the plan;
- ``cli-raydata``: the same in Ray Data's own actor pool (``AUDITKIT_RAY_GENERATION_POOL=raydata``): the
  path before issue 42.

Each system runs ``--rounds`` times, interleaved, and the median is kept; a larger N (``--big``) gives the
marginal cost per sample of the plain loop and of ``cli-warm``. Figures: whole wall per system, the ratio
to the plain loop, the time from launch to the first generate call, CPU seconds of the process tree.
``--smoke`` runs 16 prompts once and measures nothing."""

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
SYSTEMS = ("plain-hf", "cli-cold", "cli-warm", "cli-private", "cli-raydata")


def _spec(model: str, data: str, n: int, store: str) -> dict[str, Any]:
    return {"name": f"startup-{n}", "model": {"type": "hf", "path": model, "batch_size": 32},
            "dataset": {"path": data, "input_field": "question", "target_field": "answer", "limit": n},
            "prompt": {"template": "{{ question }} Answer:"},
            "generation": {"max_new_tokens": MAX_NEW, "temperature": 0},
            "metrics": ["exact_match"], "execution": {"shard_size": 64, "generation_actors": 1, "scoring_actors": 1},
            "store": {"path": store}, "tracking": {"index": False}}


def _first_generate_epoch(stdout: str) -> float | None:
    """When the actor started its first generate call: each shard's outputs' time less its sub-batches' walls."""
    from auditkit_ray.api import samples_table
    from auditkit_ray.core.result import RunResult

    res = RunResult.model_validate_json(stdout)
    shards: dict[float, set[float]] = {}
    for r in samples_table(res).select(["worker", "latency_s"]).to_pylist():
        shards.setdefault(json.loads(r["worker"])["generated_at"], set()).add(r["latency_s"] or 0.0)
    return min(done - sum(walls) for done, walls in shards.items()) if shards else None


def _tree_cpu(pid_cpu_before: float) -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime - pid_cpu_before


def run_cli(system: str, a: Any, n: int, home: Path, work: Path) -> dict[str, Any]:
    store = tempfile.mkdtemp(prefix=f"{system}-", dir=str(work))
    cfg = Path(store) / "run.json"
    cfg.write_text(json.dumps(_spec(a.model, a.data, n, store)))
    env = {**os.environ, "AUDITKIT_RAY_HOME": str(home), "AUDITKIT_RAY_IDLE_TIMEOUT": "600",
           "AUDITKIT_RAY_WARM": "0" if system in ("cli-private", "cli-raydata") else "1"}
    env["AUDITKIT_RAY_GENERATION_POOL"] = "raydata" if system == "cli-raydata" else "owned"
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = ru.ru_utime + ru.ru_stime
    t0, e0 = time.perf_counter(), time.time()
    proc = subprocess.run([CLI, "run", str(cfg), "--json", "--quiet"], cwd=str(ROOT), env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{system} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout)
    first = _first_generate_epoch(proc.stdout)
    # CPU of the processes this script waited for: a warm cluster's are not among them (see RESULTS.md)
    return {"wall_s": wall, "first_token_s": None if first is None else first - e0, "cpu_s": _tree_cpu(cpu0),
            "exact_match": out["metrics"]["exact_match"]["mean"]}


def run_plain(a: Any, n: int, work: Path) -> dict[str, Any]:
    import bench_generation as bg

    args = SimpleNamespace(threads=1, model=a.model, data=a.data, device="cpu", dtype="float32", vllm_args=None)
    r = bg.run_one("plain-hf", n, args, work)
    return {"wall_s": r["wall_s"], "first_token_s": r["wall_s"] - r["first_generation_before_end_s"],
            "cpu_s": r["cpu_s"], "exact_match": r["exact_match"]}


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--big", type=int, default=2048, help="the larger N for the marginal cost (0: none)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default=str(ROOT / "examples" / "tiny-model"))
    a = ap.parse_args(argv)
    if a.mode == "smoke":
        a.n, a.big, a.rounds = 16, 0, 1
    elif a.mode == "quick":
        a.rounds = min(a.rounds, 2)
    if not (Path(a.model) / "config.json").exists():
        raise SystemExit(f"{a.model}: no model (make model builds examples/tiny-model)")
    print_machine()
    rec = Recorder("startup", a.mode)
    a.data = str(write_jsonl(CACHE / f"startup-arith-{max(a.n, a.big)}.jsonl", arith_records(max(a.n, a.big))))
    work = Path(tempfile.mkdtemp(prefix="bench-startup-", dir=str(CACHE)))
    rec.setting(n=a.n, big=a.big, rounds=a.rounds, model=a.model, batch=32, max_new_tokens=MAX_NEW, shard_size=64)
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
    for k in range(a.rounds):
        home = work / f"home-{k}"  # a fresh state folder: cli-cold starts the cluster, cli-warm reuses it
        order = ["plain-hf", "cli-cold", "cli-warm", "cli-private", "cli-raydata"]
        order = order[k % len(order):] + order[: k % len(order)]
        if order.index("cli-warm") < order.index("cli-cold"):  # warm needs the cold one before it
            order.remove("cli-warm")
            order.insert(order.index("cli-cold") + 1, "cli-warm")
        for s in order:
            r = run_plain(a, a.n, work) if s == "plain-hf" else run_cli(s, a, a.n, home, work)
            note(f"  round {k} {s:>12} N={a.n}: {json.dumps({x: round(v, 3) for x, v in r.items() if v is not None})}")
            results[s].append(r)
        subprocess.run([CLI, "down"], env={**os.environ, "AUDITKIT_RAY_HOME": str(home)}, capture_output=True)
    med = {s: {m: statistics.median([r[m] for r in rs if r.get(m) is not None] or [float("nan")])
               for m in ("wall_s", "first_token_s", "cpu_s")} for s, rs in results.items()}
    for s in SYSTEMS:
        rec.emit(f"startup.{s}.wall", med[s]["wall_s"], f"s (median of {a.rounds}, N={a.n})")
        rec.emit(f"startup.{s}.first_token", med[s]["first_token_s"], "s (launch to the first generate call)")
        rec.emit(f"startup.{s}.cpu", med[s]["cpu_s"], "cpu-s (this script's children)")
        rec.emit(f"startup.{s}.exact_match", results[s][0]["exact_match"], "")
    plain = med["plain-hf"]
    for s in SYSTEMS[1:]:
        rec.emit(f"startup.ratio.{s}_vs_plain", med[s]["wall_s"] / plain["wall_s"], "x")
        rec.emit(f"startup.first_token_gap.{s}", med[s]["first_token_s"] - plain["first_token_s"], "s")
    rec.goal("whole_run_cold_le_1.5x_plain", med["cli-cold"]["wall_s"] <= 1.5 * plain["wall_s"],
             f"{med['cli-cold']['wall_s'] / plain['wall_s']:.2f}x")
    rec.goal("whole_run_warm_le_1.15x_plain", med["cli-warm"]["wall_s"] <= 1.15 * plain["wall_s"],
             f"{med['cli-warm']['wall_s'] / plain['wall_s']:.2f}x")
    for s in ("cli-cold", "cli-warm"):
        gap = med[s]["first_token_s"] - plain["first_token_s"]
        rec.goal(f"first_token_{s}_le_plain_plus_1s", gap <= 1.0, f"+{gap:.2f} s")
    if a.big:
        home = work / "home-big"
        run_cli("cli-cold", a, 32, home, work)  # start the cluster; the two sizes then run warm
        big_plain, big_warm = run_plain(a, a.big, work), run_cli("cli-warm", a, a.big, home, work)
        subprocess.run([CLI, "down"], env={**os.environ, "AUDITKIT_RAY_HOME": str(home)}, capture_output=True)
        m_plain = (big_plain["wall_s"] - plain["wall_s"]) / (a.big - a.n)
        m_warm = (big_warm["wall_s"] - med["cli-warm"]["wall_s"]) / (a.big - a.n)
        rec.emit("startup.plain-hf.marginal", m_plain * 1000, f"ms/sample (N={a.n} to {a.big})")
        rec.emit("startup.cli-warm.marginal", m_warm * 1000, f"ms/sample (N={a.n} to {a.big})")
        rec.goal("marginal_le_1.05x_plain", m_warm <= 1.05 * m_plain, f"{m_warm / m_plain:.2f}x")
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
