"""Shared helpers for the benchmark scripts (not part of the package).

Every benchmark prints one line per figure, ``name: value unit``, on stdout
(``emit``); anything else goes to stderr. Figures are ratios against a
baseline measured in the same run wherever a goal is stated, never timed
assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import platform
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
CACHE = BENCH / ".cache"
PY = sys.executable
#: the console script of the environment the benchmarks run in
CLI = str(Path(PY).parent / "auditkit-ray")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# no hub, no telemetry, quiet libraries, in this process and every child
for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "PYTHONUNBUFFERED": "1",
}.items():
    os.environ.setdefault(_k, _v)

MODES = ("smoke", "quick", "full")


# ----------------------------------------------------------------------------- output
#: where figures go: the stdout the benchmark started with. While Ray runs (``start_ray`` to ``stop_ray``)
#: ``sys.stdout`` is stderr: Ray's driver prints the raylet's notices ("A worker died or was killed",
#: "N PYTHON worker processes have been started") on ``sys.stdout`` even with ``log_to_driver`` off, which
#: would break the one-figure-per-line output
FIGURES = sys.stdout


def emit(name: str, value: Any, unit: str = "") -> None:
    """One figure line on stdout: ``name: value unit``."""
    if isinstance(value, float):
        text = f"{value:.4g}" if abs(value) < 1e5 else f"{value:.0f}"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    else:
        text = str(value)
    print(f"{name}: {text}{(' ' + unit) if unit else ''}", file=FIGURES, flush=True)


def note(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def goal(name: str, met: bool | None, detail: str) -> None:
    """A goal verdict, as a figure line (``met``, ``missed`` or ``n/a``)."""
    verdict = "n/a" if met is None else ("met" if met else "missed")
    emit(f"goal.{name}", verdict, f"({detail})")


# ----------------------------------------------------------------------------- arguments
def parser(description: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    g = ap.add_mutually_exclusive_group()
    g.add_argument(
        "--smoke",
        dest="mode",
        action="store_const",
        const="smoke",
        help="seconds; checks the script runs, measures nothing meaningful",
    )
    g.add_argument(
        "--quick", dest="mode", action="store_const", const="quick", help="smaller sizes that fit a laptop in minutes"
    )
    g.add_argument("--full", dest="mode", action="store_const", const="full", help="the sizes in the issue (default)")
    ap.set_defaults(mode="full")
    ap.add_argument("--json", metavar="FILE", help="also write the figures and settings as JSON")
    return ap


class Recorder:
    """Collects figures for ``--json`` while printing them."""

    def __init__(self, bench: str, mode: str) -> None:
        self.data: dict[str, Any] = {"bench": bench, "mode": mode, "machine": machine(), "figures": {}, "settings": {}}

    def emit(self, name: str, value: Any, unit: str = "") -> None:
        emit(name, value, unit)
        self.data["figures"][name] = {"value": value, "unit": unit}

    def goal(self, name: str, met: bool | None, detail: str) -> None:
        goal(name, met, detail)
        self.data["figures"][f"goal.{name}"] = {
            "value": "n/a" if met is None else ("met" if met else "missed"),
            "unit": detail,
        }

    def setting(self, **kw: Any) -> None:
        self.data["settings"].update(kw)

    def save(self, path: str | None) -> None:
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(self.data, indent=2, default=str) + "\n")


# ----------------------------------------------------------------------------- machine
def machine() -> dict[str, Any]:
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    load = None
    with contextlib.suppress(OSError, AttributeError):
        load = [round(x, 2) for x in os.getloadavg()]
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "loadavg": load,
    }


def print_machine() -> None:
    m = machine()
    note(
        f"machine: {m['cpus_usable']} cpus, {m['memory_gib']} GiB, python {m['python']}, "
        f"load {m['loadavg']}, {m['date']}"
    )


# ----------------------------------------------------------------------------- memory
def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of a process (this one by default)."""
    try:
        import psutil

        return int(psutil.Process(pid or os.getpid()).memory_info().rss)
    except ImportError:
        with open(f"/proc/{pid or os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples this process's RSS in a thread; ``peak`` and ``start`` in bytes."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.start = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRSS":
        self.start = self.peak = rss_bytes()
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_bytes())
        self.end = rss_bytes()


MiB = 1024 * 1024


# ----------------------------------------------------------------------------- timing
@contextlib.contextmanager
def timed() -> Iterator[dict[str, float]]:
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        out["s"] = time.perf_counter() - t0


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``y = a + b x``: (intercept a, slope b)."""
    n = len(xs)
    if n < 2:
        raise ValueError("a line needs two points")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


# ----------------------------------------------------------------------------- data
def arith_records(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``What is A plus B?`` questions with their answers, deterministic."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        out.append({"id": f"q{i:06d}", "question": f"What is {a} plus {b}?", "answer": str(a + b)})
    return out


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


# ----------------------------------------------------------------------------- ray
def start_ray(num_cpus: float | None = None, num_gpus: float | None = None) -> float:
    """Start a local Ray the way the driver does; return the seconds it took. Until :func:`stop_ray`,
    ``sys.stdout`` is stderr (see :data:`FIGURES`)."""
    from auditkit_ray.config.models import ExecutionSpec
    from auditkit_ray.pipeline.runtime import init_ray

    sys.stdout.flush()
    sys.stdout = sys.stderr
    t0 = time.perf_counter()
    init_ray(None, ExecutionSpec(num_cpus=num_cpus, num_gpus=num_gpus))
    return time.perf_counter() - t0


def stop_ray() -> None:
    with contextlib.suppress(Exception):
        import ray

        ray.shutdown()
    sys.stdout = FIGURES


def run_spec(spec: dict[str, Any]):
    """evaluate() on an already started Ray, quietly."""
    from auditkit_ray.api import evaluate

    return evaluate(spec, progress=False)


def base_tracking() -> dict[str, Any]:
    return {"index": False}


def with_tmpdir(prefix: str) -> Path:
    import tempfile

    CACHE.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=str(CACHE)))


def rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def call_quietly(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` with Python warnings silenced (Ray Data deprecations)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def warm_up(num_gpus: float | None = None) -> float:
    """One tiny run (simulated backend, 2 shards) so that the first measured
    run does not pay for Ray's first worker processes and cold imports.
    Returns its wall time."""
    work = with_tmpdir("bench-warmup-")
    try:
        data = write_jsonl(work / "d.jsonl", arith_records(4))
        spec = {
            "name": "warm-up",
            "model": {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "batch_size": 2,
                      "gpu": bool(num_gpus)},
            "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
            "metrics": ["exact_match"],
            "execution": {"shard_size": 2},
            "store": {"path": str(work / "store")},
            "tracking": base_tracking(),
        }
        t0 = time.perf_counter()
        call_quietly(lambda: run_spec(spec))
        return time.perf_counter() - t0
    finally:
        rmtree(work)
