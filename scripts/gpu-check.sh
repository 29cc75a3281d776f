#!/usr/bin/env bash
# The GPU check of issue 32, in one command: the GPU tests (`pytest -m gpu`) and the GPU benchmark
# (benchmarks/bench_gpu.py), in under 8 minutes on one GPU.
#
#     scripts/gpu-check.sh OUTDIR [--cpu]
#
# Writes into OUTDIR: gpu-check.log (everything printed), gpu-check.json (prerequisites, each step's exit
# status and time, the test counts, the benchmark's figures), gpu-tests.xml (JUnit) and bench_gpu.json.
# It runs from a plain copy of the repository (no venv needed, nothing installed): Python is $PYTHON, else
# .venv/bin/python, else python3. It first checks what it needs (Python >= 3.11, torch with CUDA,
# transformers, tokenizers, safetensors, Ray with Ray Data, pyarrow, pydantic, PyYAML, pytest) and names what
# is missing in the log and the JSON (exit 3) instead of failing later.
#
# --cpu: the dry mode, for machines without a GPU. The same steps on the CPU: the GPU tests with
# AUDITKIT_GPU_CHECK_CPU=1 (a Ray cluster of two logical GPUs, the model on the CPU; tests/gpu/conftest.py)
# and the benchmark with --cpu (a tiny model). Its figures check that the code runs; they measure nothing.
#
# Exit status: 0 every step passed; 1 a step failed; 2 usage; 3 a prerequisite is missing.
# AUDITKIT_GPU_CHECK_MODEL=DIR uses that tiny-model checkpoint instead of building one;
# GPU_CHECK_BENCH_ARGS adds arguments to bench_gpu.py (e.g. "--quick" or "--bandwidth-gbs 4800").
set -u

usage() { echo "usage: scripts/gpu-check.sh OUTDIR [--cpu]" >&2; exit 2; }
OUT="" ; CPU=0
for arg in "$@"; do
  case "$arg" in
    --cpu) CPU=1 ;;
    -h|--help) usage ;;
    -*) echo "gpu-check: unknown option $arg" >&2; usage ;;
    *) [ -z "$OUT" ] || usage; OUT="$arg" ;;
  esac
done
[ -n "$OUT" ] || usage

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$OUT" || { echo "gpu-check: cannot create $OUT" >&2; exit 2; }
OUT="$(cd "$OUT" && pwd)"
LOG="$OUT/gpu-check.log"
MODE=$([ "$CPU" = 1 ] && echo cpu-dry || echo gpu)
T0=$(date +%s)

main() {
log() { echo "[gpu-check $(date -u +%H:%M:%S)] $*"; }
log "mode $MODE; repository $ROOT; output $OUT"

if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"
else PY="$(command -v python3 || command -v python || true)"
fi
if [ -z "$PY" ] || ! "$PY" -c "pass" 2>/dev/null; then
  log "MISSING: python (set PYTHON=/path/to/python3.11+)"
  printf '{"mode": "%s", "ok": false, "missing": ["python"], "steps": {}}\n' "$MODE" > "$OUT/gpu-check.json"
  exit 3
fi
log "python: $PY"

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the package from this checkout, installed or not
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 RAY_USAGE_STATS_ENABLED=0
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 MLFLOW_DISABLE_TELEMETRY=true
# the test session's experiment index stays in OUTDIR, not in ~/
export AUDITKIT_RAY_DB="$OUT/experiments.sqlite"
cd "$ROOT" || exit 2

# ---------------------------------------------------------------- prerequisites
"$PY" - "$CPU" "$OUT/prerequisites.json" <<'EOF'
import importlib.metadata as md, importlib.util, json, platform, sys
cpu, path = sys.argv[1] == "1", sys.argv[2]
mods = {"pydantic": "pydantic", "yaml": "PyYAML", "torch": "torch", "transformers": "transformers",
        "tokenizers": "tokenizers", "safetensors": "safetensors", "ray": "ray", "pyarrow": "pyarrow",
        "pytest": "pytest", "vllm": "vllm"}
found, missing = {}, []
for mod, dist in mods.items():
    if importlib.util.find_spec(mod) is None:
        found[mod] = None
        if mod != "vllm":  # optional: its test skips itself without it
            missing.append(f"{dist} (python module {mod})")
        continue
    try:
        found[mod] = md.version(dist)
    except md.PackageNotFoundError:
        found[mod] = "present"
if sys.version_info < (3, 11):
    missing.insert(0, f"python >= 3.11 (this is {platform.python_version()})")
if found["ray"] and importlib.util.find_spec("ray.data") is None:
    missing.append("ray[data] (Ray Data)")
cuda = {"available": False, "devices": 0, "name": None, "torch_cuda": None}
if found["torch"]:
    try:
        import torch
        cuda["torch_cuda"] = torch.version.cuda
        cuda["available"] = bool(torch.cuda.is_available())
        if cuda["available"]:
            cuda["devices"] = torch.cuda.device_count()
            cuda["name"] = torch.cuda.get_device_name(0)
            free, total = torch.cuda.mem_get_info()
            cuda["memory_gib"] = round(total / 2**30, 1)
    except Exception as exc:  # a broken CUDA install is a finding, not a crash of the check
        cuda["error"] = f"{type(exc).__name__}: {exc}"
    if not cpu and not cuda["available"]:
        why = "torch.version.cuda is None (a CPU-only torch build)" if not cuda["torch_cuda"] else \
            "torch.cuda.is_available() is False"
        missing.append(f"a CUDA device for torch ({why}; --cpu runs the dry mode)")
need_tests = {"pytest", "torch", "transformers", "tokenizers", "safetensors", "ray", "pyarrow", "pydantic", "yaml"}
need_bench = need_tests - {"pytest"}
gone = {m for m, v in found.items() if v is None}
hard = bool([m for m in missing if m.startswith(("python >=", "a CUDA", "ray[data]"))])
doc = {"python": platform.python_version(), "executable": sys.executable, "platform": platform.platform(),
       "modules": found, "cuda": cuda, "missing": missing,
       "can_run": {"gpu_tests": not hard and not (need_tests & gone), "bench_gpu": not hard and not (need_bench & gone)}}
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
for m, v in found.items():
    print(f"  {m:13} {v or '-- not installed'}")
print(f"  cuda          {cuda}")
for m in missing:
    print(f"MISSING: {m}")
print(f"CAN_RUN_TESTS={int(doc['can_run']['gpu_tests'])}")
print(f"CAN_RUN_BENCH={int(doc['can_run']['bench_gpu'])}")
EOF
[ -f "$OUT/prerequisites.json" ] || { log "the prerequisite check itself failed"; exit 3; }
CAN_TESTS=$(grep -o '"gpu_tests": [a-z]*' "$OUT/prerequisites.json" | grep -c true)
CAN_BENCH=$(grep -o '"bench_gpu": [a-z]*' "$OUT/prerequisites.json" | grep -c true)

TIMEOUT="$(command -v timeout || true)"
STEPS="$OUT/steps.jsonl"
: > "$STEPS"
# step NAME LIMIT_S CMD...: run it (under `timeout` where the machine has it), record rc and seconds
step() {
  local name="$1" limit="$2"; shift 2
  local t0 rc
  t0=$(date +%s)
  log "== $name (limit ${limit}s): $*"
  if [ -n "$TIMEOUT" ]; then "$TIMEOUT" -k 10 "$limit" "$@"; rc=$?; else "$@"; rc=$?; fi
  local s=$(( $(date +%s) - t0 ))
  [ "$rc" = 124 ] && log "$name: timed out after ${limit}s"
  log "== $name: exit $rc after ${s}s"
  printf '{"step": "%s", "rc": %d, "wall_s": %d, "limit_s": %d}\n' "$name" "$rc" "$s" "$limit" >> "$STEPS"
  return "$rc"
}
skip_step() {
  log "== $1: not run ($2)"
  printf '{"step": "%s", "rc": null, "skipped": "%s"}\n' "$1" "$2" >> "$STEPS"
}

# ---------------------------------------------------------------- the tiny model the tests use
MODEL="${AUDITKIT_GPU_CHECK_MODEL:-}"
if [ "$CAN_TESTS" = 1 ]; then
  if [ -z "$MODEL" ]; then
    MODEL="$OUT/tiny-model"
    [ -f "$MODEL/config.json" ] || step tiny_model 90 "$PY" examples/tiny_model/build.py --out "$MODEL"
  fi
  export AUDITKIT_GPU_CHECK_MODEL="$MODEL"
fi

# ---------------------------------------------------------------- the GPU tests
if [ "$CAN_TESTS" = 1 ] && [ -f "$MODEL/config.json" ]; then
  if [ "$CPU" = 1 ]; then export AUDITKIT_GPU_CHECK_CPU=1; else unset AUDITKIT_GPU_CHECK_CPU; fi
  # on a GPU the limits keep the check under 8 minutes; the dry mode runs on whatever CPUs CI has
  step gpu_tests "$([ "$CPU" = 1 ] && echo 400 || echo 180)" "$PY" -m pytest -p no:cacheprovider -m gpu tests/gpu -ra -v --durations=10 \
    --junitxml "$OUT/gpu-tests.xml"
  unset AUDITKIT_GPU_CHECK_CPU
elif [ "$CAN_TESTS" = 1 ]; then
  skip_step gpu_tests "no tiny model at $MODEL"
else
  skip_step gpu_tests "prerequisites missing (see above)"
fi

# ---------------------------------------------------------------- the GPU benchmark
if [ "$CAN_BENCH" = 1 ]; then
  BENCH=()
  [ "$CPU" = 1 ] && BENCH+=(--cpu)
  # shellcheck disable=SC2206 - word splitting of the extra arguments is the point
  BENCH+=(${GPU_CHECK_BENCH_ARGS:-})
  step bench_gpu 200 "$PY" benchmarks/bench_gpu.py ${BENCH[@]+"${BENCH[@]}"} --json "$OUT/bench_gpu.json"
else
  skip_step bench_gpu "prerequisites missing (see above)"
fi

# ---------------------------------------------------------------- the summary
"$PY" - "$OUT" "$MODE" "$(( $(date +%s) - T0 ))" <<'EOF'
import json, os, sys
import xml.etree.ElementTree as ET
out, mode, wall = sys.argv[1], sys.argv[2], int(sys.argv[3])
pre = json.load(open(os.path.join(out, "prerequisites.json")))
steps = {}
for line in open(os.path.join(out, "steps.jsonl")):
    s = json.loads(line)
    steps[s.pop("step")] = s
tests = None
junit = os.path.join(out, "gpu-tests.xml")
if os.path.exists(junit):
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    cases = []
    for c in suite.iter("testcase"):
        state = "passed"
        for tag in ("failure", "error", "skipped"):
            el = c.find(tag)
            if el is not None:
                state = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                reason = el.get("message", "")
                break
        else:
            reason = None
        cases.append({"test": c.get("name"), "state": state, "s": round(float(c.get("time", 0)), 2),
                      **({"reason": reason} if reason else {})})
    tests = {k: sum(c["state"] == k for c in cases) for k in ("passed", "failed", "error", "skipped")}
    tests["cases"] = cases
    if tests["passed"] == 0 and "gpu_tests" in steps:
        steps["gpu_tests"]["rc"] = steps["gpu_tests"]["rc"] or 1  # every test skipped proves nothing
bench = None
bj = os.path.join(out, "bench_gpu.json")
if os.path.exists(bj):
    data = json.load(open(bj))
    bench = {"mode": data.get("mode"), "settings": data.get("settings"),
             "figures": {k: v["value"] for k, v in data.get("figures", {}).items()}}
ok = not pre["missing"] and all(s.get("rc") == 0 for s in steps.values()) and len(steps) >= 2
doc = {"mode": mode, "ok": ok, "wall_s": wall, "missing": pre["missing"], "prerequisites": pre,
       "steps": steps, "tests": tests, "bench": bench,
       "note": "dry mode: the CPU with logical GPUs; the figures check that the code runs, they are no "
               "performance claim" if mode == "cpu-dry" else None}
with open(os.path.join(out, "gpu-check.json"), "w") as f:
    json.dump(doc, f, indent=2)
print(f"gpu-check: {'OK' if ok else 'FAILED'} in {wall}s (mode {mode})")
for name, s in steps.items():
    print(f"  {name:12} " + (f"exit {s['rc']} in {s['wall_s']}s" if s.get("rc") is not None else f"not run: {s.get('skipped')}"))
if tests:
    print("  tests        " + ", ".join(f"{tests[k]} {k}" for k in ("passed", "failed", "error", "skipped")))
if bench:
    for k in ("gpu.ratio.auditkit_vs_plain", "gpu.auditkit.tokens_per_s", "gpu.plain.tokens_per_s",
              "gpu.auditkit.fraction_of_bandwidth_bound"):
        if k in bench["figures"]:
            print(f"  {k}: {bench['figures'][k]}")
for m in pre["missing"]:
    print(f"  MISSING: {m}")
print(f"  written: {os.path.join(out, 'gpu-check.json')}, {os.path.join(out, 'gpu-check.log')}")
sys.exit(0 if ok else (3 if pre["missing"] else 1))
EOF
}

# everything printed goes to the terminal and to the log; the exit status is main's
main 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
