"""headscope against Hugging Face transformers, measured in the same run on this machine.

  .venv/bin/python bench/run.py [--model DIR] [--repeats N] [--rounds R] [--passive]

1. Forward pass with every attention captured, T = 16, 128, 512, at 1 and 2 threads, both sides
   limited to the same thread count (OMP/OpenBLAS/MKL variables set for both processes).
2. The compute floor: the forward pass's matrix-multiply FLOPs divided by this machine's fp32
   GEMM peak, measured here with a 2048³ oneDNN sgemm at the same thread count.
3. Time from process start to the first result: `headscope run` vs a Python script doing the
   same with transformers (import, load, run one sentence with output_attentions=True).
The machine is shared and its speed drifts by ±10 % over minutes (and, when neighbours load
memory, a 16-token pass can take 50 % longer for some seconds), so the measurements are taken in
R interleaved rounds (peak, headscope, transformers, then again). Times are the median over rounds
of the per-round medians; a speed-up is the median over rounds of the ratio within each round
(the two sides measured seconds apart), with the lowest and highest round beside it.
Prints a Markdown table (copy it into docs/performance.md).
--passive runs both sides with OMP_WAIT_POLICY=PASSIVE."""
import argparse
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_env import env_for, json_lines  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("--model", default=str(ROOT / "models" / "all-MiniLM-L6-v2"))
ap.add_argument("--repeats", type=int, default=10)
ap.add_argument("--lengths", default="16,128,512")
ap.add_argument("--threads", default="1,2")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--passive", action="store_true", help="OMP_WAIT_POLICY=PASSIVE for both sides")
args = ap.parse_args()
BIN = ROOT / "build"
PY = sys.executable
lengths = args.lengths.split(",")




def run_json(cmd, threads):
    return json_lines(cmd, env_for(threads, args.passive))


median = statistics.median
rows = []
for threads in [int(t) for t in args.threads.split(",")]:
    peaks, ours, same, ref = [], {}, {}, {}
    for _ in range(args.rounds):
        peaks.append(run_json([str(BIN / "forward_bench"), "--peak", str(threads)], threads)[0]["peak_gflops"])
        for capture, into in (("all", ours), ("reference", same)):
            for r in run_json([str(BIN / "forward_bench"), args.model, str(threads), *lengths,
                                 "--repeats", str(args.repeats), "--capture", capture], threads):
                into.setdefault(r["T"], []).append(r)
        for r in run_json([PY, str(ROOT / "bench" / "reference_forward.py"), args.model,
                             str(threads), str(args.repeats), *lengths], threads):
            ref.setdefault(r["T"], []).append(r)
    peak = median(peaks)
    for T in sorted(ours):
        floor_ms = ours[T][0]["gflop"] / peak * 1000
        rows.append((threads, T, same[T], ours[T], ref[T], floor_ms, peak))

print(f"OMP_WAIT_POLICY: {'PASSIVE' if args.passive else 'runtime default'}; {args.rounds} rounds of "
      f"{args.repeats} runs per side.")
print("headscope (same outputs): attention + hidden states, as transformers returns them;")
print("headscope (all): also every head's output and W_O contribution.\n")
print("| threads | T | transformers ms | headscope (same outputs) ms | speed-up (rounds) | headscope (all) ms "
      "| speed-up (rounds) | floor ms (measured peak GFLOP/s) | (same outputs) / floor | best (same outputs) / floor |")
print("|---|---|---|---|---|---|---|---|---|---|")


def median_ms(runs):
    return median(r["median_ms"] for r in runs)


def speedup(ref_runs, our_runs):
    """Median and range over rounds of transformers' time / ours, each round's pair measured together."""
    ratios = [r["median_ms"] / o["median_ms"] for r, o in zip(ref_runs, our_runs)]
    return f"{median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"


for threads, T, same_runs, all_runs, ref_runs, floor_ms, peak in rows:
    same_ms, best_ms = median_ms(same_runs), min(r["min_ms"] for r in same_runs)
    print(f"| {threads} | {T} | {median_ms(ref_runs):.2f} | {same_ms:.2f} | {speedup(ref_runs, same_runs)} | "
          f"{median_ms(all_runs):.2f} | {speedup(ref_runs, all_runs)} | {floor_ms:.2f} ({peak:.0f}) | "
          f"{same_ms / floor_ms:.2f} | {best_ms / floor_ms:.2f} |")
print("\nSpeed-up: median of the rounds' ratios (lowest–highest round). (same outputs) / floor uses the "
      "median time; best / floor the fastest run, as the peak is the fastest of its runs.")

text = "The animal didn't cross the street because it was too tired."


def wall(cmd, threads, n=5):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env_for(threads, args.passive), check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


ours_first = wall([str(BIN / "headscope"), "run", "--model", args.model, "--text", text, "--quiet"], 2)
ref_first = wall([PY, str(ROOT / "bench" / "reference_first_result.py"), args.model, text], 2, n=3)
print(f"\nfirst result (process start to attention of one sentence, 2 threads): headscope {ours_first * 1000:.0f} ms, "
      f"transformers {ref_first * 1000:.0f} ms, ratio {ref_first / ours_first:.1f}×")
