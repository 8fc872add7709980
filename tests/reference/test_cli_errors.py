"""Bad input to `headscope run`: every case must end with a one-line error on stderr naming the
problem and a non-zero exit code — never a crash (signal), a hang, or output that looks fine."""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
MODEL = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))


def run(*args, input_bytes=None):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, timeout=120, input=input_bytes)


def assert_clean_error(proc, *fragments, code=2):
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == code, f"exit {proc.returncode}, stderr: {err}"
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected a one-line error, got: {err}"
    for f in fragments:
        assert f.lower() in err.lower(), f"{f!r} not in {err!r}"
    assert proc.stdout == b""


def model_copy(tmp_path, skip=()):
    d = tmp_path / "model"
    d.mkdir()
    for f in MODEL.iterdir():
        if f.is_file() and f.name not in skip:
            shutil.copy(f, d / f.name)
    return d


def test_missing_model_directory(tmp_path):
    assert_clean_error(run("run", "--model", tmp_path / "nope", "--text", "hi"), "no such file")


def test_directory_without_config(tmp_path):
    assert_clean_error(run("run", "--model", tmp_path, "--text", "hi"), "config.json")


def test_missing_weights(tmp_path):
    d = model_copy(tmp_path, skip={"model.safetensors"})
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "safetensors")


def test_only_pytorch_bin_says_how_to_convert(tmp_path):
    d = model_copy(tmp_path, skip={"model.safetensors"})
    (d / "pytorch_model.bin").write_bytes(b"\x80\x02not really a pickle")
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "pytorch_model.bin", "safe")


def test_truncated_weights(tmp_path):
    d = model_copy(tmp_path)
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "model.safetensors")


def test_corrupt_header(tmp_path):
    d = model_copy(tmp_path)
    data = bytearray((d / "model.safetensors").read_bytes())
    data[8:40] = b"{ this is not json at all !!!!!!"
    (d / "model.safetensors").write_bytes(bytes(data))
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "model.safetensors")


def test_missing_tokenizer(tmp_path):
    d = model_copy(tmp_path, skip={"tokenizer.json", "vocab.txt"})
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "tokenizer")


def test_unsupported_architecture(tmp_path):
    d = model_copy(tmp_path)
    cfg = (d / "config.json").read_text().replace('"model_type": "bert"', '"model_type": "t5"')
    (d / "config.json").write_text(cfg)
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "t5", "not supported")


def test_config_with_wrong_shapes(tmp_path):
    d = model_copy(tmp_path)
    cfg = (d / "config.json").read_text().replace('"hidden_size": 384', '"hidden_size": 768')
    (d / "config.json").write_text(cfg)
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "shape")


def test_text_too_long_fails_unless_truncate(tmp_path):
    text = "word " * 600
    assert_clean_error(run("run", "--model", MODEL, "--text", text), "512", "--truncate")
    ok = run("run", "--model", MODEL, "--text", text, "--truncate", "--quiet")
    assert ok.returncode == 0, ok.stderr


def test_invalid_utf8(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"caf\xc3 ok \xff\xfe")
    assert_clean_error(run("run", "--model", MODEL, "--file", f), "utf-8")


@pytest.mark.parametrize("text", ["", "   \t\n  "])
def test_empty_text(text):
    assert_clean_error(run("run", "--model", MODEL, "--text", text), "empty")


def test_missing_text_is_a_usage_error():
    proc = run("run", "--model", MODEL)
    assert proc.returncode == 1 and b"--text" in proc.stderr


def test_help_and_version():
    assert run("--help").returncode == 0
    assert run("run", "--help").returncode == 0
    assert b"headscope" in run("--version").stdout


def test_unwritable_output(tmp_path):
    assert_clean_error(run("run", "--model", MODEL, "--text", "hi there", "--json", tmp_path / "no" / "dir" / "x.json",
                           "--quiet"), "x.json")
