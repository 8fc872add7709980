"""How much of each layer's attention goes to the special tokens, counted by weight and counted by
what is moved (Kobayashi et al. 2020: ‖α_qk · v_k W_O,hᵀ‖), over the sentences of UD English PUD on
the default model.

Runs `headscope atlas` over the treebank (the corpus statistics of every head include
`sink_mass`, the share of each query's weight on the first position or a special token, and
`sink_mass_norm`, the same share with every weight times the norm of what the head moves from that
key), then averages the heads of each layer. For all-MiniLM-L6-v2 the first position is [CLS], so
the sink set is exactly the special tokens [CLS] and [SEP].

  .venv/bin/python bench/norm_weighted.py [--model DIR] [--treebank FILE] [--bin build/headscope]

Prints a Markdown table (docs/causal.md holds one). Not a test: nothing is asserted.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("--model", default=str(ROOT / "models" / "all-MiniLM-L6-v2"))
ap.add_argument("--treebank", default=str(ROOT.parent / "shared" / "data" / "ud" / "en_pud-ud-test.conllu"))
ap.add_argument("--bin", default=str(ROOT / "build" / "headscope"))
ap.add_argument("--threads", default="2")
args = ap.parse_args()

with tempfile.TemporaryDirectory() as out:
    t0 = time.perf_counter()
    subprocess.run([args.bin, "atlas", "--model", args.model, "--treebank", args.treebank, "--out", out, "--quiet",
                    "--threads", args.threads], check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    atlas = json.loads((pathlib.Path(out) / "atlas.json").read_text())

heads = atlas["heads"]
n_layer = 1 + max(h["layer"] for h in heads)
sentences = atlas["counts"]["corpus_texts"]
print(f"{pathlib.Path(args.model).name}, {pathlib.Path(args.treebank).name} ({sentences} sentences), "
      f"headscope atlas {seconds:.1f} s\n")
print("| layer | on special tokens, by weight | by norm ‖α·f(x)‖ | norm / weight | heads below half by norm (of those above half by weight) |")
print("|---|---|---|---|---|")
total_w = total_n = 0.0
for layer in range(n_layer):
    stats = [h["stats"] for h in heads if h["layer"] == layer]
    w = [s["sink_mass"] for s in stats]
    n = [s["sink_mass_norm"] for s in stats]
    mean_w, mean_n = sum(w) / len(w), sum(n) / len(n)
    total_w += mean_w
    total_n += mean_n
    heavy = [i for i, x in enumerate(w) if x > 0.5]
    flipped = sum(1 for i in heavy if n[i] < 0.5)
    print(f"| {layer} | {100 * mean_w:.1f} % | {100 * mean_n:.1f} % | {mean_n / mean_w:.2f} | {flipped} of {len(heavy)} |")
print(f"| all | {100 * total_w / n_layer:.1f} % | {100 * total_n / n_layer:.1f} % | {total_n / total_w:.2f} | |")
sys.stdout.flush()
