"""Bounded input: `headscope run --file` and standard input are read through one reader that refuses
directories, FIFOs, sockets and devices before reading, refuses a regular file over 16 MiB from its
size, and reads a pipe only to one byte past 16 MiB. Each case runs the binary as a child and reads
its peak memory (ru_maxrss from wait4) against a baseline: the same binary refusing a directory,
which reads nothing. Every input is built here."""
import os
import pathlib
import socket
import subprocess
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
MODEL = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
LIMIT = 16 << 20  # limits::kMaxTextFileBytes
MIB = 1 << 20
USAGE, INPUT = 1, 2  # the CLI's exit codes (tools/cli/commands.h)


def run_measured(args, stdin=subprocess.DEVNULL, feed=None, timeout=120):
    """Runs the binary; returns (exit code, stderr, peak RSS in bytes). `feed(pipe)` writes stdin."""
    proc = subprocess.Popen([BIN, *map(str, args)], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = {}
    readers = [threading.Thread(target=lambda k=k, f=f: out.__setitem__(k, f.read()))
               for k, f in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for t in readers:
        t.start()
    if feed is not None:
        feed(proc.stdin)
    timer = threading.Timer(timeout, proc.kill)  # a hang fails the test instead of blocking it
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}"
    return proc.returncode, out["stderr"].decode("utf-8", "replace"), usage.ru_maxrss * 1024


def assert_refused(result, code, *fragments):
    rc, err, _ = result
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
    with open("/dev/zero", "rb") as zero:
        result = run_measured(["run", "--model", MODEL, "--file", "-"], stdin=zero)
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
        rc, err, _ = run_measured(["run", "--model", MODEL, "--file", path])
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
    chunk = b"y\n" * (MIB // 2)
    written = [0]

    def feed(pipe):
        try:
            while written[0] < 64 * LIMIT:  # far past the limit: the child must stop reading first
                pipe.write(chunk)
                written[0] += len(chunk)
        except (BrokenPipeError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except BrokenPipeError:
                pass

    result = run_measured(["run", "--model", MODEL, "--file", "-"], stdin=subprocess.PIPE, feed=feed)
    assert_refused(result, INPUT, "standard input", "larger than 16 MiB")
    assert written[0] < 64 * LIMIT, "the child read everything"
    assert result[2] <= baseline + LIMIT + 8 * MIB, f"peak {result[2]} vs baseline {baseline}"


def test_long_text_on_standard_input_is_not_tokenised_whole(baseline):
    # 10 MB of words: the tokenizer stops one token past the model's 512, then the run is refused
    # (the whole encoding took ~900 MB before).
    text = (b"the animal didn't cross the street because it was too tired. " * 170000)[: 10 * 10**6]
    result = run_measured(["run", "--model", MODEL, "--file", "-"], stdin=subprocess.PIPE,
                          feed=lambda p: (p.write(text), p.close()))
    assert_refused(result, INPUT, "512 tokens", "--truncate")
    # The text, the model's weights (~90 MB) and the reader's text copy; nothing per token.
    assert result[2] <= baseline + 3 * len(text) + 200 * MIB, f"peak {result[2]} vs baseline {baseline}"


def test_max_memory_zero_is_refused(tmp_path):
    rc, err, _ = run_measured(["run", "--model", MODEL, "--text", "hi", "--max-memory", "0"])
    assert rc == USAGE, err
    assert "--max-memory" in err and "0 bytes" in err, err
    rc, err, _ = run_measured(["run", "--model", MODEL, "--text", "hi", "--max-load-memory", "0K"])
    assert rc == USAGE and "--max-load-memory" in err, err
