"""IOI on a real decoder with headscope patch (docs/circuits.md, "IOI on SmolLM2 and Gemma 3").

For N generated IOI pairs (seeded, ABBA/BABA balanced, ABC corruption):
  1. every head's output patched alone, denoising (corrupt run, clean values), logit difference
     IO − S: the layer × head map of the normalised effect;
  2. the five heads that restore the most, patched together;
  3. each of those heads' direct effect on the logits (path patching to the logits, noising), which
     separates heads that write the answer themselves (name movers, in Wang et al.'s GPT-2 small)
     from heads that act through later heads (S-inhibition, induction, duplicate-token heads);
  4. noising every head alone (which heads the behaviour needs), and for the most needed head in a
     layer before every top-5 head, path patching into every later head's query (on the first
     --n-path pairs: one pass per later head and pair).
Writes <out>/<model>.json (every figure) and <out>/<model>.png (the map).

    python bench/ioi_patching.py MODEL [--n 100] [--seed 0] [--out docs/figures]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def patch(binary, model, args, tmp):
    out = pathlib.Path(tmp) / "out.json"
    cmd = [binary, "patch", "-m", model, *args, "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)}\n{proc.stderr}")
    print(proc.stdout.strip().splitlines()[0], flush=True)
    return json.loads(out.read_text())


def plot(result, path):
    """The layer × head map of the normalised effect, diverging around 0 (no effect)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        return
    m = np.array([[np.nan if v is None else v for v in row] for row in result["map"]])
    L, H = m.shape
    lim = max(0.05, np.nanmax(np.abs(m)))
    fig, ax = plt.subplots(figsize=(max(4.6, 1.6 + 0.45 * H), 1.2 + 0.22 * L))
    im = ax.imshow(m, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(H))
    ax.set_title(f"{result['model']}: IOI, head outputs\npatched clean → corrupt, normalised\n"
                 f"logit difference, {result['n_pairs']} pairs", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-path", type=int, default=20, help="pairs for path patching into every later query")
    ap.add_argument("--out", default=str(ROOT / "docs" / "figures"))
    ap.add_argument("--bin", default=str(ROOT / "build" / "headscope"))
    ap.add_argument("--replot", action="store_true", help="MODEL is a JSON this script wrote: draw its map again")
    a = ap.parse_args()
    if a.replot:
        path = pathlib.Path(a.model)
        plot(json.loads(path.read_text()), path.with_suffix(".png"))
        return
    out_dir = pathlib.Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    task = ["--task", "ioi", "--n", str(a.n), "--seed", str(a.seed)]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        sweep = patch(a.bin, a.model, task + ["--site", "head"], tmp)
        name = sweep["model"]["name"]
        L, H = sweep["model"]["n_layer"], sweep["model"]["n_head"]
        ranked = sorted(sweep["results"], key=lambda r: -(r["normalised"] or 0))
        top5 = ranked[:5]
        heads = ",".join(f"{r['layer']}.{r['head']}" for r in top5)
        together = patch(a.bin, a.model, task + ["--heads", heads], tmp)
        direct = []
        for r in top5:
            d = patch(a.bin, a.model, task + ["--senders", f"{r['layer']}.{r['head']}", "--receiver-input", "logits"],
                      tmp)
            # Noising the head's direct path: 1 − normalised is the share of the logit difference lost.
            direct.append({"layer": r["layer"], "head": r["head"], "denoise": r["normalised"],
                           "direct_noise": d["path"]["normalised"], "direct_share": 1 - d["path"]["normalised"]})
        # Noising: how much each head is needed (clean run, corrupt values).
        noise = patch(a.bin, a.model, task + ["--site", "head", "--direction", "noise"], tmp)
        # The head the behaviour most needs among those before every top-5 head (in the noising
        # direction 1 means no effect, 0 the whole effect), and what it sends into later queries.
        first_top = min(r["layer"] for r in top5)
        earlier = [r for r in noise["results"] if r["layer"] < first_top and r["normalised"] is not None]
        indirect = min(earlier, key=lambda r: r["normalised"]) if earlier else None
        to_queries = None
        if indirect is not None:
            few = ["--task", "ioi", "--n", str(min(a.n, a.n_path)), "--seed", str(a.seed)]
            to_queries = patch(a.bin, a.model, few + ["--senders", f"{indirect['layer']}.{indirect['head']}",
                                                      "--receiver-input", "q"], tmp)
        seconds = time.time() - t0
    result = {
        "model": name, "n_pairs": sweep["n_pairs"], "seed": a.seed, "clean": sweep["clean"],
        "corrupt": sweep["corrupt"], "map": [[None] * H for _ in range(L)],
        "noise_map": [[None] * H for _ in range(L)],
        "top": [{"layer": r["layer"], "head": r["head"], "normalised": r["normalised"], "value": r["value"]}
                for r in ranked[:10]],
        "top5_together": together["set"], "direct_effects": direct, "seconds": seconds,
    }
    for r in sweep["results"]:
        result["map"][r["layer"]][r["head"]] = r["normalised"]
    for r in noise["results"]:
        result["noise_map"][r["layer"]][r["head"]] = r["normalised"]
    if to_queries is not None:
        q = sorted(to_queries["path"]["results"], key=lambda r: -abs(r["normalised"] or 0))[:5]
        result["indirect_sender"] = {"layer": indirect["layer"], "head": indirect["head"],
                                     "noise": indirect["normalised"],
                                     "to_queries": [{"receiver": r["receivers"][0], "normalised": r["normalised"]}
                                                    for r in q]}
    stem = name.split(".")[0].lower()
    (out_dir / f"ioi-{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out_dir / f"ioi-{stem}.png")
    print(json.dumps({k: result[k] for k in ("model", "n_pairs", "clean", "corrupt", "top5_together", "seconds")}))


if __name__ == "__main__":
    main()
