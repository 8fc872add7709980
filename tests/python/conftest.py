"""Shared set-up of the Python package's tests (docs/python.md): the installed `headscope` package,
the CLI binary it is compared with, and the two models of the project's set-up."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("HEADSCOPE_BIN", ROOT / "build" / "headscope"))
MINILM = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
THREADS = 2  # the same for the CLI and the package: arrays are then equal bit for bit
TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="session")
def headscope():
    import headscope

    return headscope


@pytest.fixture(scope="session")
def minilm(headscope):
    return headscope.load(MINILM, threads=THREADS)


@pytest.fixture(scope="session")
def smollm2(headscope):
    if not SMOLLM2.exists():
        pytest.skip(f"{SMOLLM2} is not set up (scripts/setup.sh)")
    return headscope.load(SMOLLM2, threads=THREADS)


@pytest.fixture(scope="session")
def cli():
    if not BIN.exists():
        pytest.skip(f"{BIN} is not built (make build)")
    return BIN
