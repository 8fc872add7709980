# headscope — the two commands of the README:
#   make demo   set up, build, and run headscope on the default model
#   make test   set up, build, generate reference goldens with transformers, run every test
# and the contributor's inner loop:
#   make check  incremental release build, the fast unit tests and a quick reference sample
#
# The C++ is compiled once per set of flags: build/ (preset release, GCC, -O3, position-independent
# core) serves the CLI, the server, the tests and the Python module; build-sanitize/ (preset sanitize,
# clang, ASan + UBSan + libFuzzer coverage) serves the sanitized suite and the fuzz targets.
SHELL := /bin/bash
PY := .venv/bin/python
MODEL := models/all-MiniLM-L6-v2
BUILD := build
GOLDENS := $(BUILD)/goldens
DEMO_TEXT := The animal didn't cross the street because it was too tired.

.PHONY: all setup build python wheel check-fresh-wheel evidence goldens test check test-cpp test-python test-wheel test-web test-views web-embed sanitize-configure sanitize-build test-sanitize test-fuzz lint format fuzz fuzz-build fuzz-minimise demo bench bench-llamacpp bench-big clean

all: build

setup:
	@scripts/setup.sh

# Configured again when build/ predates the preset's Python module (HEADSCOPE_PYTHON).
build: setup
	@grep -qs '^HEADSCOPE_PYTHON:BOOL=ON' $(BUILD)/CMakeCache.txt && [ -f $(BUILD)/build.ninja ] || \
	  cmake --preset release >/dev/null
	@cmake --build --preset release

# The default model's corpus evidence (syntax and coreference roles of every head, docs/roles.md),
# measured once on ../shared/data and cached where headscope looks by default; the tests read the
# same cache, so it is measured once, not once per test binary and build.
EVIDENCE_CACHE := $(or $(HEADSCOPE_CACHE_DIR),$(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME)/headscope,$(HOME)/.cache/headscope))
# The decoders set-up installs get theirs too (about 2.5 and 2 minutes on two cores, once), so that
# the explorer and the CLI name their syntactic and coreference heads as they do MiniLM's.
EVIDENCE_DECODERS := models/SmolLM2-135M-Instruct models/gemma-3-270m
evidence: build
	@HEADSCOPE_CACHE_DIR=$(EVIDENCE_CACHE) HEADSCOPE_DATA=$(abspath ../shared/data) ./$(BUILD)/headscope run --measure-corpus --model $(MODEL) --text "$(DEMO_TEXT)" >/dev/null
	@for m in $(EVIDENCE_DECODERS); do [ -e $$m ] || continue; \
	  HEADSCOPE_CACHE_DIR=$(EVIDENCE_CACHE) HEADSCOPE_DATA=$(abspath ../shared/data) ./$(BUILD)/headscope run --measure-corpus \
	    --model $$m --text "$(DEMO_TEXT)" >/dev/null || exit 1; done

# Reference outputs computed by Hugging Face transformers (PyTorch, CPU, fp32) in this run.
goldens: setup
	@HF_HUB_OFFLINE=1 $(PY) tests/reference/make_goldens.py --model $(MODEL) --out $(GOLDENS)

# What every ctest run of the C++ and reference tests is given.
CTEST_ENV = HEADSCOPE_GOLDENS=$(abspath $(GOLDENS)) HEADSCOPE_MODEL=$(abspath $(MODEL)) \
  HEADSCOPE_DATA=$(abspath ../shared/data) HEADSCOPE_CACHE_DIR=$(EVIDENCE_CACHE)

test-cpp: build goldens evidence
	@cd $(BUILD) && $(CTEST_ENV) ctest --output-on-failure -j2

# The contributor's inner loop (README): the release build brought up to date, then in one ctest run
# every unit test and the example but the three slowest (about 100 of the unit tests' 325
# test-seconds), and a quick reference sample: the long-text comparison with transformers and the
# word statistics (test_forward, test_attribution, test_ablate and test_cli_errors are left out).
# test-cpp runs everything; `make test` is what a change must pass.
CHECK_SKIP := ^(Schema\.CliAndApiAgreeWithCorpusEvidenceOnTwentyTexts|LongText\.StreamEqualsDenseOnSmolLM2|Decoders\.Gemma3_270mGguf|reference_test_(forward|attribution|ablate|cli_errors))$$
check: build goldens evidence
	@cd $(BUILD) && $(CTEST_ENV) ctest --output-on-failure -j2 -E '$(CHECK_SKIP)'

# The Python package (docs/python.md). The module headscope._core is built in build/ (targets _core,
# _core_stub: the same headscope_core objects as the CLI, so nothing of the core is compiled again);
# scikit-build-core then packs it with python/headscope into a wheel in build/dist
# (HEADSCOPE_PYTHON_MODULE_DIR: nothing compiled, a few seconds), which is installed into .venv;
# tests/python checks the installed package against the CLI, transformers and a clean venv.
# `pip install .` elsewhere still compiles the module from source (pyproject.toml).
PY_WHEELS := $(BUILD)/dist
python: build web-embed
	@cmake --build $(BUILD) --target _core _core_stub
	@rm -f $(PY_WHEELS)/headscope-*.whl
	@$(PY) -m build --wheel --no-isolation --outdir $(PY_WHEELS) -C build-dir=$(BUILD)/wheel \
	  -C cmake.define.HEADSCOPE_PYTHON_MODULE_DIR=$(abspath $(BUILD)/python) . >$(BUILD)/python-build.log 2>&1 || \
	  { tail -30 $(BUILD)/python-build.log; exit 1; }
	@$(PY) -m pip install -q --no-deps --force-reinstall --disable-pip-version-check $(PY_WHEELS)/headscope-*.whl

test-python: python evidence
	@HEADSCOPE_BIN=$(abspath $(BUILD)/headscope) HEADSCOPE_WHEELS=$(abspath $(PY_WHEELS)) HF_HUB_OFFLINE=1 OMP_NUM_THREADS=2 \
	  HEADSCOPE_DATA=$(abspath ../shared/data) HEADSCOPE_CACHE_DIR=$(EVIDENCE_CACHE) \
	  $(PY) -m pytest -q -p no:cacheprovider tests/python

# The wheel a user receives (docs/python.md, "Portable wheels"): make python's wheel, compiled for
# any x86-64-v2 CPU with the kernels dispatched at run time, checked and repaired by auditwheel,
# which copies the shared libraries it needs (oneDNN, libgomp, libpng, ICU, ...) into it and gives it
# the most compatible manylinux tag its symbol versions allow, in build/wheelhouse.
WHEELHOUSE := $(BUILD)/wheelhouse
wheel: python
	@rm -rf $(WHEELHOUSE)
	@PATH=$(abspath .venv/bin):$$PATH .venv/bin/auditwheel repair -w $(WHEELHOUSE) $(PY_WHEELS)/headscope-*.whl \
	  >$(BUILD)/wheel-repair.log 2>&1 || { tail -20 $(BUILD)/wheel-repair.log; exit 1; }
	@ls $(WHEELHOUSE)/headscope-*manylinux*.whl >/dev/null

# The package's tests once per forced kernel path (HEADSCOPE_ISA=avx2, then portable; the CLI they
# compare with inherits the setting), so a wheel built on an AVX-512 machine is checked on the paths
# other machines take; test_wheel.py installs the repaired wheel into a clean virtualenv. The browser
# views and the notebook (test_views.py, test_notebook.py), the emulated CPUs of test_portable.py and
# the Ray cluster of test_distributed.py (which compares two runs on the same path), which do not
# depend on the setting, run once, in test-python.
WHEEL_ISAS := avx2 portable
WHEEL_SKIP := --ignore tests/python/test_views.py --ignore tests/python/test_notebook.py --ignore tests/python/test_distributed.py -k 'not emulated'
test-wheel: wheel evidence
	@for isa in $(WHEEL_ISAS); do \
	  echo "test-wheel: HEADSCOPE_ISA=$$isa"; \
	  HEADSCOPE_ISA=$$isa HEADSCOPE_BIN=$(abspath $(BUILD)/headscope) HEADSCOPE_WHEELS=$(abspath $(WHEELHOUSE)) \
	    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=2 HEADSCOPE_DATA=$(abspath ../shared/data) HEADSCOPE_CACHE_DIR=$(EVIDENCE_CACHE) \
	    $(PY) -m pytest -q -p no:cacheprovider $(WHEEL_SKIP) tests/python || exit 1; \
	done

# `pip install .` and `python -m build` in a fresh clone of HEAD, each wheel installed into a clean
# virtualenv and checked for the notebook views (scripts/check_fresh_wheel.sh; the core is compiled
# twice, so it is a manual check, not part of make test).
check-fresh-wheel:
	@scripts/check_fresh_wheel.sh

test-web: build evidence
	@if [ -f web/package.json ]; then cd web && HEADSCOPE_DATA=$(abspath ../shared/data) npm test --silent; fi

# The explorer's views for the Python package: one self-contained script (web/vite.embed.config.ts)
# written into python/headscope/_web/, which the wheel ships (a build output, not committed).
web-embed: setup
	@cd web && npx vite build --config vite.embed.config.ts --logLevel warn

# show() / save_html() / show_attention() and the tour notebook, executed in a Jupyter kernel and
# drawn in Chromium (tests/python/test_views.py, test_notebook.py; about a minute). test-python runs
# them too, with the rest of tests/python; this target runs only them.
test-views: python evidence
	@HEADSCOPE_BIN=$(abspath $(BUILD)/headscope) HEADSCOPE_MODEL=$(abspath $(MODEL)) HEADSCOPE_DATA=$(abspath ../shared/data) \
	  HEADSCOPE_CACHE_DIR=$(EVIDENCE_CACHE) HF_HUB_OFFLINE=1 OMP_NUM_THREADS=2 \
	  $(PY) -m pytest -q -p no:cacheprovider --rootdir tests/python tests/python/test_views.py tests/python/test_notebook.py

# One build with clang's AddressSanitizer and UndefinedBehaviorSanitizer (preset sanitize, folder
# build-sanitize/; docs/reliability.md): the core and the server also carry libFuzzer's coverage
# instrumentation, so the sanitized test suite and the fuzz targets share one compilation.
SANITIZE := $(BUILD)-sanitize
sanitize-configure: setup
	@grep -qs '^HEADSCOPE_FUZZ:BOOL=ON' $(SANITIZE)/CMakeCache.txt && [ -f $(SANITIZE)/build.ninja ] || \
	  cmake --preset sanitize --fresh >/dev/null

sanitize-build: sanitize-configure
	@cmake --build --preset sanitize

# The unit tests, the example and the reference tests on the sanitized build: any out-of-bounds access,
# use after free, leak or undefined behaviour fails. The reference tests drive the sanitized binary on
# a sample of their inputs (HEADSCOPE_REFERENCE_SAMPLE in CMakeLists.txt); test-cpp runs them all.
test-sanitize: sanitize-build goldens evidence
	@cd $(SANITIZE) && $(CTEST_ENV) ASAN_OPTIONS=detect_leaks=1 \
	  LSAN_OPTIONS=suppressions=$(abspath fuzz/lsan.supp):print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j2

# libFuzzer targets (fuzz/*_fuzzer.cc) of the same build, seeded from the real model and data files.
# `make fuzz` runs each for FUZZ_SECONDS; `make test` runs each for 20 s, two targets at a time.
FUZZ_SECONDS ?= 300
fuzz-build: sanitize-configure
	@cmake --build --preset sanitize --target fuzzers
	@if [ ! -f $(SANITIZE)/seeds/.stamp ] || [ fuzz/make_seeds.py -nt $(SANITIZE)/seeds/.stamp ]; then \
	  rm -rf $(SANITIZE)/seeds && HF_HUB_OFFLINE=1 $(PY) fuzz/make_seeds.py --out $(SANITIZE)/seeds 2>/dev/null && \
	  touch $(SANITIZE)/seeds/.stamp; fi

fuzz: fuzz-build
	@fuzz/run.sh $(FUZZ_SECONDS)

test-fuzz: fuzz-build
	@fuzz/run.sh 20

# Merges what the runs found into the minimised corpus kept in git (fuzz/corpus/<target>.tar.xz).
fuzz-minimise: fuzz-build
	@fuzz/minimise.sh

# Formatting and lint, checked by `make test`: clang-format (.clang-format) over every C++ file of the
# tree, ESLint and Prettier (web/eslint.config.js, web/.prettierrc.json) over the explorer's TypeScript
# and its browser tests. `make format` rewrites the files in place.
CXX_SOURCES = $(shell git ls-files '*.cc' '*.h')
lint: setup
	@clang-format --dry-run --Werror $(CXX_SOURCES)
	@cd web && npx eslint . && npx prettier --check --log-level warn .

format: setup
	@clang-format -i $(CXX_SOURCES)
	@cd web && npx prettier --write --log-level warn . && npx eslint --fix .

# Every check: lint test-cpp test-python test-wheel test-web test-sanitize test-fuzz, with the sanitized build
# compiled in the background at the lowest CPU priority while the release tests run
# (scripts/make_test.sh says why).
test:
	@scripts/make_test.sh

# Prints one run, then starts the explorer (web UI + API) and prints its URL; Ctrl+C stops it.
DEMO_PORT ?= 8080
demo: build evidence
	@./$(BUILD)/headscope run --model $(MODEL) --text "$(DEMO_TEXT)"
	@./$(BUILD)/headscope serve --model $(MODEL) --port $(DEMO_PORT)

bench: build
	@bench/run.sh

# headscope beside llama.cpp (built once from the llama-cpp-python sdist in .venv/share/) on the
# decoder GGUFs; a benchmark, not part of test. See docs/performance.md.
bench-llamacpp: build
	@$(PY) bench/llamacpp.py

# An 8B-class random-weight Q4_0 GGUF (Llama-3-8B's shape, written under build/bench/ and deleted
# after) run by headscope beside llama-bench; about 10 minutes on two cores. See docs/performance.md.
bench-big: build
	@$(PY) bench/big_gguf.py

clean:
	rm -rf $(BUILD) $(BUILD)-debug $(BUILD)-sanitize $(BUILD)-fuzz $(BUILD)-python
