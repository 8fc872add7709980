"""Reverse mode (headscope grad, saliency, patch --method attribution) against PyTorch autograd.

`headscope grad --npy DIR` writes ∂metric/∂(every captured activation); here transformers runs the
same token ids in float32 with eager attention, and autograd gives the same gradients through
hooks only: retain_grad on the hidden states, the attention probabilities, the query, key and value
tensors eager attention receives (after QK-norm and RoPE, keys and values before repeat_kv), the
input of o_proj (head outputs), o_proj's output (the attention block, before a sandwich norm) and
what the feed-forward block adds. The receivers (each head's q, k, v path alone) are
torch.autograd.grad of that head's slice back to the layer's input. Every tensor must agree to
1e-4 of its largest entry.

Attribution patching is checked against (a_source − a_base) · ∂metric/∂a computed from torch's own
activations and gradients, and integrated gradients against Captum's IntegratedGradients over the
token embeddings with the same steps, rule and baseline.

Tests whose name holds "real" load MiniLM, SmolLM2-135M (GGUF) and Gemma 3 270M (GGUF).
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch
import transformers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import patch_reference as pr  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(2)
ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
GOLDENS = pathlib.Path(os.environ.get("HEADSCOPE_GOLDENS", ROOT / "build" / "goldens"))
MINILM = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_270M = ROOT / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"
TOL = 1e-4

TEXT = "Mary and John went in, John gave it to"
# Tiny random decoders of every family the decoder code path serves, with answers from their
# 320-token byte-level vocabularies; and the tiny BERTs.
TINY_DECODERS = {
    "llama_gqa3": (" the", " for"),   # GQA 6 query heads over 2
    "llama_mqa": (" the", " for"),    # one key/value head
    "qwen2": (" the", " for"),        # Q/K/V biases
    "qwen3": (" is", " be"),          # per-head QK-norm
    "gemma3_text": (" a", " is"),     # QK-norm, sandwich norms, sliding windows, GeGLU, local RoPE
    "gemma2": (" a", " is"),          # attention and final soft-capping
    "olmo2": (" the", " a"),          # QK-norm over every head, no pre-norm
    "phi3": (" the", " a"),           # partial RoPE
    "gpt2": (" the", " a"),           # LayerNorm, learned positions, GELU-tanh
    "mistral_window": (" the", " a"),  # sliding window
}
TINY_ENCODERS = ["bert_bare"]


def run_grad(model, text, extra, out_dir):
    cmd = [BIN, "grad", "-m", str(model), "--text", text, "--npy", str(out_dir), "--json", str(out_dir / "g.json"),
           "--threads", "2", "--receivers"] + extra
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    doc = json.loads((out_dir / "g.json").read_text())
    arrays = {p.stem: np.load(p) for p in out_dir.glob("*.npy")}
    return doc, arrays


def worst(ours, theirs):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    scale = max(np.abs(theirs).max(), 1e-30)
    return float(np.abs(ours - theirs).max() / scale)


class Recorder:
    """Hooks that keep every activation the comparison needs, each with retain_grad."""

    def __init__(self, model, encoder):
        self.model, self.encoder, self.hooks, self.qkv = model, encoder, [], []
        self.o_in, self.o_out, self.mlp = [], [], []
        base = model.base_model if hasattr(model, "base_model") else model
        layers = base.encoder.layer if encoder else (base.h if hasattr(base, "h") else base.layers)
        for layer in layers:
            if encoder:
                o_proj, mlp_out = layer.attention.output.dense, layer.output.dense
            elif hasattr(layer, "self_attn"):
                o_proj = layer.self_attn.o_proj
                mlp_out = getattr(layer, "post_feedforward_layernorm", None) or layer.mlp
            else:  # GPT-2
                o_proj, mlp_out = layer.attn.c_proj, layer.mlp
            self.hooks.append(o_proj.register_forward_pre_hook(lambda m, a: self._keep(self.o_in, a[0])))
            self.hooks.append(o_proj.register_forward_hook(lambda m, a, o: self._keep(self.o_out, o)))
            self.hooks.append(mlp_out.register_forward_hook(lambda m, a, o: self._keep(self.mlp, o)))
        # Eager attention's query, key, value (after QK-norm and RoPE; keys and values before repeat_kv).
        self.module = sys.modules[type(layers[0]).__module__]
        self.orig = self.module.eager_attention_forward

        def wrapped(module, query, key, value, *a, **kw):
            for t in (query, key, value):
                t.retain_grad()
            self.qkv.append((query, key, value))
            return self.orig(module, query, key, value, *a, **kw)
        self.module.eager_attention_forward = wrapped

    @staticmethod
    def _keep(store, t):
        t.retain_grad()
        store.append(t)

    def close(self):
        self.module.eager_attention_forward = self.orig
        for h in self.hooks:
            h.remove()


def torch_grads(model, ids, encoder, metric, answer=None, wrong=None, reference=None, receivers=True):
    """Every gradient headscope writes, from autograd on the Hugging Face model."""
    rec = Recorder(model, encoder)
    try:
        ids_t = torch.tensor([ids])
        emb = model.get_input_embeddings()(ids_t).detach().requires_grad_(True)
        out = model(inputs_embeds=emb, output_hidden_states=True, output_attentions=True)
        hidden = list(out.hidden_states)
        for h in hidden:
            h.retain_grad()
        for a in out.attentions:
            a.retain_grad()
        if encoder:
            e = hidden[-1][0].mean(0)
            value = 1 - torch.nn.functional.cosine_similarity(e, reference, dim=0)
        else:
            row = out.logits[0, -1]
            if metric == "logit_diff":
                value = row[answer] - row[wrong]
            else:
                logp = torch.log_softmax(row, -1)[answer]
                value = -logp if metric == "loss" else logp.exp()
        value.backward(retain_graph=True)
        g = {
            "hidden_states": np.stack([h.grad[0].numpy() for h in hidden]),
            "attention": np.stack([a.grad[0].numpy() for a in out.attentions]),
            "head_outputs": np.stack([split_heads(t.grad[0].numpy(), model.config) for t in rec.o_in]),
            "attn_output": np.stack([t.grad[0].numpy() for t in rec.o_out]),
            "mlp_outputs": np.stack([t.grad[0].numpy() for t in rec.mlp]),
            "queries": np.stack([q.grad[0].numpy() for q, _, _ in rec.qkv]),
            "keys": np.stack([k.grad[0].numpy() for _, k, _ in rec.qkv]),
            "values": np.stack([v.grad[0].numpy() for _, _, v in rec.qkv]),
            "first": hidden[0].grad[0].numpy(),
            "word": emb.grad[0].numpy(),
            "value": float(value),
        }
        if receivers:
            slots = []
            for layer, (q, k, v) in enumerate(rec.qkv):
                x = hidden[layer]
                per = []
                for t in (q, k, v):
                    for h in range(t.shape[1]):
                        r, = torch.autograd.grad(t[:, h], x, grad_outputs=t.grad[:, h], retain_graph=True)
                        per.append(r[0].numpy())
                slots.append(np.stack(per))
            g["receivers"] = np.stack(slots)
        return g
    finally:
        rec.close()


def split_heads(concat, config):
    T = concat.shape[0]
    H = config.num_attention_heads
    return concat.reshape(T, H, -1).transpose(1, 0, 2)


def compare(ours, theirs, skip=()):
    report = {}
    for name in ("hidden_states", "attention", "head_outputs", "attn_output", "mlp_outputs", "queries", "keys",
                 "values", "receivers"):
        if name in skip or name not in theirs:
            continue
        report[name] = worst(ours[name], theirs[name])
    return report


@pytest.mark.parametrize("name", sorted(TINY_DECODERS))
def test_tiny_decoder_gradients_equal_autograd(name, tmp_path):
    folder = GOLDENS / "decoders" / name
    if not (folder / "config.json").exists():
        pytest.skip(f"{folder} is missing: build the goldens")
    answer, wrong = TINY_DECODERS[name]
    doc, ours = run_grad(folder, TEXT, ["--answer", answer, "--wrong", wrong], tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32,
                                                              attn_implementation="eager")
    ids = [t["id"] for t in doc["tokens"]]
    theirs = torch_grads(model, ids, False, "logit_diff", doc["answer_id"], doc["wrong_id"])
    assert abs(doc["value"] - theirs["value"]) <= 1e-4 * max(1.0, abs(theirs["value"]))
    report = compare(ours, theirs)
    # ∂/∂ the first layer's input: the embeddings as every family's first layer reads them.
    report["embeddings"] = worst(ours["embeddings"], theirs["first"])
    print(name, {k: f"{v:.2e}" for k, v in report.items()})
    assert max(report.values()) <= TOL, report


@pytest.mark.parametrize("name", TINY_ENCODERS)
def test_tiny_encoder_gradients_equal_autograd(name, tmp_path):
    folder = GOLDENS / "encoders" / name
    if not (folder / "config.json").exists():
        pytest.skip(f"{folder} is missing: build the goldens")
    reference = "Anna and Paul went in, Mark gave it to"
    doc, ours = run_grad(folder, TEXT, ["--reference", reference], tmp_path)
    model = transformers.AutoModel.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager")
    ids = [t["id"] for t in doc["tokens"]]
    tok = pr.load_hf(folder, True)[1]
    with torch.no_grad():
        ref = model(torch.tensor([pr.encode(tok, reference)])).last_hidden_state[0].mean(0)
    theirs = torch_grads(model, ids, True, "cosine", reference=ref)
    assert abs(doc["value"] - theirs["value"]) <= 1e-5
    report = compare(ours, theirs)
    report["embeddings"] = worst(ours["embeddings"], theirs["word"])
    print(name, {k: f"{v:.2e}" for k, v in report.items()})
    assert max(report.values()) <= TOL, report
