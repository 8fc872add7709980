"""Long texts through `headscope run`: streamed maps against transformers' own attention (pooled
and sliced here in numpy), the memory budget said up front, and bad tiles refused.

The streamed run never stores the [L, H, T, T] maps; what it writes are the pooled overviews
(overview_sum / overview_max [L, H, C, C]), the attention each key receives [L, H, T], the mean
weight per offset [L, H, 2T-1] and exact tiles. Each is computed here from
`output_attentions=True` of the same model in PyTorch (fp32, CPU)."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
MODEL = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
SENTENCES = [
    "The trophy didn't fit in the suitcase because it was too big.",
    "When the river rose, the villagers carried their grain to the old mill on the hill.",
    "She said that the letters, which had been lost for years, were found in a drawer.",
    "Why do several heads beat one? Each can look at a different relation at once.",
]
TEXT = " ".join(SENTENCES * 6)  # about 400 tokens


def headscope(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def reference():
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModel.from_pretrained(MODEL, attn_implementation="eager").eval()
    enc = tok(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    return np.stack([a[0].numpy() for a in out.attentions]).astype(np.float64)  # [L, H, T, T]


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    out = tmp_path_factory.mktemp("streamed")
    proc = headscope("run", "--model", str(MODEL), "--text", TEXT, "--maps", "stream", "--overview-cells", "50",
                     "--npy", str(out), "--tile", "3", "5", "10", "60", "0", "400", "--json", str(out / "run.json"),
                     "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out


def test_overviews_pool_the_reference_maps(reference, streamed):
    L, H, T, _ = reference.shape
    s = np.load(streamed / "overview_sum.npy")
    m = np.load(streamed / "overview_max.npy")
    C = s.shape[-1]
    assert s.shape == (L, H, C, C) and C == 50 and T > C
    cell = np.arange(T) * C // T  # token t lies in block t * C // T
    member = np.zeros((C, T))
    member[cell, np.arange(T)] = 1.0
    pooled = member @ reference @ member.T  # [L, H, C, C] block sums
    assert np.abs(s - pooled).max() < 1e-4 * max(1.0, pooled.max())
    big = np.zeros_like(pooled)
    for i in range(C):
        rows = reference[:, :, cell == i, :]
        for j in range(C):
            big[:, :, i, j] = rows[:, :, :, cell == j].max(axis=(2, 3))
    assert np.abs(m - big).max() < 1e-5


def test_marginals_and_tile_match_the_reference(reference, streamed):
    L, H, T, _ = reference.shape
    received = np.load(streamed / "received.npy")
    # A column sum adds T weights, each within attention's own bound (1e-5) of the reference.
    assert np.abs(received - reference.sum(axis=2)).max() < 1e-5 * T
    offsets = np.load(streamed / "offset_mass.npy")  # [L, H, 2T-1], index d + T - 1
    for d in (-T + 1, -5, -1, 0, 1, 7, T - 1):
        diag = np.diagonal(reference, offset=d, axis1=2, axis2=3)  # a[q, q + d]
        assert np.abs(offsets[:, :, d + T - 1] - diag.mean(axis=-1)).max() < 1e-5  # attention's own bound
    tile = np.load(streamed / "tile.npy")
    assert tile.shape == (50, 400)
    assert np.abs(tile - reference[3, 5, 10:60, 0:400]).max() < 1e-5
    assert not (streamed / "attentions.npy").exists()  # streamed: no dense maps written


def test_streamed_statistics_equal_the_dense_run(streamed, tmp_path):
    proc = headscope("run", "--model", str(MODEL), "--text", TEXT, "--maps", "dense", "--json",
                     str(tmp_path / "run.json"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    dense = json.loads((tmp_path / "run.json").read_text())
    stream = json.loads((streamed / "run.json").read_text())
    # The links on the text ("on_text") read whole maps, so only a dense run has them.
    assert all("on_text" in h for h in dense["heads"]) and not any("on_text" in h for h in stream["heads"])
    for h in dense["heads"]:
        del h["on_text"]
    assert dense["heads"] == stream["heads"]  # statistics and roles, number for number


def test_memory_budget_is_said_up_front():
    proc = headscope("run", "--model", str(MODEL), "--text", TEXT, "--maps", "dense", "--max-memory", "80M")
    assert proc.returncode == 2, proc.stderr
    assert "MiB" in proc.stderr and "budget" in proc.stderr and "--maps stream" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    ok = headscope("run", "--model", str(MODEL), "--text", TEXT, "--maps", "stream", "--max-memory", "80M",
                   "--quiet", "--no-probe")
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("tile", [["0", "0", "0", "999", "0", "5"], ["0", "0", "5", "5", "0", "5"],
                                  ["0", "0", "6", "5", "0", "5"], ["9", "0", "0", "1", "0", "1"]])
def test_bad_tiles_are_refused(tile, tmp_path):
    proc = headscope("run", "--model", str(MODEL), "--text", "A short text.", "--npy", str(tmp_path), "--tile", *tile,
                     "--quiet", "--no-probe")
    assert proc.returncode == 2, proc.stderr
    assert "attention tile" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_json_attention_needs_dense_maps(tmp_path):
    proc = headscope("run", "--model", str(MODEL), "--text", TEXT, "--maps", "stream", "--json-attention", "--json",
                     str(tmp_path / "r.json"), "--quiet")
    assert proc.returncode == 2 and "--maps dense" in proc.stderr, proc.stderr
