"""Norm-weighted attention, attention rollout and direct logit attribution against numpy and transformers.

`headscope run --npy` writes value_norms [L, H, T] (‖v_k W_O,hᵀ‖, Kobayashi et al. 2020),
norm_weighted [L, H, T, T] and rollout [L, T, T] (Abnar & Zuidema 2020); `--dla` the direct logit
attribution table. Two references for each:
  - numpy in float64 on headscope's own attention and value norms: equal to 1e-6 (the composition);
  - transformers (PyTorch, fp32, eager attention): the values V recomputed from its hidden states and
    W_O from its weights, its attention for the rollout; equal to the forward pass's own agreement
    (attention 1e-5, so relative 1e-4 on norms).
The logit attribution's parts plus rest equal the logit, the rest is below 1e-4, and the parts alone
give transformers' logit of the next token. Models: all-MiniLM-L6-v2 (BERT, value bias through W_O)
and SmolLM2-135M (GQA: 9 query heads over 3 value heads), one short text each to keep the test quick.
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch
import transformers

torch.set_num_threads(2)
ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
MINILM = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = "The keys to the old cabinet were found under the mat, weren't they?"


def run_headscope(model, out_dir, *extra):
    proc = subprocess.run([BIN, "run", "--model", str(model), "--text", TEXT, "--npy", str(out_dir), "--quiet",
                           "--no-probe", "--maps", "dense", *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    load = lambda name: np.load(out_dir / name).astype(np.float64)
    ids = [t["id"] for t in json.loads((out_dir / "tokens.json").read_text())]
    return ids, {n: load(n + ".npy") for n in ("attentions", "value_norms", "norm_weighted", "rollout")}


def rollout_reference(attn):
    """Â_l = .5 mean_h A_l + .5 I, rows renormalised; R_l = Â_l R_{l-1}: [L, T, T] in float64."""
    T = attn.shape[-1]
    out, r = [], np.eye(T)
    for a in attn:
        mixed = 0.5 * a.mean(axis=0) + 0.5 * np.eye(T)
        mixed /= mixed.sum(axis=1, keepdims=True)
        r = mixed @ r
        out.append(r)
    return np.stack(out)


def value_norms_reference(values, w_o, n_head, kv_head_of):
    """values [L] of [T, n_kv_head·Dh], w_o [L] of [D, n_head·Dh] → ‖v_g(h),k W_O[:, h]ᵀ‖ [L, H, T]."""
    out = []
    for v, w in zip(values, w_o):
        dh = w.shape[1] // n_head
        out.append([np.linalg.norm(v[:, kv_head_of[h] * dh:(kv_head_of[h] + 1) * dh] @ w[:, h * dh:(h + 1) * dh].T,
                                   axis=1) for h in range(n_head)])
    return np.array(out)


def check(got, ref_attn, ref_norms, label):
    attn, norms = got["attentions"], got["value_norms"]
    # The composition, on headscope's own maps: to 1e-6 of each key's value norm (SmolLM2's reach 50,
    # where one float32 rounding of α·‖f‖ is already 3e-6 absolute).
    scale = np.maximum(norms[:, :, None, :], 1.0)
    assert (np.abs(got["norm_weighted"] - attn * norms[:, :, None, :]) / scale).max() <= 1e-6
    assert np.abs(got["rollout"] - rollout_reference(attn)).max() <= 1e-6
    # Against transformers' attention, values and W_O.
    err_norms = float((np.abs(norms - ref_norms) / np.maximum(ref_norms, 1e-3)).max())
    err_nw = float(np.abs(got["norm_weighted"] - ref_attn * ref_norms[:, :, None, :]).max() / ref_norms.max())
    err_roll = float(np.abs(got["rollout"] - rollout_reference(ref_attn)).max())
    print(f"\n{label}: value norms rel {err_norms:.2e}, norm-weighted rel {err_nw:.2e}, rollout {err_roll:.2e}")
    assert err_norms <= 1e-4 and err_nw <= 1e-4 and err_roll <= 1e-5


def test_minilm_norm_weighted_and_rollout(tmp_path):
    model = transformers.AutoModel.from_pretrained(MINILM, attn_implementation="eager").float().eval()
    ids, got = run_headscope(MINILM, tmp_path)
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
        # V = x W_Vᵀ + b_V from the layer's input: its bias is part of what W_O carries (as in the paper).
        values = [layer.attention.self.value(out.hidden_states[l][0]).numpy() for l, layer in enumerate(model.encoder.layer)]
    w_o = [layer.attention.output.dense.weight.detach().numpy() for layer in model.encoder.layer]
    H = model.config.num_attention_heads
    ref_norms = value_norms_reference(values, w_o, H, list(range(H)))
    check(got, torch.stack(out.attentions)[:, 0].double().numpy(), ref_norms, "all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def smollm2():
    if not SMOLLM2.exists():
        pytest.skip("SmolLM2 GGUF not installed")
    return transformers.AutoModelForCausalLM.from_pretrained(str(SMOLLM2.parent), gguf_file=SMOLLM2.name,
                                                             dtype=torch.float32, attn_implementation="eager").eval()


def test_smollm2_norm_weighted_rollout_and_logit_attribution(tmp_path, smollm2):
    dla_path = tmp_path / "dla.json"
    ids, got = run_headscope(SMOLLM2, tmp_path, "--dla", str(dla_path), "--dla-contrast", "13")
    cfg = smollm2.config
    H, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
    with torch.no_grad():
        out = smollm2(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
        layers = smollm2.model.layers
        values = [layer.self_attn.v_proj(layer.input_layernorm(out.hidden_states[l][0])).numpy()
                  for l, layer in enumerate(layers)]
    w_o = [layer.self_attn.o_proj.weight.detach().numpy() for layer in layers]
    ref_norms = value_norms_reference(values, w_o, H, [h // (H // Hkv) for h in range(H)])
    check(got, torch.stack(out.attentions)[:, 0].double().numpy(), ref_norms, "SmolLM2-135M")

    logits = out.logits[0].double().numpy()  # [T, vocab]
    dla = json.loads(dla_path.read_text())
    assert dla["schema"] == "headscope.dla/1"
    rows = dla["attributions"]
    assert len(rows) == 2 * len(ids)
    worst_rest, worst_ref = 0.0, 0.0
    for a in rows:
        p, t, c = a["position"], a["target"], a["contrast"]
        assert t == (ids[p + 1] if p + 1 < len(ids) else int(logits[p].argmax()))
        parts = a["embeddings"] + np.sum(a["heads"]) + np.sum(a["attention_bias"]) + np.sum(a["mlp"]) + a["final_norm_bias"]
        assert np.array(a["heads"]).shape == (cfg.num_hidden_layers, H)
        assert abs(parts + a["rest"] - a["logit"]) <= 1e-9
        worst_rest = max(worst_rest, abs(a["rest"]))
        ref = logits[p, t] - (logits[p, c] if c is not None else 0.0)
        worst_ref = max(worst_ref, abs(parts - ref))
    print(f"SmolLM2-135M logit attribution: max |rest| {worst_rest:.2e}, max |Σ parts − transformers| {worst_ref:.2e}")
    assert worst_rest <= 1e-4
    assert worst_ref <= 1e-4
