# headscope — the two commands of the README:
#   make demo   set up, build, and run headscope on the default model
#   make test   set up, build, generate reference goldens with transformers, run every test
SHELL := /bin/bash
PY := .venv/bin/python
MODEL := models/all-MiniLM-L6-v2
BUILD := build
GOLDENS := $(BUILD)/goldens
DEMO_TEXT := The animal didn't cross the street because it was too tired.

.PHONY: all setup build goldens test test-cpp test-web demo bench clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@[ -f $(BUILD)/build.ninja ] || cmake --preset release >/dev/null
	@cmake --build --preset release

# Reference outputs computed by Hugging Face transformers (PyTorch, CPU, fp32) in this run.
goldens: setup
	@HF_HUB_OFFLINE=1 $(PY) tests/reference/make_goldens.py --model $(MODEL) --out $(GOLDENS)

test-cpp: build goldens
	@cd $(BUILD) && HEADSCOPE_GOLDENS=$(abspath $(GOLDENS)) HEADSCOPE_MODEL=$(abspath $(MODEL)) \
	  HEADSCOPE_DATA=$(abspath ../shared/data) ctest --output-on-failure -j2

test-web: build
	@if [ -f web/package.json ]; then cd web && npm test --silent; fi

test: test-cpp test-web

# Prints one run, then starts the explorer (web UI + API) and prints its URL; Ctrl+C stops it.
DEMO_PORT ?= 8080
demo: build
	@./$(BUILD)/headscope run --model $(MODEL) --text "$(DEMO_TEXT)"
	@./$(BUILD)/headscope serve --model $(MODEL) --port $(DEMO_PORT)

bench: build
	@bench/run.sh

clean:
	rm -rf $(BUILD) $(BUILD)-debug
