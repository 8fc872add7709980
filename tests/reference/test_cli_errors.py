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
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "t5", "not supported",
                       "supported: bert, roberta, xlm-roberta, distilbert")


@pytest.mark.parametrize("edit, fragments", [
    ('"model_type": "modernbert"', ("modernbert", "GeGLU")),
    ('"model_type": "bert", "num_local_experts": 8', ("num_local_experts", "mixture of experts")),
    ('"model_type": "bert", "is_decoder": true', ("is_decoder", "causal decoder")),
    ('"model_type": "bert", "quantization_config": {"quant_method": "awq"}', ("quantization_config", "awq")),
])
def test_unimplemented_options_refused_by_name(tmp_path, edit, fragments):
    d = model_copy(tmp_path)
    cfg = (d / "config.json").read_text().replace('"model_type": "bert"', edit)
    (d / "config.json").write_text(cfg)
    assert_clean_error(run("run", "--model", d, "--text", "hi"), *fragments, "config.json")


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


# ---- hostile model files: refused with a one-line error naming the problem, never exit 3 ----

SMOLLM = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def edit_config(d, **changes):
    import json
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))


def test_header_length_a_few_bytes_short(tmp_path):
    # The header is padded with spaces: N − k still parses, but every tensor would shift by k bytes.
    import struct
    d = model_copy(tmp_path)
    data = bytearray((d / "model.safetensors").read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    assert data[8 + n - 1:8 + n] == b" "  # the published file has padding to cut into
    data[:8] = struct.pack("<Q", n - 1)
    (d / "model.safetensors").write_bytes(bytes(data))
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "model.safetensors", "cover")


def test_zero_rows_token_type_embeddings(tmp_path):
    # A [0, 384] tensor used to pass the shape check and be read as null (SIGSEGV).
    import numpy as np
    from safetensors.numpy import load_file, save_file
    d = model_copy(tmp_path)
    weights = load_file(d / "model.safetensors")
    weights["embeddings.token_type_embeddings.weight"] = np.zeros((0, 384), np.float32)
    save_file(weights, d / "model.safetensors")
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "token_type_embeddings", "[0, 384]", "positive")


def test_nan_weights_warn_or_refuse_under_strict(tmp_path):
    import numpy as np
    from safetensors.numpy import load_file, save_file
    d = model_copy(tmp_path)
    weights = load_file(d / "model.safetensors")
    w = weights["encoder.layer.2.intermediate.dense.weight"].copy()
    w[0, :3] = np.nan
    w[1, 0] = np.inf
    weights["encoder.layer.2.intermediate.dense.weight"] = w
    save_file(weights, d / "model.safetensors")
    ok = run("run", "--model", d, "--text", "hi there", "--quiet")
    err = ok.stderr.decode()
    assert ok.returncode == 0, err
    assert "headscope: warning:" in err and "encoder.layer.2.intermediate.dense.weight" in err
    assert "4 non-finite values (3 NaN, 1 Inf)" in err
    assert_clean_error(run("run", "--model", d, "--text", "hi there", "--strict"),
                       "encoder.layer.2.intermediate.dense.weight", "strict")


def test_fractional_head_count(tmp_path):
    d = model_copy(tmp_path)
    edit_config(d, num_attention_heads=384.7)
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "config.json", "num_attention_heads", "whole number")


def test_layer_count_bomb_in_config(tmp_path):
    d = model_copy(tmp_path)
    edit_config(d, num_hidden_layers=2**31 - 1)
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "num_hidden_layers", "limit")


def test_more_layers_declared_than_stored(tmp_path):
    d = model_copy(tmp_path)
    edit_config(d, num_hidden_layers=7)
    assert_clean_error(run("run", "--model", d, "--text", "hi"), "7 layers", "encoder.layer.6")


@pytest.mark.parametrize("key,value", [
    ("hidden_size", "384"), ("num_hidden_layers", [6]), ("vocab_size", {"n": 1}), ("layer_norm_eps", "1e-12"),
    ("layer_norm_eps", 0), ("layer_norm_eps", -1e-12), ("hidden_act", 1), ("max_position_embeddings", True),
    ("intermediate_size", 1536.5), ("position_embedding_type", None),
])
def test_wrongly_typed_config_value(tmp_path, key, value):
    d = model_copy(tmp_path)
    edit_config(d, **{key: value})
    proc = run("run", "--model", d, "--text", "hi", "--quiet")
    if proc.returncode == 0:  # a value the loader may take (null = the default)
        assert value is None
        return
    assert_clean_error(proc, "config.json", key)


def test_gguf_block_count_bomb(tmp_path):
    # The 4-byte edit: llama.block_count = 0x7FFFFFFF. Refused before any per-layer storage.
    import struct
    data = bytearray(SMOLLM.read_bytes())
    key = b"llama.block_count"
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack("<I", data[at:at + 4])[0] == 4  # UINT32
    data[at + 4:at + 8] = struct.pack("<I", 0x7FFFFFFF)
    f = tmp_path / "bomb.gguf"
    f.write_bytes(bytes(data))
    assert_clean_error(run("run", "--model", f, "--text", "hi"), "llama.block_count", "2147483647", "limit")


def test_long_text_is_refused_before_allocating(tmp_path):
    # With a forced 16 MB budget a 500-token run of MiniLM does not fit, dense (≈ 185 MB with the
    # word maps) nor streamed (≈ 58 MB, mostly the 72 heads' 256 × 256 overviews).
    env = dict(os.environ, HEADSCOPE_MEMORY_BUDGET=str(16 << 20))
    proc = subprocess.run([BIN, "run", "--model", str(MODEL), "--text", "word " * 500], capture_output=True,
                          timeout=120, env=env)
    assert_clean_error(proc, "502 tokens", "available", "longest text that fits is about")


def test_logit_attribution_on_an_encoder(tmp_path):
    # Refused before the run: an encoder has no next token to attribute.
    proc = run("run", "--model", MODEL, "--text", "hi", "--no-probe", "--dla", tmp_path / "dla.json")
    assert_clean_error(proc, "--dla", "not a causal model")
    assert not (tmp_path / "dla.json").exists()


def test_logit_attribution_contrast_outside_the_vocabulary(tmp_path):
    smollm2 = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not smollm2.exists():
        pytest.skip("SmolLM2 GGUF not installed")
    proc = run("run", "--model", smollm2, "--text", "hi", "--no-probe", "--dla", tmp_path / "dla.json",
               "--dla-contrast", 10 ** 6)
    assert_clean_error(proc, "--dla-contrast", "vocabulary")


def test_load_budget_refuses_before_loading():
    # --max-load-memory is the budget of Model::load's estimate. MiniLM's weights are fp32 in the
    # file and held as fp32, so the estimate is at least the file's size (86 MiB); under a 32 MiB
    # budget the model is refused with that estimate, and under 1 GiB it loads and runs.
    proc = run("run", "--model", MODEL, "--text", "hi", "--no-probe", "--no-corpus", "--max-load-memory", "32M")
    assert_clean_error(proc, "loading needs about", "but 32 MiB is available")
    need_mib = float(proc.stderr.decode().split("loading needs about ")[1].split(" MiB")[0])
    assert need_mib >= (MODEL / "model.safetensors").stat().st_size / 2**20
    ok = run("run", "--model", MODEL, "--text", "hi", "--no-probe", "--no-corpus", "-q", "--max-load-memory", "1G")
    assert ok.returncode == 0, ok.stderr.decode()
