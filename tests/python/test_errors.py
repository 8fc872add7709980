"""Bad input raises headscope.Error (a ValueError; FileError for a missing model, also an OSError;
ResourceError for budgets) with the CLI's one-line messages; where the CLI names a flag as the
remedy, Python names a keyword argument."""
import subprocess

import numpy as np
import pytest

from conftest import MINILM, TEXT


def cli_error(cli, *args):
    proc = subprocess.run([str(cli), "run", *args, "--quiet", "--no-probe"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    return proc.stderr.strip()


def test_error_classes(headscope):
    assert issubclass(headscope.Error, ValueError)
    assert issubclass(headscope.FileError, headscope.Error) and issubclass(headscope.FileError, OSError)
    assert issubclass(headscope.ResourceError, headscope.Error)


def test_missing_model_dir(headscope, cli, tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(headscope.FileError) as e:
        headscope.load(missing)
    message = str(e.value)
    assert str(missing) in message and "\n" not in message
    assert message in cli_error(cli, "--model", str(missing), "--text", "x")


def test_invalid_utf8(minilm, headscope, cli, tmp_path):
    bad = b"caf\xc3 \xff ok"
    with pytest.raises(headscope.Error) as e:
        minilm.run(bad)
    assert "UTF-8" in str(e.value)
    (tmp_path / "bad.txt").write_bytes(bad)
    assert str(e.value) in cli_error(cli, "--model", str(MINILM), "--file", str(tmp_path / "bad.txt"))
    with pytest.raises(headscope.Error, match="UTF-8"):
        minilm.run("lone surrogate \udc80")  # a str that is not valid Unicode text


def test_oversize_text(minilm, headscope, cli, tmp_path):
    long_text = " ".join(["word"] * 600)  # > 512 positions
    with pytest.raises(headscope.Error) as e:
        minilm.run(long_text)
    message = str(e.value)
    assert "512" in message
    # The core says what is wrong; each frontend says how to fix it in its own terms.
    what, remedy = message.split("; pass ")
    assert remedy == "truncate=True to cut it"
    (tmp_path / "long.txt").write_text(long_text)
    cli_message = cli_error(cli, "--model", str(MINILM), "--file", str(tmp_path / "long.txt"))
    assert what + "; pass --truncate to cut it" in cli_message
    assert len(minilm.run(long_text, truncate=True).ids) == 512
    with pytest.raises(headscope.Error, match="bytes; at most"):
        minilm.run("a" * ((16 << 20) + 1))


def test_wrong_ids(minilm, headscope):
    vocab = minilm.config.vocab
    for ids, match in [([101, vocab, 102], rf"ids\[1\] = {vocab} is outside the vocabulary"),
                       ([101, -1], r"ids\[1\] = -1 is outside"), ([], "empty"),
                       ([101, 2.5], r"ids\[1\] = 2.5 is not an integer"), ([2**70], "outside the vocabulary")]:
        with pytest.raises(headscope.Error, match=match):
            minilm.run(ids)
    with pytest.raises(headscope.Error, match="outside the vocabulary"):
        minilm.tokenizer.decode([vocab])


def test_bad_options(minilm, headscope):
    with pytest.raises(headscope.Error, match='maps="sparse"'):
        minilm.run(TEXT, maps="sparse")
    with pytest.raises(headscope.Error, match="logits"):
        minilm.run(TEXT, capture=("logits",))
    with pytest.raises(headscope.Error, match="threads=0"):
        headscope.load(MINILM, threads=0)
    result = minilm.run(TEXT)
    with pytest.raises(headscope.Error, match="layer 6 head 0"):
        result.tile(6, 0, 0, 1, 0, 1)
    with pytest.raises(headscope.Error, match="not a non-empty range"):
        result.tile(0, 0, 3, 3, 0, 1)
    with pytest.raises(headscope.Error, match="is an encoder"):
        minilm.generate("hello", 3)  # an encoder


def test_memory_budget(headscope, monkeypatch):
    monkeypatch.setenv("HEADSCOPE_MEMORY_BUDGET", str(1 << 20))  # 1 MiB
    model = headscope.load(MINILM)
    with pytest.raises(headscope.ResourceError, match="1 MiB is available") as e:
        model.run(" ".join(["word"] * 300), probe=False)
    assert "HEADSCOPE_MEMORY_BUDGET" in str(e.value) and "--max-memory" not in str(e.value)


def test_analyse_attention_bad_input(headscope):
    tokens = ["a", "b", "c"]
    good = np.full((2, 2, 3, 3), 1 / 3, dtype=np.float32)
    with pytest.raises(headscope.Error, match="float32"):
        headscope.analyse_attention(good.astype(np.float64), tokens)
    with pytest.raises(headscope.Error, match="4 axes"):
        headscope.analyse_attention(good[0], tokens)
    with pytest.raises(headscope.Error, match=r"expected \[layer, head, 2, 2\]"):
        headscope.analyse_attention(good, tokens[:2])
    with pytest.raises(headscope.Error, match="C-contiguous"):
        headscope.analyse_attention(np.asfortranarray(np.full((2, 2, 3, 3), 1 / 3, dtype=np.float32)), tokens)
    bad = good.copy()
    bad[1, 0, 2] = [0.5, 0.5, 0.5]
    with pytest.raises(headscope.Error, match="layer 1 head 0 row 2 sums to 1.5"):
        headscope.analyse_attention(bad, tokens)
    bad[1, 0, 2] = [np.nan, 0.5, 0.5]
    with pytest.raises(headscope.Error, match="finite"):
        headscope.analyse_attention(bad, tokens)
    with pytest.raises(headscope.Error, match="special has 2 entries for 3 tokens"):
        headscope.analyse_attention(good, tokens, [True, False])
