"""Head ablation (headscope ablate) against transformers with forward hooks.

The same ablation is done in PyTorch by a forward pre-hook on the input of W_O (BERT:
attention.output.dense; Llama: self_attn.o_proj): the head's slice of the concatenation is zeroed,
or replaced by its mean over the reference texts, computed here from transformers' own head
outputs. The effects headscope reports (1 − cos of the mean-pooled embedding and the per-layer
change of the hidden states for the encoder; the next-token loss per position and the top-1
changes for a decoder) must equal the hooked model's to 1e-4. Models: the default
all-MiniLM-L6-v2 and a tiny random Llama with grouped-query attention (6 query heads over 2
key/value heads, so an ablated head shares its keys and values with two heads that stay intact),
built here by transformers with a fixed seed.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import torch
import transformers

torch.manual_seed(0)
torch.set_num_threads(2)
ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
MODEL = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
TOL = 1e-4
TEXTS = ["The keys to the cabinet are on the table.",
         "She gave the book to her brother because he had asked for it twice."]


def headscope_ablate(model, tmp_path, heads, mode, texts=TEXTS, reference=None):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n")
    cmd = [BIN, "ablate", "--model", str(model), "--corpus", str(corpus), "--heads", heads, "--mode", mode,
           "--json", str(tmp_path / "out.json")]
    if reference is not None:
        (tmp_path / "reference.txt").write_text("\n".join(reference) + "\n")
        cmd += ["--reference", str(tmp_path / "reference.txt")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp_path / "out.json").read_text())["result"]


def hooked(model, projections, heads, d_head, replacement):
    """Registers pre-hooks that overwrite head h's slice [h·d_head, (h+1)·d_head) of W_O's input."""
    handles = []
    for layer, proj in enumerate(projections):
        mine = [h for (l, h) in heads if l == layer]
        if not mine:
            continue

        def hook(module, args, layer=layer, mine=mine):
            x = args[0].clone()
            for h in mine:
                x[..., h * d_head:(h + 1) * d_head] = replacement(layer, h)
            return (x,)
        handles.append(proj.register_forward_pre_hook(hook))
    return handles


def capture_inputs(projections):
    """Records the input of every W_O: [T, n_head·d_head] per layer."""
    seen, handles = {}, []
    for layer, proj in enumerate(projections):
        handles.append(proj.register_forward_pre_hook(
            lambda m, args, layer=layer: seen.__setitem__(layer, args[0][0].detach().clone())))
    return seen, handles


def test_default_model_zero_and_mean(tmp_path):
    model = transformers.AutoModel.from_pretrained(MODEL, attn_implementation="eager").float().eval()
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    projections = [layer.attention.output.dense for layer in model.encoder.layer]
    d_head = model.config.hidden_size // model.config.num_attention_heads
    heads = [(1, 3), (4, 0), (4, 7)]
    spec = ",".join(f"{l}.{h}" for l, h in heads)

    def run(text, handles=()):
        with torch.no_grad():
            out = model(**tok(text, return_tensors="pt"), output_hidden_states=True)
        for handle in handles:
            handle.remove()
        return [h[0].double().numpy() for h in out.hidden_states]

    # Mean mode: the mean over every position of the reference texts of each head's output.
    reference = ["A reference sentence about the weather.", "Another one, with numbers: 1, 2 and 3."]
    seen, handles = capture_inputs(projections)
    sums = {}
    count = 0
    for text in reference:
        run(text)
        for l, x in seen.items():
            sums[l] = sums.get(l, 0) + x.double().sum(0)
        count += x.shape[0]
    for handle in handles:
        handle.remove()
    means = {l: (s / count).float() for l, s in sums.items()}

    worst = 0.0
    for mode, replacement, ref in (("zero", lambda l, h: 0.0, None),
                                   ("mean", lambda l, h: means[l][h * d_head:(h + 1) * d_head], reference)):
        got = headscope_ablate(MODEL, tmp_path, spec, mode, reference=ref)
        for text, effect in zip(TEXTS, got["texts"]):
            clean = run(text)
            ablated = run(text, hooked(model, projections, heads, d_head, replacement))
            a, b = ablated[-1].mean(0), clean[-1].mean(0)
            distance = 1 - a @ b / np.sqrt((a @ a) * (b @ b))
            change = [np.linalg.norm(ablated[l] - clean[l]) / np.linalg.norm(clean[l]) for l in range(1, len(clean))]
            assert distance > 1e-4, "the ablation changed nothing: the test could not fail"
            worst = max(worst, abs(effect["embedding_distance"] - distance),
                        float(np.abs(np.array(effect["layer_change"]) - change).max()))
    print(f"\nall-MiniLM-L6-v2 ablation: max |Δ| {worst:.2e}")
    assert worst <= TOL


def tiny_llama(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "reference"))
    from golden_decoders import build_models, randomize, train_tokenizer
    tok = train_tokenizer(bos=True)
    cls, cfg = build_models(tok.get_vocab_size())["llama_gqa3"]
    torch.manual_seed(1234)
    model = cls(cfg)
    randomize(model, 4321)
    model.eval()
    d = tmp_path / "llama_gqa3"
    model.save_pretrained(d, safe_serialization=True)
    tok.save(str(d / "tokenizer.json"))
    return model, tok, d


def test_tiny_gqa_llama_zero(tmp_path):
    model, tok, d = tiny_llama(tmp_path)
    projections = [layer.self_attn.o_proj for layer in model.model.layers]
    d_head = model.config.head_dim
    heads = [(0, 1), (1, 4)]  # one query head of each key/value group: the other two keep theirs

    def losses(ids, handles=()):
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double()
        for handle in handles:
            handle.remove()
        loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
        return loss.numpy(), logits.argmax(-1).numpy()

    got = headscope_ablate(d, tmp_path, "0.1,1.4", "zero")
    worst = 0.0
    for text, effect in zip(TEXTS, got["texts"]):
        ids = tok.encode(text).ids
        before, top_before = losses(ids)
        after, top_after = losses(ids, hooked(model, projections, heads, d_head, lambda l, h: 0.0))
        assert np.abs(after - before).max() > 1e-3, "the ablation changed nothing: the test could not fail"
        worst = max(worst, float(np.abs(np.array(effect["loss_before"]) - before).max()),
                    float(np.abs(np.array(effect["loss_after"]) - after).max()))
        assert effect["top1_changed"] == [int(t) for t in np.nonzero(top_after != top_before)[0]]
        # the prediction after the last token, in the one shape the CLI and /api/ablate share
        for key, top in (("next_before", top_before), ("next_after", top_after)):
            assert sorted(effect[key]) == ["id", "p", "text"] and effect[key]["id"] == int(top[-1])
            assert effect[key]["text"] == tok.decode([int(top[-1])])
    print(f"\ntiny GQA Llama ablation: max |Δ loss| {worst:.2e}")
    assert worst <= TOL


def test_importance_ranks_and_pruning(tmp_path):
    """--all-heads --prune: every head's rank and Spearman's rho of ablation vs proxy, checked here
    with NumPy, and the pruning curves the pipeline adds."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    proc = subprocess.run([BIN, "ablate", "--model", str(MODEL), "--corpus", str(corpus), "--all-heads", "--prune",
                           "--prune-step", "24", "--random-orders", "2", "--json", str(tmp_path / "out.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    heads = doc["importance"]
    assert [(h["layer"], h["head"]) for h in heads] == [(l, h) for l in range(6) for h in range(12)]
    order = sorted(range(len(heads)), key=lambda i: (-heads[i]["ablation"], i))
    assert [heads[i]["rank"] for i in order] == list(range(1, len(heads) + 1))

    def ranks(v):  # mean ranks of ties, as Spearman defines them
        v = np.asarray(v)
        return np.array([np.sum(v < x) + (np.sum(v == x) + 1) / 2 for x in v])
    ra, rp = ranks([h["ablation"] for h in heads]), ranks([h["proxy"] for h in heads])
    assert abs(doc["spearman_proxy"] - np.corrcoef(ra, rp)[0, 1]) < 1e-12
    pruning = doc["pruning"]
    assert [p["removed"] for p in pruning["importance_order"]] == [0, 24, 48, 72]
    assert len(pruning["random_orders"]) == 2 and pruning["random_order"] == pruning["random_orders"][0]
    assert pruning["importance_order"][0]["effect"] == 0


def test_bad_head_specs_exit_2_naming_the_item():
    for spec, words in (("9.0", ["9.0", "layers 0..5"]), ("1.x", ["1.x", "layer.head"]),
                        ("1.1,1.1", ["1.1", "twice"]), ("1.1,", ["empty item"])):
        proc = subprocess.run([BIN, "ablate", "--model", str(MODEL), "--text", "a b c", "--heads", spec],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (spec, proc.stderr)
        assert proc.stderr.count("\n") == 1 and all(w in proc.stderr for w in words), proc.stderr
