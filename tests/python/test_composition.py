"""Composition scores from Python (docs/python.md, "Composition scores"): the arrays, baselines, top
pairs and JSON equal `headscope composition --json` bit for bit on MiniLM and SmolLM2; the arrays
have the documented shape and mask, grid() and to_frame() lay out the same numbers; and on MiniLM a
few scores are recomputed with NumPy from the checkpoint's own matrices (a BERT has no norm gain
in front of a head, so the stored W_Q, W_K, W_V and W_O are what the scores read)."""
import json
import subprocess

import numpy as np
import pytest

from conftest import MINILM, SMOLLM2, THREADS

KINDS = ("Q", "K", "V")


def cli_document(cli, model, tmp_path, *args):
    out = tmp_path / "composition.json"
    subprocess.run([str(cli), "composition", "--model", str(model), "--threads", str(THREADS), "--json", str(out),
                    *args], check=True, capture_output=True)
    return json.loads(out.read_text())


def without_timings(doc):
    return {k: v for k, v in doc.items() if k != "seconds"}


def assert_equals_cli(comp, doc):
    assert without_timings(comp.raw) == without_timings(doc)
    for kind in KINDS:
        np.testing.assert_array_equal(comp.scores(kind), np.asarray(doc["scores"][kind], dtype=np.float32))
        assert comp.baseline[kind] == (doc["baseline"][kind]["mean"], doc["baseline"][kind]["std"])
        assert comp.top(kind, 10) == doc["top"][kind]


def test_minilm_equals_the_cli(minilm, cli, tmp_path):
    comp = minilm.composition()
    assert (comp.draws, comp.seed, comp.gains) == (100, 0, True)
    assert_equals_cli(comp, cli_document(cli, MINILM, tmp_path))
    assert set(comp.seconds) == {"scores", "baseline", "cpu"} and comp.seconds["scores"] > 0


def test_smollm2_equals_the_cli(smollm2, cli, tmp_path):
    comp = smollm2.composition(draws=20, seed=3)
    assert (comp.draws, comp.seed, comp.gains) == (20, 3, True)
    doc = cli_document(cli, SMOLLM2, tmp_path, "--draws", "20", "--seed", "3")
    assert doc["baseline"]["draws"] == 20 and doc["baseline"]["seed"] == 3
    assert_equals_cli(comp, doc)
    # GQA: 9 query heads over 3 key/value heads. K-composition's highest pair (docs/circuits.md).
    assert comp.top("k", 1)[0] == {"sender": {"layer": 17, "head": 8}, "receiver": {"layer": 18, "head": 7},
                                   "score": pytest.approx(0.1798, abs=5e-4)}
    raw = smollm2.composition(draws=20, seed=3, gains=False)
    assert raw.gains is False
    assert_equals_cli(raw, cli_document(cli, SMOLLM2, tmp_path, "--draws", "20", "--seed", "3", "--no-gains"))
    assert not np.array_equal(raw.v, comp.v)  # SmolLM2's RMSNorm gains change what its heads read


def test_shapes_mask_grid_and_frame(minilm):
    comp = minilm.composition(draws=10)
    c = minilm.config
    L, H = c.n_layer, c.n_head
    for kind in KINDS:
        a = comp.scores(kind)
        assert a.shape == (L, H, L, H) and a.dtype == np.float32 and not a.flags.writeable
        later = np.arange(L)[:, None, None, None] < np.arange(L)[None, None, :, None]
        later = np.broadcast_to(later, a.shape)
        assert (a[~later] == 0).all() and (a[later] > 0).all() and (a[later] <= 1).all()
        g = comp.grid(kind)
        assert g.shape == (L * H, L * H) and np.shares_memory(g, a)
        assert g[1 * H + 2, 4 * H + 5] == a[1, 2, 4, 5]
        best = comp.top(kind, 3)
        assert [p["score"] for p in best] == sorted((float(x) for x in a[later]), reverse=True)[:3]
    assert comp.q is comp.scores("q")
    assert "highest Q" in repr(comp)


def test_frame_has_one_row_per_pair(minilm):
    pytest.importorskip("pandas")
    comp = minilm.composition(draws=10)
    L, H = minilm.config.n_layer, minilm.config.n_head
    frame = comp.to_frame()
    assert list(frame.columns) == ["sender_layer", "sender_head", "receiver_layer", "receiver_head", "q", "k", "v"]
    assert len(frame) == H * H * L * (L - 1) // 2
    row = frame[(frame.sender_layer == 1) & (frame.sender_head == 2) & (frame.receiver_layer == 4) &
                (frame.receiver_head == 5)].iloc[0]
    assert (row.q, row.k, row.v) == (comp.q[1, 2, 4, 5], comp.k[1, 2, 4, 5], comp.v[1, 2, 4, 5])


def test_minilm_scores_from_the_checkpoint(minilm):
    """Q, K and V of a few pairs from the safetensors matrices, dense d_model x d_model, in float64."""
    safetensors = pytest.importorskip("safetensors.numpy")
    w = safetensors.load_file(str(MINILM / "model.safetensors"))
    c = minilm.config
    d = c.d_head

    def head(layer, h):
        rows = slice(h * d, (h + 1) * d)
        get = lambda name: w[f"encoder.layer.{layer}.attention.{name}.weight"].astype(np.float64)  # noqa: E731
        # torch's Linear stores [out, in]: a head's rows of W_Q, W_K, W_V read the stream,
        # its columns of W_O write into it.
        wq, wk, wv, wo = get("self.query")[rows], get("self.key")[rows], get("self.value")[rows], get("output.dense")
        return wq.T @ wk, wo[:, rows] @ wv  # W_QK, W_OV

    def score(a, b):
        return np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))

    comp = minilm.composition(draws=10)
    for (l1, h1), (l2, h2) in [((1, 1), (2, 9)), ((0, 2), (1, 9)), ((0, 0), (5, 11)), ((3, 7), (4, 0))]:
        _, ov_s = head(l1, h1)
        qk_r, ov_r = head(l2, h2)
        expected = {"Q": score(qk_r.T, ov_s), "K": score(qk_r, ov_s), "V": score(ov_r, ov_s)}
        for kind in KINDS:
            assert comp.scores(kind)[l1, h1, l2, h2] == pytest.approx(expected[kind], rel=2e-5), (kind, l1, h1, l2, h2)


def test_errors_name_the_option(minilm, headscope):
    with pytest.raises(headscope.Error, match="draws"):
        minilm.composition(draws=1)
    with pytest.raises(headscope.Error, match="draws"):
        minilm.composition(draws=2.5)
    with pytest.raises(headscope.Error, match="seed"):
        minilm.composition(seed=-1)
    with pytest.raises(headscope.Error, match="gains"):
        minilm.composition(gains="yes")
    comp = minilm.composition(draws=2)
    with pytest.raises(headscope.Error, match='give "Q", "K" or "V"'):
        comp.top("O", 3)
    with pytest.raises(headscope.Error):
        comp.top("Q", 0)
