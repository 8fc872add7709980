"""Times `headscope atlas` over the 1,000 sentences of UD English PUD on the default model, and, in
the same run, Hugging Face transformers doing only the forward passes with attentions for the same
sentences (no analysis at all), so the ratio shows what the whole atlas costs relative to the bare
reference forward passes.

  .venv/bin/python bench/atlas.py [--model DIR] [--treebank FILE] [--threads 1,2] [--bin build/headscope]

Prints a Markdown table. Not a test: nothing is asserted.
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_env import env_for  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("--model", default=str(ROOT / "models" / "all-MiniLM-L6-v2"))
ap.add_argument("--treebank", default=str(ROOT.parent / "shared" / "data" / "ud" / "en_pud-ud-test.conllu"))
ap.add_argument("--threads", default="1,2")
ap.add_argument("--bin", default=str(ROOT / "build" / "headscope"))
args = ap.parse_args()




def sentences(path):
    words, out = [], []
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line:
            if words:
                out.append(" ".join(words))
            words = []
        elif not line.startswith("#"):
            cols = line.split("\t")
            if "-" not in cols[0] and "." not in cols[0]:
                words.append(cols[1])
    if words:
        out.append(" ".join(words))
    return out


REFERENCE = r'''
import sys, time, torch
from transformers import AutoModel, AutoTokenizer

model_dir, threads, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(threads)
texts = [line.rstrip("\n") for line in open(path, encoding="utf-8")]
t0 = time.perf_counter()
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
with torch.no_grad():
    for t in texts:
        model(**tok(t, return_tensors="pt"), output_attentions=True)
print(time.perf_counter() - t0)
'''

texts = sentences(args.treebank)
rows = []
with tempfile.TemporaryDirectory() as tmp:
    text_file = pathlib.Path(tmp) / "sentences.txt"
    text_file.write_text("\n".join(texts) + "\n", encoding="utf-8")
    for threads in [int(t) for t in args.threads.split(",")]:
        t0 = time.perf_counter()
        subprocess.run([args.bin, "atlas", "--model", args.model, "--treebank", args.treebank, "--out", tmp + "/atlas",
                        "--quiet", "--threads", str(threads)], check=True, env=env_for(threads), stdout=subprocess.DEVNULL)
        ours = time.perf_counter() - t0
        ref = float(subprocess.run([sys.executable, "-c", REFERENCE, args.model, str(threads), str(text_file)],
                                   check=True, capture_output=True, text=True, env=env_for(threads)).stdout.split()[-1])
        rows.append((threads, ours, ref))

print(f"atlas over {len(texts)} sentences of {pathlib.Path(args.treebank).name}, model {pathlib.Path(args.model).name}\n")
print("| threads | headscope atlas s (load + all stages) | transformers forward-only s | ratio |")
print("|---|---|---|---|")
for threads, ours, ref in rows:
    print(f"| {threads} | {ours:.1f} | {ref:.1f} | {ref / ours:.2f}× |")
