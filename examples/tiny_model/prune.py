"""Magnitude-prune an HF checkpoint: zero the given fraction of the smallest
|weights| in every linear layer (embeddings and the output head untouched),
and record where the checkpoint came from in ``provenance.json`` (read into
the run's fingerprint and metadata by auditkit-ray).

    python examples/tiny_model/prune.py --src examples/tiny-model --out examples/tiny-model-p50 --amount 0.5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.iterdir() if p.is_file() and p.name != "provenance.json"):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def prune(src: str | Path, out: str | Path, amount: float) -> Path:
    import torch
    from transformers import AutoModelForCausalLM

    if not 0.0 <= amount < 1.0:
        raise SystemExit(f"--amount must be in [0, 1), got {amount}")
    src, out = Path(src), Path(out)
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32)
    pruned = total = 0
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear) and not name.endswith("lm_head"):
                w = module.weight
                k = int(round(amount * w.numel()))
                if k:
                    threshold = w.abs().flatten().kthvalue(k).values
                    mask = w.abs() > threshold
                    w.mul_(mask)
                    pruned += int((~mask).sum())
                total += w.numel()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    for f in src.iterdir():  # tokenizer files
        if f.is_file() and (
            f.name.startswith("tokenizer") or f.suffix == ".jinja" or f.name == "special_tokens_map.json"
        ):
            shutil.copy2(f, out / f.name)
    base = json.loads((src / "provenance.json").read_text()) if (src / "provenance.json").exists() else {}
    (out / "provenance.json").write_text(json.dumps({
        "base_model": base.get("base_model", str(src)),
        "parent_checkpoint": {"path": str(src), "sha256": _digest(src)},
        "training_data": base.get("training_data"),
        "transform": {"method": "magnitude", "scope": "per-linear-layer", "amount": amount,
                      "zeroed_fraction": round(pruned / max(total, 1), 6)},
    }, indent=2, sort_keys=True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--amount", type=float, required=True, help="fraction of each linear layer's weights to zero")
    a = ap.parse_args()
    print(f"wrote {prune(a.src, a.out, a.amount)}")


if __name__ == "__main__":
    main()
