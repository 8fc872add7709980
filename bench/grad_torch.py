"""The backward pass of all-MiniLM-L6-v2 on a 128-token text against PyTorch autograd on the same
threads (docs/performance.md, "Gradients"): headscope's Model.grad (one forward and one backward
pass, every gradient kept: embeddings, hidden states, head outputs, attention, queries, keys,
values) against transformers in float32 with eager attention, the same metric (1 − cos of the
mean-pooled embedding with a reference sentence's), retain_grad on the hidden states and the
attention probabilities (what headscope returns) and, for the record, with no retained gradient.
Prints one JSON line.
    python bench/grad_torch.py [MODEL] [THREADS=2] [REPEATS=7]
"""
import json
import statistics
import sys
import time

import numpy as np
import torch
import transformers

import headscope as hd

MODEL = sys.argv[1] if len(sys.argv) > 1 else "models/all-MiniLM-L6-v2"
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
REPEATS = int(sys.argv[3]) if len(sys.argv) > 3 else 7
REFERENCE = "A cat sat quietly on the warm windowsill."
WORDS = ("the committee reviewed every proposal carefully before it agreed to fund the new library "
         "because the old building could no longer hold the growing collection of rare books and maps ").split()


def text_of(tok, n):
    words = []
    while len(tok(" ".join(words)).input_ids) < n:
        words.append(WORDS[len(words) % len(WORDS)])
    while len(tok(" ".join(words)).input_ids) > n:
        words.pop()
    return " ".join(words)


def median_s(f):
    f()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    torch.set_num_threads(THREADS)
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    text = text_of(tok, 128)
    ids = tok(text, return_tensors="pt").input_ids
    model = transformers.AutoModel.from_pretrained(MODEL, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        ref = model(**tok(REFERENCE, return_tensors="pt")).last_hidden_state[0].mean(0)

    def torch_step(retain):
        emb = model.get_input_embeddings()(ids).detach().requires_grad_(True)
        out = model(inputs_embeds=emb, output_hidden_states=retain, output_attentions=retain)
        if retain:
            for t in (*out.hidden_states, *out.attentions):
                t.retain_grad()
        value = 1 - torch.nn.functional.cosine_similarity(out.last_hidden_state[0].mean(0), ref, dim=0)
        value.backward()
        return emb.grad

    m = hd.load(MODEL, threads=THREADS)
    g = m.grad(text, reference=REFERENCE)
    assert g.embeddings.shape[0] == ids.shape[1] == 128, (g.embeddings.shape, ids.shape)
    ours = median_s(lambda: m.grad(text, reference=REFERENCE))
    theirs = median_s(lambda: torch_step(True))
    plain = median_s(lambda: torch_step(False))
    err = float(np.abs(g.embeddings - torch_step(True)[0].numpy()).max() / np.abs(g.embeddings).max())
    print(json.dumps({"model": MODEL.rstrip("/").split("/")[-1], "T": 128, "threads": THREADS,
                      "headscope_s": round(ours, 4), "torch_retained_s": round(theirs, 4),
                      "torch_plain_s": round(plain, 4), "speedup_vs_retained": round(theirs / ours, 2),
                      "speedup_vs_plain": round(plain / ours, 2), "embedding_grad_rel_diff": err}))


if __name__ == "__main__":
    main()
