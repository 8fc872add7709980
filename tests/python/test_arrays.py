"""The package's arrays against the CLI's `headscope run --npy` (bit for bit: same text, same
threads, same core library) and its JSON against `run --json`, on the default model and SmolLM2."""
import json
import subprocess

import numpy as np
import pytest

from conftest import TEXT, THREADS

ARRAYS = ["attention", "head_outputs", "contributions", "hidden_states", "queries", "keys", "value_norms"]
NPY = {"attention": "attentions.npy"}


def cli_run(cli, model, text, out_dir, *flags):
    text_file = out_dir / "text.txt"
    text_file.write_bytes(text.encode("utf-8"))
    proc = subprocess.run([str(cli), "run", "--model", str(model), "--file", str(text_file), "--npy", str(out_dir),
                           "--json", str(out_dir / "run.json"), "--qk", "--threads", str(THREADS), "--quiet", *flags],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out_dir


@pytest.mark.parametrize("which", ["minilm", "smollm2"])
def test_arrays_equal_cli_npy(which, request, cli, tmp_path):
    model = request.getfixturevalue(which)
    text = TEXT + " Then it slept."
    # Both measure the probe (no corpus evidence): the same roles from the same numbers.
    result = model.run(text, capture=("attention", "head_outputs", "contributions", "hidden_states", "queries", "keys"),
                       corpus=False)
    out = cli_run(cli, model.path, text, tmp_path, "--no-corpus")
    tokens = json.loads((out / "tokens.json").read_text())
    assert result.ids == [t["id"] for t in tokens]
    assert result.offsets == [(t["begin"], t["end"]) for t in tokens]
    c = model.config
    T = len(result.ids)
    shapes = {"attention": (c.n_layer, c.n_head, T, T), "head_outputs": (c.n_layer, c.n_head, T, c.d_head),
              "contributions": (c.n_layer, c.n_head, T, c.d_model), "hidden_states": (c.n_layer + 1, T, c.d_model),
              "queries": (c.n_layer, c.n_head, T, c.d_head), "keys": (c.n_layer, c.n_kv_head, T, c.d_head),
              "value_norms": (c.n_layer, c.n_head, T)}
    for name in ARRAYS:
        got = getattr(result, name)
        want = np.load(out / NPY.get(name, f"{name}.npy"))
        assert got.dtype == np.float32 and got.shape == shapes[name] == want.shape, name
        assert np.array_equal(got, want), f"{which} {name}: max |diff| {np.abs(got - want).max()}"
    # The heads of json() are those of `run --json` (the same writer; the package adds the server's
    # streamed/overview fields).
    mine, theirs = json.loads(result.json()), json.loads((out / "run.json").read_text())
    assert mine["schema"] == theirs["schema"] == "headscope.run/2"
    assert mine["heads"] == theirs["heads"] and mine["tokens"] == theirs["tokens"]
    assert mine["streamed"] is False and mine["overview"]["T"] == T


def test_arrays_are_zero_copy_views(minilm):
    result = minilm.run(TEXT, capture=("attention", "hidden_states"))
    a = result.attention
    assert not a.flags.writeable and not a.flags.owndata  # a view of the C++ capture
    assert result.attention.__array_interface__["data"][0] == a.__array_interface__["data"][0]
    del result  # the array keeps the capture alive
    assert np.allclose(a.sum(axis=-1), 1.0, atol=1e-5)
    assert minilm.run(TEXT).head_outputs is None  # not captured unless asked


def test_ids_run_equals_text_run(minilm):
    by_text = minilm.run(TEXT)
    by_ids = minilm.run(by_text.ids)
    assert by_ids.ids == by_text.ids
    assert by_ids.special == by_text.special == [True] + [False] * (len(by_text.ids) - 2) + [True]
    assert np.array_equal(by_ids.attention, by_text.attention)


def test_stream_tiles_equal_dense_maps(minilm):
    text = " ".join([TEXT] * 6)
    dense = minilm.run(text, maps="dense", capture=("attention",))
    streamed = minilm.run(text, maps="stream")
    assert streamed.streamed and streamed.attention is None and json.loads(streamed.json())["streamed"] is True
    T = len(dense.ids)
    for layer, head in [(0, 0), (3, 7), (5, 11)]:
        tile = streamed.tile(layer, head, 5, T, 0, T - 3)
        assert tile.shape == (T - 5, T - 3)
        np.testing.assert_allclose(tile, dense.attention[layer, head, 5:, : T - 3], atol=1e-6)
        assert np.array_equal(dense.tile(layer, head, 0, T, 0, T), dense.attention[layer, head])
        # Norm-weighted shares, tile by tile, against numpy on the dense run's maps and value norms.
        w = dense.attention[layer, head].astype(np.float64) * dense.value_norms[layer, head][None, :]
        w /= w.sum(axis=-1, keepdims=True)
        norm = streamed.tile(layer, head, 5, T, 0, T - 3, view="norm")
        np.testing.assert_allclose(norm, w[5:, : T - 3], atol=1e-6)
    with pytest.raises(ValueError, match="rollout has no tile"):
        streamed.tile(0, 0, 0, 1, 0, 1, view="rollout")
    # The statistics do not depend on how the maps were held.
    for a, b in zip(dense.stats(), streamed.stats()):
        assert a.entropy_bits == pytest.approx(b.entropy_bits, abs=1e-6)


def test_cached_evidence_roles_equal_cli(minilm, cli, tmp_path):
    """With the corpus evidence cached, run() takes the probe from it instead of measuring it
    again: the roles are those of `headscope run --no-probe` (which then reads the same cache)."""
    if not minilm.corpus_source:
        pytest.skip("no cached corpus evidence for the default model (make evidence)")
    result = minilm.run(TEXT)
    out = cli_run(cli, minilm.path, TEXT, tmp_path, "--no-probe")
    theirs = json.loads((out / "run.json").read_text())["heads"]
    assert json.loads(result.json())["heads"] == theirs
    assert any(h["roles"]["primary"]["id"] in ("syntactic", "induction", "coreference") for h in theirs)
