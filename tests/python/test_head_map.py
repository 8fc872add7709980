"""The head map (Model.head_map, POST /api/head_map) against numpy: the same texts run through
transformers (PyTorch, fp32, eager attention), every pair of heads compared row by row with the
Jensen-Shannon divergence in numpy, and the classical MDS of the distances from numpy's eigh.

What is compared: the distances (to 1e-5: two forward passes' attention, equal to ~1e-6, go through
logarithms), the map's own pairwise distances against numpy's two-dimensional embedding (rotation
and sign free), and the explained share."""
import numpy as np
import pytest

from conftest import MINILM

TEXTS = [
    "The trophy didn't fit in the suitcase because it was too big.",
    "A storm damaged the roof of the school last night.",
    "She gave the book to her brother after he asked for it.",
    "The engineers tested the bridge with heavy trucks.",
]


def attention_from_transformers(texts):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(MINILM))
    model = transformers.AutoModel.from_pretrained(str(MINILM), attn_implementation="eager").eval()
    maps = []
    with torch.no_grad():
        for t in texts:
            out = model(**tok(t, return_tensors="pt"), output_attentions=True)
            maps.append(np.stack([a[0].double().numpy() for a in out.attentions]))  # [L, H, T, T]
    return maps


def numpy_head_map(maps):
    L, H = maps[0].shape[:2]
    N = L * H
    jsd, rows = np.zeros((N, N)), 0

    def plogp(p):
        return np.where(p > 0, p * np.log2(np.where(p > 0, p, 1)), 0.0)

    for a in maps:
        a = a.reshape(N, a.shape[2], a.shape[3])  # [N, T, T]
        neg_h = plogp(a).sum(-1)  # [N, T]
        for i in range(N):
            m = 0.5 * (a[i][None] + a)  # [N, T, T]
            jsd[i] += np.maximum(0.0, 0.5 * (neg_h[i][None] + neg_h) - plogp(m).sum(-1)).sum(-1)
        rows += a.shape[1]
    d = np.sqrt(jsd / rows)
    np.fill_diagonal(d, 0.0)
    J = np.eye(N) - 1.0 / N
    B = -0.5 * J @ (d * d) @ J
    w, v = np.linalg.eigh(B)
    order = np.argsort(w)[::-1]
    w, v = w[order], v[:, order]
    xy = v[:, :2] * np.sqrt(np.maximum(w[:2], 0))
    explained = w[:2].clip(0).sum() / w.clip(0).sum()
    return d, xy, explained


def pairwise(xy):
    return np.sqrt(((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1))


def test_head_map_equals_numpy(minilm):
    ours = minilm.head_map(TEXTS)
    d_ref, xy_ref, explained_ref = numpy_head_map(attention_from_transformers(TEXTS))
    N = minilm.config.n_layer * minilm.config.n_head
    assert ours["distance"].shape == (N, N) and ours["texts"] == len(TEXTS)
    err = np.abs(ours["distance"] - d_ref).max()
    assert err <= 1e-5, err
    assert np.allclose(ours["distance"], ours["distance"].T) and np.all(np.diag(ours["distance"]) == 0)
    xy = np.stack([[h["x"] for h in ours["heads"]], [h["y"] for h in ours["heads"]]], axis=1)
    map_err = np.abs(pairwise(xy) - pairwise(xy_ref)).max()
    assert map_err <= 1e-4 * pairwise(xy_ref).max(), map_err
    assert abs(ours["explained"] - explained_ref) <= 1e-5
    # The map is not degenerate: heads are spread out, and layer 0's heads are not all one point.
    assert pairwise(xy).max() > 0.1
    print(f"head map vs numpy: distances {err:.2e}, map distances {map_err:.2e}, explained {ours['explained']:.3f}")


def test_head_map_refuses_no_texts(minilm, headscope):
    with pytest.raises(headscope.Error):
        minilm.head_map([])


def test_cli_writes_the_same_map(minilm, cli, tmp_path):
    """`headscope headmap --corpus FILE --json OUT` is Model.head_map on the same texts: the same floats."""
    import json
    import subprocess

    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "map.json"
    subprocess.run([str(cli), "headmap", "-m", str(MINILM), "--corpus", str(corpus), "--json", str(out),
                    "--threads", "2"], check=True, capture_output=True)
    got = json.loads(out.read_text())
    ours = minilm.head_map(TEXTS)
    assert got["schema"] == "headscope.head_map/1" and got["texts"] == len(TEXTS)
    assert np.array_equal(np.asarray(got["distance"]), ours["distance"])
    assert [h["x"] for h in got["heads"]] == [h["x"] for h in ours["heads"]]
    bad = subprocess.run([str(cli), "headmap", "-m", str(MINILM), "--corpus", str(tmp_path / "missing.txt")],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "missing.txt" in bad.stderr
