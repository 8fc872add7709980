"""headscope against transformers on a causal model, measured in the same run on this machine.

  .venv/bin/python bench/decoder_bench.py [--model models/SmolLM2-135M-Instruct] [--threads 1,2]
                                          [--lengths 128,512] [--repeats 5]

Both sides run the same weights (SmolLM2-135M-Instruct's Q4_1 GGUF, dequantized to fp32 by each),
the same token count T, every attention map captured, with the same thread count (OMP, OpenBLAS and
MKL variables set for both processes, torch.set_num_threads for transformers). Reported:
  forward    one pass over T tokens; transformers: output_attentions and output_hidden_states;
             headscope twice: the same outputs (attention maps and hidden states), and all it
             captures (also every head's output and W_O contribution)
  step       one generation step through the KV cache after T tokens, attention row captured
Prints a Markdown table of medians and ratios (copy it into docs/performance.md)."""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_env import env_for, json_lines  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct"))
ap.add_argument("--build", default=str(ROOT / "build"))
ap.add_argument("--threads", default="1,2")
ap.add_argument("--lengths", default="128,512")
ap.add_argument("--repeats", type=int, default=5)
args = ap.parse_args()
threads = [int(t) for t in args.threads.split(",")]
lengths = args.lengths.split(",")




ours = {}
for t in threads:
    for r in json_lines([str(pathlib.Path(args.build) / "decoder_bench"), args.model, str(t), *lengths,
                         "--repeats", str(args.repeats)], env_for(t)):
        ours[(t, r["T"])] = r
ref = {(r["threads"], r["T"]): r
       for r in json_lines([sys.executable, str(ROOT / "bench" / "reference_decoder.py"), args.model,
                            str(args.repeats), args.threads, *lengths], env_for(max(threads)))}

print("| threads | T | transformers forward ms | headscope (same outputs) ms | ratio | headscope (all) ms | ratio "
      "| headscope step ms | transformers step ms | ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(ours):
    o, r = ours[key], ref[key]
    print(f"| {key[0]} | {key[1]} | {r['all_ms']:.0f} | {o['same_ms']:.0f} | {r['all_ms'] / o['same_ms']:.2f}× "
          f"| {o['all_ms']:.0f} | {r['all_ms'] / o['all_ms']:.2f}× "
          f"| {o['step_ms']:.1f} | {r['step_ms']:.1f} | {r['step_ms'] / o['step_ms']:.2f}× |")
print("\nratio = transformers time / headscope time (above 1: headscope is faster). "
      "headscope attention-only forward: " +
      ", ".join(f"{k[0]} thr T={k[1]}: {v['attention_ms']:.0f} ms" for k, v in sorted(ours.items())))
