#!/usr/bin/env bash
# Runs every benchmark of bench/ (after `make build`); see bench/run.py.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python bench/run.py "$@"
