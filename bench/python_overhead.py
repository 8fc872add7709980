"""The Python package's cost over the C++ core (docs/python.md, "Overhead").

1. Model.run(text, corpus=False) from Python against the same pipeline call timed inside a C++
   process (bench/analyse_bench.cc: encode + analyse, attention only, the probe measured once), on the
   default model at T = 16 / 128 / 512 tokens: median of 20 runs each, same threads. Target: at most
   5 % more at T = 128.
2. First result in a fresh interpreter: `import headscope; load; run` (defaults: the cached corpus evidence
   and its probe) against transformers'
   `from_pretrained` + forward with output_attentions (bench/reference_first_result.py), each in a new
   process, median of 3. Target: headscope at least 10x sooner.

Usage (after `make python`; the C++ side, build/analyse_bench, comes from the same build as the module):
  .venv/bin/python bench/python_overhead.py [--threads 2] [--bench-bin build/analyse_bench]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_env import env_for, json_lines  # noqa: E402

TEXT = ("The animal didn't cross the street because it was too tired. The trophy didn't fit in the suitcase "
        "because it was too big. ")


def text_of_length(model, T):
    """A text of exactly T tokens (specials included) for this model's tokenizer."""
    words = (TEXT * 200).split()
    lo, hi = 1, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(model.tokenizer.encode(" ".join(words[:mid]))) <= T:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    n = len(model.tokenizer.encode(text))
    return text, n


def first_result(cmd, env, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=str(ROOT / "models" / "all-MiniLM-L6-v2"))
    ap.add_argument("--bench-bin", default=str(ROOT / "build" / "analyse_bench"))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 128, 512])
    ap.add_argument("--no-first-result", action="store_true")
    args = ap.parse_args()
    env = env_for(args.threads)

    import headscope

    model = headscope.load(args.model, threads=args.threads)
    rows = []
    for T in args.lengths:
        text, n = text_of_length(model, T)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        core = json_lines([args.bench_bin, args.model, str(args.threads), f.name, str(args.repeats)], env)[0]
        assert core["T"] == n
        model.run(text, corpus=False)  # warm-up (and the probe, measured once)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            model.run(text, corpus=False)
            times.append((time.perf_counter() - t0) * 1e3)
        py = statistics.median(times)
        # Medians, and minima (the better estimate on a machine that other work shares).
        rows.append({"T": n, "core_ms": core["median_ms"], "python_ms": round(py, 3),
                     "overhead_pct": round(100 * (py / core["median_ms"] - 1), 1),
                     "core_min_ms": core["min_ms"], "python_min_ms": round(min(times), 3),
                     "overhead_min_pct": round(100 * (min(times) / core["min_ms"] - 1), 1)})
        print(json.dumps(rows[-1]), flush=True)

    if args.no_first_result:
        return
    short = "The animal didn't cross the street because it was too tired."
    hs = first_result([sys.executable, "-c",
                       "import sys, headscope; m = headscope.load(sys.argv[1]); r = m.run(sys.argv[2]); "
                       "print(r.attention.shape)", args.model, short], env)
    hf = first_result([sys.executable, str(ROOT / "bench" / "reference_first_result.py"), args.model, short], env)
    print(json.dumps({"first_result_headscope_s": round(hs, 2), "first_result_transformers_s": round(hf, 2),
                      "ratio": round(hf / hs, 1)}), flush=True)


if __name__ == "__main__":
    main()
