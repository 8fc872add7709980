"""Bounded input: `headscope run --file` and standard input are read through one reader that refuses
directories, FIFOs, sockets and devices before reading, refuses a regular file over 16 MiB from its
size, and reads a pipe only to one byte past 16 MiB. Each case runs the binary as a child and reads
its peak memory (ru_maxrss from wait4) against a baseline: the same binary refusing a directory,
which reads nothing. Every input is built here."""
import os
import pathlib
import json
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
MODEL = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
LIMIT = 16 << 20  # limits::kMaxTextFileBytes
MIB = 1 << 20
USAGE, INPUT = 1, 2  # the CLI's exit codes (tools/cli/commands.h)


# Runs the binary with `os.wait4` and prints {"rc", "maxrss", "stderr", "written"} as JSON. It runs in
# a small Python of its own: a child's ru_maxrss starts from the memory of the process that spawned
# it (vfork and fork both count the parent's pages until exec), so spawning from pytest would
# measure pytest. Standard input is /dev/null, a file, an endless stream of "y\n", or `bytes` bytes
# of `unit` repeated, written after the spawn so that the helper is still small then.
MEASURE = r"""
import json, os, sys
args, spec, timeout = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
err_r, err_w = os.pipe()
actions = [(os.POSIX_SPAWN_DUP2, err_w, 2), (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)]
if spec["kind"] in ("endless", "data"):
    in_r, in_w = os.pipe()
    actions.append((os.POSIX_SPAWN_DUP2, in_r, 0))
else:
    actions.append((os.POSIX_SPAWN_OPEN, 0, spec.get("path", "/dev/null"), os.O_RDONLY, 0))
pid = os.posix_spawn(args[0], args, dict(os.environ), file_actions=actions)
os.close(err_w)
import signal
signal.signal(signal.SIGALRM, lambda *_: os.kill(pid, signal.SIGKILL))
signal.alarm(int(timeout))
written = 0
if spec["kind"] in ("endless", "data"):
    os.close(in_r)
    unit = spec.get("unit", "y\n").encode()
    chunk = unit * ((1 << 20) // len(unit))
    total = spec.get("bytes", 1 << 62)
    try:
        while written < total:
            n = os.write(in_w, chunk[: total - written])
            written += n
    except BrokenPipeError:
        pass
    os.close(in_w)
_, status, usage = os.wait4(pid, 0)
err = b""
while True:
    b = os.read(err_r, 65536)
    if not b:
        break
    err += b
print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "maxrss": usage.ru_maxrss * 1024,
                  "stderr": err.decode("utf-8", "replace"), "written": written}))
"""


def run_measured(args, stdin=None, timeout=120):
    """Runs the binary; returns (exit code, stderr, peak RSS in bytes, bytes written to its stdin).
    `stdin`: None (/dev/null), a path, "endless", or (unit, bytes)."""
    if stdin is None or isinstance(stdin, (str, pathlib.Path)) and stdin != "endless":
        spec = {"kind": "file", "path": str(stdin or "/dev/null")}
    elif stdin == "endless":
        spec = {"kind": "endless"}
    else:
        spec = {"kind": "data", "unit": stdin[0], "bytes": stdin[1]}
    proc = subprocess.run([sys.executable, "-S", "-c", MEASURE, json.dumps([BIN, *map(str, args)]), json.dumps(spec),
                           str(timeout)], capture_output=True, timeout=timeout + 60)
    assert proc.returncode == 0, proc.stderr.decode()
    r = json.loads(proc.stdout)
    assert r["rc"] >= 0, f"killed by signal {-r['rc']} (a hang is killed after {timeout} s)"
    return r["rc"], r["stderr"], r["maxrss"], r["written"]


def assert_refused(result, code, *fragments):
    rc, err = result[0], result[1]
    assert rc == code, f"exit {rc}, stderr: {err}"
    first = err.strip().splitlines()[0] if err.strip() else ""
    for f in fragments:
        assert f.lower() in first.lower(), f"{f!r} not in {first!r}"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """Peak memory of the binary refusing a directory: what it holds without reading any input."""
    result = run_measured(["run", "--model", MODEL, "--file", tmp_path_factory.mktemp("baseline")])
    assert_refused(result, USAGE, "directory")
    return result[2]


def test_directory_is_refused_as_a_usage_error(tmp_path):
    assert_refused(run_measured(["run", "--model", MODEL, "--file", tmp_path]), USAGE, str(tmp_path), "a directory")


def test_dev_zero_is_refused_as_a_device_without_reading(baseline):
    result = run_measured(["run", "--model", MODEL, "--file", "/dev/zero"])
    assert_refused(result, USAGE, "/dev/zero", "character device")
    assert result[2] <= baseline + 4 * MIB, f"peak {result[2]} vs baseline {baseline}"


def test_dev_zero_on_standard_input_is_refused(baseline):
    result = run_measured(["run", "--model", MODEL, "--file", "-"], stdin="/dev/zero")
    assert_refused(result, USAGE, "standard input", "character device")
    assert result[2] <= baseline + 4 * MIB


def test_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # Opening a FIFO for reading blocks until a writer comes; none ever does here (the timeout of
    # run_measured turns a hang into a failure).
    assert_refused(run_measured(["run", "--model", MODEL, "--file", fifo], timeout=60), USAGE, "FIFO")


def test_socket_is_refused(tmp_path):
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        # open() of a socket file fails (ENXIO) before fstat can say what it is: a one-line error.
        rc, err = run_measured(["run", "--model", MODEL, "--file", path])[:2]
        assert rc in (USAGE, INPUT) and str(path) in err and len(err.strip().splitlines()) == 1, err
    finally:
        server.close()


def test_regular_file_over_the_limit_is_refused_from_its_size(tmp_path, baseline):
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:  # sparse: LIMIT + 1 bytes that take no disk
        f.truncate(LIMIT + 1)
    result = run_measured(["run", "--model", MODEL, "--file", big])
    assert_refused(result, INPUT, str(LIMIT + 1), "16 MiB")
    assert result[2] <= baseline + 4 * MIB, f"read before refusing: peak {result[2]} vs baseline {baseline}"


def test_file_of_exactly_the_limit_is_read(tmp_path):
    # Read whole (then refused by the tokenizer's length check: 16 MiB of text is far over 512
    # tokens), so the size limit itself lets it through.
    text = tmp_path / "limit.txt"
    text.write_bytes(b"word " * (LIMIT // 5) + b"x" * (LIMIT % 5))
    assert text.stat().st_size == LIMIT
    assert_refused(run_measured(["run", "--model", MODEL, "--file", text]), INPUT, "512 tokens")


def test_endless_standard_input_is_cut_at_the_limit(baseline):
    result = run_measured(["run", "--model", MODEL, "--file", "-"], stdin="endless")
    assert_refused(result, INPUT, "standard input", "larger than 16 MiB")
    # It stopped reading one byte past the limit: what it took is at most that plus the pipe's buffer.
    assert result[3] <= LIMIT + 2 * MIB, f"{result[3]} bytes written before the child stopped reading"
    assert result[2] <= baseline + LIMIT + 4 * MIB, f"peak {result[2]} vs baseline {baseline}"


def test_long_text_on_standard_input_is_not_tokenised_whole():
    # 10 MB of words: the tokenizer stops one token past the model's 512, then the run is refused
    # (the whole encoding took ~900 MB before).
    size = 10 * 10**6
    result = run_measured(["run", "--model", MODEL, "--file", "-"],
                          stdin=("the animal didn't cross the street because it was too tired. ", size))
    assert_refused(result, INPUT, "512 tokens", "--truncate")
    assert result[3] == size
    # Against the same refusal of a 5 KB text (model loaded, text encoded whole): the 10 MB text
    # itself and a few MB of prefix encodings more, nothing per token of the whole text.
    short = run_measured(["run", "--model", MODEL, "--file", "-"],
                         stdin=("the animal didn't cross the street because it was too tired. ", 5000))
    assert_refused(short, INPUT, "tokens, the model allows at most 512")
    assert result[2] <= short[2] + size + 16 * MIB, f"peak {result[2]} vs {short[2]} for 5 KB"


def test_max_memory_zero_is_refused(tmp_path):
    rc, err = run_measured(["run", "--model", MODEL, "--text", "hi", "--max-memory", "0"])[:2]
    assert rc == USAGE, err
    assert "--max-memory" in err and "0 bytes" in err, err
    rc, err = run_measured(["run", "--model", MODEL, "--text", "hi", "--max-load-memory", "0K"])[:2]
    assert rc == USAGE and "--max-load-memory" in err, err


def test_memory_budget_variable_of_zero_is_refused():
    # HEADSCOPE_MEMORY_BUDGET is the budget of the Python bindings (and of a CLI run without
    # --max-memory): 0 is refused there too, once a run asks for its budget.
    env = dict(os.environ, HEADSCOPE_MEMORY_BUDGET="0")
    proc = subprocess.run([BIN, "run", "--model", MODEL, "--text", "hi", "--no-probe", "--no-corpus"],
                          capture_output=True, timeout=120, env=env)
    err = proc.stderr.decode()
    assert proc.returncode == INPUT, err
    assert "HEADSCOPE_MEMORY_BUDGET is 0" in err and len(err.strip().splitlines()) == 1, err
