"""Does the ablation mode change which heads matter? Every head's importance under zero, mean and
resample ablation over the same texts (`headscope ablate --all-heads --mode M`), and Spearman's ρ
between the three rankings (ties share their mean rank, as headscope's own `spearman_proxy`).

  python3 bench/ablation_modes.py --corpus ewt100.txt [--model DIR] [--seed 1] [--bin build/headscope]

The mean outputs and resample donors come from the texts themselves (no --reference). Prints a
Markdown table and the ten most important heads of each mode (docs/causal.md holds the figure).
Not a test: nothing is asserted.
"""
import argparse
import json
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("--model", default=str(ROOT / "models" / "all-MiniLM-L6-v2"))
ap.add_argument("--corpus", required=True)
ap.add_argument("--seed", default="1")
ap.add_argument("--bin", default=str(ROOT / "build" / "headscope"))
ap.add_argument("--threads", default="2")
args = ap.parse_args()


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(x, y):
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5


effects = {}
with tempfile.TemporaryDirectory() as tmp:
    for mode in ("zero", "mean", "resample"):
        out = pathlib.Path(tmp) / f"{mode}.json"
        cmd = [args.bin, "ablate", "--model", args.model, "--corpus", args.corpus, "--all-heads", "--mode", mode,
               "--seed", args.seed, "--threads", args.threads, "--json", str(out)]
        print(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[0])
        j = json.loads(out.read_text())
        effects[mode] = {(h["layer"], h["head"]): h["ablation"] for h in j["importance"]}

heads = sorted(effects["zero"])
modes = list(effects)
print("\n| ρ | " + " | ".join(modes) + " |\n|---|" + "---|" * len(modes))
for a in modes:
    row = [f"{spearman([effects[a][h] for h in heads], [effects[b][h] for h in heads]):.3f}" for b in modes]
    print(f"| {a} | " + " | ".join(row) + " |")
for m in modes:
    top = sorted(heads, key=lambda h: -effects[m][h])[:10]
    print(f"\n{m}: " + ", ".join(f"{l}.{h} {effects[m][(l, h)]:.4f}" for l, h in top))
