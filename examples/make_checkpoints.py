#!/usr/bin/env python
"""Build the derived checkpoints of the demo sweep from the committed model.

    python examples/make_checkpoints.py            # examples/models/word-problems-p25, -p50, -p75
    python examples/make_checkpoints.py --force    # rebuild even when up to date

Magnitude pruning (``examples/tiny_model/prune.py``: zero the given fraction
of the smallest |weights| of every linear layer, embeddings and output head
untouched) at 25, 50 and 75%. 0% is the committed model itself
(``examples/models/word-problems``), not a copy, so the baseline of the sweep
is the checkpoint the model card describes.

Quantized variants need no folder: ``dtype: bfloat16`` and
``quantization: int8-dynamic`` (torch dynamic quantization, CPU) are
settings of the ``hf`` backend, applied when the model is loaded, and recorded
in the run's fingerprint. GPU quantization (vLLM's ``quantization: awq|gptq|
fp8``, bitsandbytes) is likewise a backend setting, not a checkpoint here.

Idempotent: a derived folder is rebuilt only when it is missing, incomplete,
or its ``provenance.json`` names a parent whose content hash differs from the
committed model's now (the model was retrained). Each folder is written under
a temporary name and renamed into place, so an interrupted build never leaves
a half-written checkpoint that looks finished. The outputs are git-ignored.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
BASE = EXAMPLES / "models" / "word-problems"
AMOUNTS = (0.25, 0.50, 0.75)


def _prune_module():
    spec = importlib.util.spec_from_file_location("_auditkit_tiny_model_prune", EXAMPLES / "tiny_model" / "prune.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def derived_path(base: Path, amount: float) -> Path:
    return base.parent / f"{base.name}-p{round(amount * 100)}"


def up_to_date(out: Path, parent_digest: str, amount: float) -> bool:
    prov = out / "provenance.json"
    if not (out / "model.safetensors").is_file() or not (out / "config.json").is_file() or not prov.is_file():
        return False
    try:
        data = json.loads(prov.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return (data.get("parent_checkpoint", {}).get("sha256") == parent_digest
            and data.get("transform", {}).get("amount") == amount)


def build(base: Path = BASE, amounts=AMOUNTS, force: bool = False, log=print) -> list[Path]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not (base / "model.safetensors").is_file():
        raise SystemExit(f"{base} has no model.safetensors: train it with examples/tiny_model/train.py")
    prune = _prune_module()
    digest = prune._digest(base)
    outs = []
    for amount in amounts:
        out = derived_path(base, amount)
        outs.append(out)
        if not force and up_to_date(out, digest, amount):
            log(f"{out.relative_to(EXAMPLES.parent) if out.is_relative_to(EXAMPLES.parent) else out}: up to date")
            continue
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        prune.prune(base, tmp, amount)
        # the provenance names the committed folder, not the temporary one
        prov = json.loads((tmp / "provenance.json").read_text(encoding="utf-8"))
        root = EXAMPLES.parent.resolve()
        base_abs = base.resolve()
        prov["parent_checkpoint"]["path"] = (str(base_abs.relative_to(root)) if base_abs.is_relative_to(root)
                                             else str(base_abs))
        (tmp / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True), encoding="utf-8")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        log(f"wrote {out} (magnitude pruning {amount:.0%}, zeroed {prov['transform']['zeroed_fraction']:.1%} "
            f"of linear weights) in {time.perf_counter() - t0:.1f}s")
    return outs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=str(BASE), help="the committed model (default: examples/models/word-problems)")
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = ap.parse_args(argv)
    build(Path(args.base), force=args.force, log=lambda m: print(m, file=sys.stderr))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
