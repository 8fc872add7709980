"""Composition scores (headscope composition --json) against a float64 computation from the Hugging
Face weights: every score of every pair of heads, to 1e-5.

The weights come from transformers (a GGUF de-quantised by its loader, which also undoes llama.cpp's
permutation of Q and K rows), with the norm gains folded as docs/circuits.md, "Composition scores" says: the
input RMSNorm's γ into the columns of W_Q, W_K, W_V, Gemma 3's QK-norm γ into the rows of W_Q and
W_K and its post-attention norm's γ into the rows of W_O (Gemma's norms multiply by 1 + w); BERT's
heads read the stream as it is; --no-gains leaves every γ out. The scores are computed here in
another way than headscope computes them (QR factors instead of Gram matrices and pivoted Cholesky;
float64 throughout, torch's BLAS for the products):
  ‖W_Kᵀ M W_V‖ = ‖R_K M R_Vᵀ‖ with W_Kᵀ = Q_K R_K and W_Vᵀ = Q_V R_V (reduced QR), the same for W_Qᵀ
and W_O, so that once what a receiver reads of every sender, R W W_O^s R_V^sᵀ, is formed, every
product is d_head-sized. Models: tiny random Llama (6 query heads over 2 key/value heads), Gemma 3
(QK-norm, sandwich norms, 4 over 1) and BERT from the goldens, and SmolLM2-135M (Q4_1 GGUF).
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch
import transformers

# One thread: the products below are large enough for one core, and a second spinning thread lost
# more than it gained when ctest runs two tests at once on two cores.
torch.set_num_threads(1)
ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
GOLDENS = pathlib.Path(os.environ.get("HEADSCOPE_GOLDENS", ROOT / "build" / "goldens"))
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TOL = 1e-5


def headscope_composition(model, tmp_path, draws=10, extra=()):
    out = tmp_path / "composition.json"
    proc = subprocess.run([BIN, "composition", "--model", str(model), "--json", str(out), "--draws", str(draws),
                           "--top", "3", *extra], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "K-composition" in proc.stdout
    return json.loads(out.read_text())


def np32(t):
    return t.detach().float().numpy().astype(np.float64)


def decoder_layers(model, gemma=False, gains=True):
    """Per layer: W_Q [n_head·d_head, d], W_K, W_V [n_kv_head·d_head, d], W_O [d, n_head·d_head], gains folded."""
    gain = (lambda w: 1.0 + np32(w)) if gemma else np32
    if not gains:
        gain = lambda w: np.ones(w.shape)
    cfg = model.config
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    layers = []
    for layer in model.model.layers:
        a = layer.self_attn
        g_in = gain(layer.input_layernorm.weight)
        wq, wk, wv = (np32(p.weight) * g_in[None, :] for p in (a.q_proj, a.k_proj, a.v_proj))
        wo = np32(a.o_proj.weight)
        if gemma:
            wq *= np.tile(gain(a.q_norm.weight), cfg.num_attention_heads)[:, None]
            wk *= np.tile(gain(a.k_norm.weight), cfg.num_key_value_heads)[:, None]
            wo *= gain(layer.post_attention_layernorm.weight)[:, None]
        layers.append((wq, wk, wv, wo))
    return layers, cfg.num_attention_heads, cfg.num_key_value_heads, d_head


def bert_layers(model):
    cfg = model.config
    layers = [(np32(l.attention.self.query.weight), np32(l.attention.self.key.weight),
               np32(l.attention.self.value.weight), np32(l.attention.output.dense.weight))
              for l in model.encoder.layer]
    return layers, cfg.num_attention_heads, cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads


def r_factor(m):
    """R of the reduced QR of each m [..., d, k]: ‖m X‖ = ‖R X‖ for every X."""
    return torch.linalg.qr(m, mode="r").R


def block_norms(c, rows, dh, n):
    """‖block‖ of c [rows·dh, n·dh] for each d_head × d_head block: [rows, n]."""
    return c.reshape(rows, dh, n, dh).square().sum(dim=(1, 3)).sqrt()


def reference_scores(layers, H, Hkv, dh):
    """Q, K, V [L, H, L, H] (sender layer, head, receiver layer, head), 0 where the receiver is not later."""
    L, g_of = len(layers), [h // (H // Hkv) for h in range(H)]
    heads = []  # per layer: each head's query, key and value rows, W_O^h, R factors and norms
    for wq, wk, wv, wo in (map(torch.from_numpy, layer) for layer in layers):
        d = wq.shape[1]
        p = dict(q=wq.reshape(H, dh, d), k=wk.reshape(Hkv, dh, d), v=wv.reshape(Hkv, dh, d),
                 o=wo.reshape(d, H, dh).permute(1, 0, 2))  # W_O^h [H, d, dh]
        p.update(rq=r_factor(p["q"].transpose(1, 2)), rk=r_factor(p["k"].transpose(1, 2))[g_of],
                 rv=r_factor(p["v"].transpose(1, 2))[g_of], ro=r_factor(p["o"]))  # per query head [H, dh, dh]
        # ‖W_Qᵀ W_K‖ = ‖R_Q R_Kᵀ‖, ‖W_O W_V‖ = ‖R_O R_Vᵀ‖
        p["n_qk"] = torch.linalg.matrix_norm(p["rq"] @ p["rk"].transpose(1, 2))
        p["n_ov"] = torch.linalg.matrix_norm(p["ro"] @ p["rv"].transpose(1, 2))
        # What each head writes, W_O^h R_V^{g(h)}ᵀ, side by side: [d, H·dh].
        p["written"] = (p["o"] @ p["rv"].transpose(1, 2)).permute(1, 0, 2).reshape(d, H * dh)
        heads.append(p)
    written = torch.cat([p["written"] for p in heads], dim=1)
    n_ov = torch.cat([p["n_ov"] for p in heads])
    out = {kind: np.zeros((L, H, L, H)) for kind in "QKV"}
    for l2 in range(1, L):
        p, n = heads[l2], l2 * H  # n sender heads: every head of layers 0 .. l2 − 1
        d = p["q"].shape[2]
        reads = torch.cat([(p["rk"] @ p["q"]).reshape(H * dh, d), p["k"].reshape(-1, d), p["v"].reshape(-1, d)])
        c = reads @ written[:, :n * dh]
        shared = lambda first: c[first:first + Hkv * dh].reshape(Hkv, dh, n * dh)[g_of]  # [H, dh, n·dh]
        num = {"Q": block_norms(c[:H * dh], H, dh, n),  # ‖R_K W_Q^r (W_O^s R_V^sᵀ)‖
               "K": block_norms((p["rq"] @ shared(H * dh)).reshape(H * dh, -1), H, dh, n),  # ‖R_Q^r W_K W_O^s R_V^sᵀ‖
               "V": block_norms((p["ro"] @ shared((H + Hkv) * dh)).reshape(H * dh, -1), H, dh, n)}
        den = {"Q": p["n_qk"][:, None] * n_ov[None, :n], "K": p["n_qk"][:, None] * n_ov[None, :n],
               "V": p["n_ov"][:, None] * n_ov[None, :n]}
        for kind in "QKV":  # [h2, sender] → [l1, h1, l2, h2]
            out[kind][:l2, :, l2, :] = (num[kind] / den[kind]).T.reshape(l2, H, H).numpy()
    return out


def check(got, layers, H, Hkv, dh, name):
    L = len(layers)
    assert got["schema"] == "headscope.composition/1"
    assert got["shape"] == [L, H, L, H]
    assert got["rope"].startswith("not included")
    ref = reference_scores(layers, H, Hkv, dh)
    worst = 0.0
    for kind in "QKV":
        mine = np.array(got["scores"][kind], dtype=np.float64)
        assert mine.shape == (L, H, L, H)
        worst = max(worst, float(np.abs(mine - ref[kind]).max()))
        # The top pairs are the largest scores of the tensor.
        top = got["top"][kind][0]
        assert top["score"] == pytest.approx(float(mine.max()), abs=1e-7)
        assert top["sender"]["layer"] < top["receiver"]["layer"]
        b = got["baseline"][kind]
        assert 0 < b["mean"] < 1 and b["std"] > 0
    print(f"{name}: {L}x{H} heads, max |headscope - float64| = {worst:.2e}")
    assert worst <= TOL, f"{name}: {worst}"
    return ref


@pytest.mark.parametrize("name", ["llama_gqa3", "gemma3_text"])
def test_tiny_decoders(tmp_path, name):
    folder = GOLDENS / "decoders" / name
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    check(headscope_composition(folder, tmp_path), *decoder_layers(model, gemma=name.startswith("gemma")), name)


def test_tiny_gemma3_without_gains(tmp_path):
    folder = GOLDENS / "decoders" / "gemma3_text"
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    got = headscope_composition(folder, tmp_path, extra=["--no-gains"])
    assert got["folded"].startswith("none")
    check(got, *decoder_layers(model, gemma=True, gains=False), "gemma3_text, no gains")


def test_tiny_bert(tmp_path):
    folder = GOLDENS / "encoders" / "bert_cls"
    model = transformers.AutoModel.from_pretrained(str(folder), dtype=torch.float32)
    check(headscope_composition(folder, tmp_path), *bert_layers(model), "bert_cls")


def test_smollm2(tmp_path):
    if not SMOLLM2.exists():
        pytest.skip("SmolLM2 GGUF not installed")
    got = headscope_composition(SMOLLM2, tmp_path, draws=100)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(SMOLLM2.parent), gguf_file=SMOLLM2.name,
                                                              dtype=torch.float32)
    ref = check(got, *decoder_layers(model), "SmolLM2-135M")
    # Real heads compose far above random matrices of their shapes.
    for kind in "QKV":
        b = got["baseline"][kind]
        assert ref[kind].max() > b["mean"] + 10 * b["std"]
