"""Helpers of the GPU tests (imported by name: ``tests/gpu`` is on ``sys.path``, see ``conftest.py``)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

DRY_ENV = "AUDITKIT_GPU_CHECK_CPU"
MODEL_ENV = "AUDITKIT_GPU_CHECK_MODEL"
NO_CUDA = "no CUDA device: torch.cuda.is_available() is False"
#: logical GPUs of the dry mode's cluster
DRY_GPUS = 2
#: the GPU test files whose dry mode CPU CI runs in a nested pytest of its own (test_gpu_dry_mode.py); the
#: script's dry run in test_gpu_check_script.py takes the others
DRY_NESTED_FILES = ("tests/gpu/test_gpu_memory.py", "tests/gpu/test_gpu_resident.py")


@dataclass(frozen=True)
class GpuMode:
    """Where the GPU tests run: ``device`` is what the ``hf`` backend is told
    (``cuda``, or ``cpu`` in the dry mode); ``gpus`` the cluster's GPUs."""

    dry: bool
    device: str
    gpus: int
    name: str


def dry_mode() -> bool:
    return os.environ.get(DRY_ENV, "") not in ("", "0")


def hf_model(mode: GpuMode, model: Path, **kw) -> dict:
    return {"type": "hf", "path": str(model), "device": mode.device, "batch_size": 4, **kw}


def run_doc(name: str, model: dict, data: Path, store: Path, actors: int = 1) -> dict:
    return {
        "name": name,
        "model": model,
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"},
        "generation": {"max_new_tokens": 6},
        "annotators": [{"type": "regex", "name": "num", "pattern": r"(\d+)", "select": "last"}],
        "metrics": ["exact_match", {"name": "exact_match", "on": "num"}, "non_degenerate"],
        "execution": {"shard_size": 4, "generation_actors": actors},
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }


def workers_of(result) -> list[dict]:
    """The generation worker of each sample (host, pid, Ray's GPU ids, CUDA_VISIBLE_DEVICES)."""
    from auditkit_ray.api import samples_table

    return [json.loads(w) for w in samples_table(result).column("worker").to_pylist()]


# ----------------------------------------------------------------------------- device memory
def _children_of(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc: no psutil on a bare GPU node)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{d}/stat").read_text()
            parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for c, pp in parent.items():
            if pp == p and c not in out:
                out.add(c)
                todo.append(c)
    return out


def generation_actor_pids() -> list[int]:
    """This driver's cluster's live generation actors (Ray titles them ``ray::GenerationActor``).
    Only this process's descendants: other Ray clusters on the machine are not ours to count."""
    pids = []
    for pid in _children_of(os.getpid()):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "GenerationActor" in cmd and "<defunct>" not in cmd:
                pids.append(pid)
    return sorted(pids)


def device_probe(ray) -> dict:
    """From a fresh actor holding one GPU: the device's free and total bytes (``torch.cuda.mem_get_info``),
    or None for both where torch sees no CUDA device (the dry mode)."""

    @ray.remote(num_gpus=1, num_cpus=0)
    class Probe:
        def read(self) -> dict:
            import torch

            out = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "free": None, "total": None}
            if torch.cuda.is_available():
                out["free"], out["total"] = torch.cuda.mem_get_info()
            return out

    probe = Probe.remote()
    try:
        return ray.get(probe.read.remote(), timeout=120)
    finally:
        ray.kill(probe)


#: a generation actor that outlived its cell holds at least its CUDA context (a few hundred MiB) besides
#: the model and the allocator's cache; two probes in a row agree to within a few MiB
MEMORY_SLACK = 64 * 1024 * 1024


def settled_device(ray, baseline: dict | None, deadline_s: float = 90.0) -> dict:
    """The device as a fresh actor sees it once no generation actor of ours is alive and the free memory is
    back within ``MEMORY_SLACK`` of ``baseline`` (each checked again until ``deadline_s``): what it saw last,
    with the generation actors still alive."""
    end = time.monotonic() + deadline_s
    while True:
        alive = generation_actor_pids()
        seen = device_probe(ray)
        seen["generation_actors_alive"] = alive
        ok_mem = baseline is None or seen["free"] is None or seen["free"] >= baseline["free"] - MEMORY_SLACK
        if (not alive and ok_mem) or time.monotonic() > end:
            return seen
        time.sleep(0.5)
