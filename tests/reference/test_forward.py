"""headscope's forward pass against Hugging Face transformers (PyTorch, CPU, fp32, eager attention).

For every text, `headscope run --npy` writes what it captured; the same text goes through
transformers with output_attentions=True / output_hidden_states=True, and every attention
probability must agree to 1e-5 and every hidden state to 1e-4. Also checked: token ids, the head
outputs (from the reference's own Q, K, V), and that the per-head W_O contributions add up to the
attention output.

Models: the real default model (all-MiniLM-L6-v2), and tiny random-weight BERTs that transformers
builds here with a fixed seed, in other shapes and storage dtypes, so nothing is tied to one shape.
"""
import json
import os
import pathlib
import random
import shutil
import subprocess

import numpy as np
import pytest
import torch
import transformers

torch.manual_seed(0)
torch.set_num_threads(2)
ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
MODEL = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
DATA = pathlib.Path(os.environ.get("HEADSCOPE_DATA", ROOT.parent / "shared" / "data"))
ATTN_TOL, HIDDEN_TOL = 1e-5, 1e-4


def pud_sentences():
    out = []
    for line in (DATA / "ud" / "en_pud-ud-test.conllu").read_text(encoding="utf-8").splitlines():
        if line.startswith("# text = "):
            out.append(line[len("# text = "):])
    return out


def make_texts(tokenizer, n=50, max_tokens=512):
    """n texts whose lengths (specials included) spread from 3 to max_tokens tokens."""
    rng = random.Random(1234)
    sentences = pud_sentences()
    rng.shuffle(sentences)
    words = " ".join(sentences).split(" ")
    specials = ["Ünïcödé café naïve — “quotes”, 東京タワー and emoji 🙂👍🏽!", "x", "   spaced\tout\n text  ",
                "Numbers: 3.14159, 1,000,000 and 42%... (really?!)"]
    targets = sorted({max(3, int(round(3 * (max_tokens / 3) ** (i / (n - len(specials) - 1)))))
                      for i in range(n - len(specials))})
    texts = list(specials)
    start = 0
    for target in targets:
        lo, hi = 1, target  # binary search the word count that gives <= target tokens
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(tokenizer(" ".join(words[start:start + mid]))["input_ids"]) <= target:
                lo = mid
            else:
                hi = mid - 1
        texts.append(" ".join(words[start:start + lo]))
        start = (start + 97) % (len(words) - 600)
    while len(texts) < n:
        texts.append(sentences[len(texts)])
    return texts


def run_headscope(model_dir, text, out_dir):
    text_file = out_dir / "text.txt"
    text_file.write_bytes(text.encode("utf-8"))
    proc = subprocess.run([BIN, "run", "--model", str(model_dir), "--file", str(text_file), "--npy", str(out_dir),
                           "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"headscope failed on {text[:60]!r}: {proc.stderr}"
    load = lambda name: np.load(out_dir / name)
    tokens = json.loads((out_dir / "tokens.json").read_text())
    return ([t["id"] for t in tokens], load("attentions.npy"), load("hidden_states.npy"),
            load("head_outputs.npy"), load("contributions.npy"))


def reference(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    attn = torch.stack(out.attentions)[:, 0].numpy()          # [L, H, T, T]
    hidden = torch.stack(out.hidden_states)[:, 0].numpy()     # [L+1, T, D]
    return attn, hidden


def head_outputs_reference(model, attn, hidden):
    """O_h = P_h · V_h with V from the reference's own value projection: [L, H, T, Dh]."""
    cfg = model.config
    H, D = cfg.num_attention_heads, cfg.hidden_size
    outs = []
    for l, layer in enumerate(model.encoder.layer):
        with torch.no_grad():
            v = layer.attention.self.value(torch.from_numpy(hidden[l])).numpy()  # [T, D]
        v = v.reshape(v.shape[0], H, D // H).transpose(1, 0, 2)                   # [H, T, Dh]
        outs.append(np.einsum("hqk,hkd->hqd", attn[l].astype(np.float64), v))
    return np.stack(outs)


def check_model(model_dir, texts, tmp_path, hf_model=None):
    model = hf_model or transformers.AutoModel.from_pretrained(model_dir, attn_implementation="eager").float().eval()
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    worst = {"attention": 0.0, "hidden": 0.0, "head_outputs": 0.0, "contributions": 0.0}
    for i, text in enumerate(texts):
        ids = tok(text)["input_ids"]
        got_ids, attn, hidden, head_out, contrib = run_headscope(model_dir, text, tmp_path)
        assert got_ids == ids, f"text {i}: token ids differ from the reference tokenizer"
        ref_attn, ref_hidden = reference(model, ids)
        assert attn.shape == ref_attn.shape and hidden.shape == ref_hidden.shape
        worst["attention"] = max(worst["attention"], float(np.abs(attn - ref_attn).max()))
        worst["hidden"] = max(worst["hidden"], float(np.abs(hidden - ref_hidden).max()))
        ref_heads = head_outputs_reference(model, ref_attn, ref_hidden)
        worst["head_outputs"] = max(worst["head_outputs"], float(np.abs(head_out - ref_heads).max()))
        # Σ_h contribution_h + b_O must equal the reference's attention output dense(concat).
        for l, layer in enumerate(model.encoder.layer):
            concat = torch.from_numpy(ref_heads[l].transpose(1, 0, 2).reshape(len(ids), -1).astype(np.float32))
            with torch.no_grad():
                dense = layer.attention.output.dense(concat).numpy()
            summed = contrib[l].sum(axis=0) + layer.attention.output.dense.bias.detach().numpy()
            worst["contributions"] = max(worst["contributions"], float(np.abs(summed - dense).max()))
    print(f"\n{model_dir.name}: {len(texts)} texts, max |Δ| " + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))
    assert worst["attention"] <= ATTN_TOL
    assert worst["hidden"] <= HIDDEN_TOL
    assert worst["head_outputs"] <= 1e-4
    assert worst["contributions"] <= 1e-4
    return worst


def test_default_model_matches_transformers(tmp_path):
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    texts = make_texts(tok)
    assert len(texts) >= 50
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    assert min(lengths) <= 3 and max(lengths) == 512, lengths
    check_model(MODEL, texts, tmp_path)


TINY_SHAPES = [
    # (name, hidden, heads, layers, intermediate, storage dtype, save as a BertForMaskedLM with "bert." prefix)
    ("tiny-bert-8x64", 512, 8, 2, 1024, torch.float32, False),
    ("tiny-bert-2x16", 32, 2, 3, 64, torch.float32, True),
    ("tiny-bert-4x24-bf16", 96, 4, 2, 192, torch.bfloat16, False),
    ("tiny-bert-6x8-f16", 48, 6, 2, 96, torch.float16, False),
]


@pytest.mark.parametrize("name,hidden,heads,layers,inter,dtype,prefixed", TINY_SHAPES)
def test_tiny_random_bert_matches_transformers(tmp_path, name, hidden, heads, layers, inter, dtype, prefixed):
    torch.manual_seed(sum(map(ord, name)))
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=hidden, num_attention_heads=heads,
                                  num_hidden_layers=layers, intermediate_size=inter, max_position_embeddings=128,
                                  attn_implementation="eager")
    cls = transformers.BertForMaskedLM if prefixed else transformers.BertModel
    model = cls(cfg).eval()
    with torch.no_grad():  # larger weights than the default init, so attention is far from uniform
        for p in model.parameters():
            p.mul_(4.0 if p.dim() > 1 else 1.0)
    model_dir = tmp_path / name
    model.to(dtype).save_pretrained(model_dir, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(MODEL / f, model_dir / f)
    base = model.bert if prefixed else model
    base = base.float()  # the reference computes in fp32 from the same (rounded) stored values
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    texts = [t for t in make_texts(tok, n=12, max_tokens=128)]
    out = tmp_path / "out"
    out.mkdir()
    check_model(model_dir, texts, out, hf_model=base)


def test_queries_and_keys_on_request(tmp_path):
    """--qk captures each head's Q and K; they equal the reference's own projections."""
    text = "The keys of the cabinet are on the table, said the clerk who found them."
    (tmp_path / "t.txt").write_text(text)
    proc = subprocess.run([BIN, "run", "--model", str(MODEL), "--file", str(tmp_path / "t.txt"), "--npy",
                           str(tmp_path), "--qk", "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    q, k = np.load(tmp_path / "queries.npy"), np.load(tmp_path / "keys.npy")
    model = transformers.AutoModel.from_pretrained(MODEL, attn_implementation="eager").eval()
    ids = transformers.AutoTokenizer.from_pretrained(MODEL)(text)["input_ids"]
    _, hidden = reference(model, ids)
    H = model.config.num_attention_heads
    for l, layer in enumerate(model.encoder.layer):
        with torch.no_grad():
            x = torch.from_numpy(hidden[l])
            ref_q = layer.attention.self.query(x).numpy().reshape(len(ids), H, -1).transpose(1, 0, 2)
            ref_k = layer.attention.self.key(x).numpy().reshape(len(ids), H, -1).transpose(1, 0, 2)
        assert np.abs(q[l] - ref_q).max() <= 1e-4 and np.abs(k[l] - ref_k).max() <= 1e-4
