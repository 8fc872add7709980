"""An 8B-class random-weight Llama in Q4_0, written tensor by tensor, and headscope beside llama.cpp on it.

    .venv/bin/python bench/big_gguf.py [--out build/bench/llama-8b-shape-q4_0.gguf] [--layers 32]
                                       [--exact] [--write-only] [--keep] [--threads 1,2] [--T 512]
                                       [--gen 16] [--repeats 1]

The model has Llama-3-8B's shape (32 layers, d_model 4096, 32 query heads over 8 KV heads, d_head
128, d_ff 14336, RoPE theta 500000, RMS eps 1e-5) with random weights (normal * 0.02, fixed seed;
norms are ones). Its vocabulary is SmolLM2's (49,152 tokens): the `gpt2` tokenizer metadata is
copied from models/SmolLM2-135M-Instruct/*.gguf so that headscope and llama.cpp both tokenize the
same text (Llama 3's own vocabulary has 128,256 tokens; the smaller one takes 0.6 GB off the
embedding and output matrices: 7.38B weights in all instead of 8.03B). Every linear weight,
the token embedding and the output matrix are Q4_0. llama.cpp's own Q4_0 files (llama-quantize)
keep the token embedding in Q4_0 but raise output.weight to Q6_K; the gguf package cannot quantize
Q6_K, so here it stays Q4_0.

The file (3.87 GiB at 32 layers) is written with GGUFWriter's streaming calls (add_tensor_info,
then write_tensor_data one tensor at a time), so Python holds one tensor at a time. Drawing and
quantizing 7.38B fresh normals with gguf.quants.quantize (numpy, ~100M weights/s) takes about
3.5 minutes here, so by default one pool of 2^20 Q4_0 blocks (32M weights) is quantized once and
every tensor is filled with blocks drawn from it at random (a per-tensor draw of block indices
from the seeded generator; 30 s for the whole file); --exact quantizes fresh normals for every
tensor instead. The script prints the quantizer's measured rate
on one 4096 x 4096 matrix either way. The file is never committed: it is written under
build/bench/ and deleted after the benchmark unless --keep (or --write-only) is given.

The benchmark, each measurement its own process run alone under /usr/bin/time -v:
  - headscope's load estimate (`headscope run --max-load-memory 1M`: refused before any weight is
    read, with the estimate in the message) and a run refused with a load budget just below the
    estimate, then accepted with one just above it (the budget is --max-load-memory);
  - `headscope run` over a 512-token English text with every head's statistics and roles (maps
    streamed or dense as headscope chooses, no probe, no corpus evidence), at 1 and 2 threads:
    wall time, CPU time (user + system) and peak RSS;
  - with --pass-threads, build/decoder_bench: the forward pass alone, model loaded once outside the
    timing, one warm-up and one timed pass each with every capture and with attention only, and one
    generation step after the 512 tokens, as tokens per second. Only at reduced --layers: every
    capture (head outputs and W_O contributions, 2 L H T d_model floats) of the full model at
    T = 512 needs 32 GiB, and decoder_bench captures them all;
  - `llama-bench -p 512 -n 16` on the same file at the same thread counts (built by
    bench/llamacpp.py): tokens per second of prompt processing and generation, and its own wall
    time, CPU time and peak RSS (its process also loads the model and warms up).
Prints the CPU (lscpu model name and flags), the load average before and after, and Markdown tables."""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_env import env_for  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOCAB_FROM = ROOT / "models" / "SmolLM2-135M-Instruct"

# Llama-3-8B's shape (config.json of meta-llama/Meta-Llama-3-8B), vocabulary aside.
D_MODEL, N_HEAD, N_KV_HEAD, D_FF = 4096, 32, 8, 14336
D_HEAD = D_MODEL // N_HEAD
ROPE_THETA, RMS_EPS, CONTEXT = 500000.0, 1e-5, 8192
SCALE = 0.02  # weights ~ N(0, 0.02^2), as transformers initialises Llama: activations stay finite
POOL_BLOCKS = 1 << 20
SEED = 15


def tensor_plan(n_layer, vocab):
    """(name, [out, in]) of every weight in file order; rows are outputs, as a torch Linear weight."""
    plan = [("token_embd.weight", (vocab, D_MODEL))]
    for i in range(n_layer):
        b = f"blk.{i}."
        plan += [(b + "attn_norm.weight", (D_MODEL,)),
                 (b + "attn_q.weight", (N_HEAD * D_HEAD, D_MODEL)),
                 (b + "attn_k.weight", (N_KV_HEAD * D_HEAD, D_MODEL)),
                 (b + "attn_v.weight", (N_KV_HEAD * D_HEAD, D_MODEL)),
                 (b + "attn_output.weight", (D_MODEL, N_HEAD * D_HEAD)),
                 (b + "ffn_norm.weight", (D_MODEL,)),
                 (b + "ffn_gate.weight", (D_FF, D_MODEL)),
                 (b + "ffn_up.weight", (D_FF, D_MODEL)),
                 (b + "ffn_down.weight", (D_MODEL, D_FF))]
    plan += [("output_norm.weight", (D_MODEL,)), ("output.weight", (vocab, D_MODEL))]
    return plan


def copy_tokenizer(writer, source):
    """Copies every tokenizer.* key of the source GGUF (SmolLM2's gpt2 vocabulary); returns the vocabulary size."""
    import gguf
    reader = gguf.GGUFReader(str(source))
    vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = field.contents()
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=field.types[-1])
            if key == "tokenizer.ggml.tokens":
                vocab = len(value)
        else:
            writer.add_key_value(key, value, field.types[0])
    return vocab


def write_model(path, n_layer, exact):
    """Writes the model to path; returns (seconds, bytes, weights)."""
    import gguf
    from gguf.quants import quantize
    Q4_0 = gguf.GGMLQuantizationType.Q4_0
    block_bytes = gguf.GGML_QUANT_SIZES[Q4_0][1]  # 18 bytes per 32 weights
    rng = np.random.default_rng(SEED)

    sample = (rng.standard_normal((D_MODEL, D_MODEL), dtype=np.float32) * SCALE)
    t0 = time.monotonic()
    quantize(sample, Q4_0)
    rate = sample.size / (time.monotonic() - t0)
    print(f"gguf.quants.quantize Q4_0: {rate / 1e6:.1f}M weights/s on one {D_MODEL}x{D_MODEL} matrix", flush=True)

    t0 = time.monotonic()
    source = sorted(VOCAB_FROM.glob("*.gguf"))[0]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"random Llama-3-8B shape, {n_layer} layers, Q4_0 (headscope bench/big_gguf.py)")
    writer.add_block_count(n_layer)
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(D_MODEL)
    writer.add_feed_forward_length(D_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_KV_HEAD)
    writer.add_rope_freq_base(ROPE_THETA)
    writer.add_rope_dimension_count(D_HEAD)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    vocab = copy_tokenizer(writer, source)
    writer.add_vocab_size(vocab)

    plan = tensor_plan(n_layer, vocab)
    for name, shape in plan:
        if len(shape) == 1:
            writer.add_tensor_info(name, shape, np.dtype(np.float32), 4 * shape[0])
        else:
            rows, cols = shape
            nbytes = rows * cols // 32 * block_bytes
            writer.add_tensor_info(name, (rows, cols // 32 * block_bytes), np.dtype(np.uint8), nbytes, raw_dtype=Q4_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()

    pool = None if exact else quantize(rng.standard_normal((POOL_BLOCKS, 32), dtype=np.float32) * SCALE, Q4_0)
    weights = 0
    for name, shape in plan:
        if len(shape) == 1:
            writer.write_tensor_data(np.ones(shape, dtype=np.float32))
            weights += shape[0]
            continue
        rows, cols = shape
        if exact:
            data = quantize(rng.standard_normal(shape, dtype=np.float32) * SCALE, Q4_0)
        else:
            data = pool[rng.integers(0, POOL_BLOCKS, rows * cols // 32)].reshape(rows, cols // 32 * block_bytes)
        writer.write_tensor_data(data)
        weights += rows * cols
        del data
    writer.close()
    seconds = time.monotonic() - t0
    print(f"wrote {path}: {n_layer} layers, {weights / 1e9:.2f}B weights, {os.path.getsize(path) / 2**30:.2f} GiB "
          f"in {seconds:.0f} s ({'every tensor quantized' if exact else 'blocks drawn from one quantized pool'}; "
          f"--exact would spend about {weights / rate:.0f} s in the quantizer alone)", flush=True)
    return seconds, os.path.getsize(path), weights


def timed(cmd, env):
    """(wall s, CPU s, peak RSS MiB, returncode, stdout, stderr) of cmd under /usr/bin/time -v."""
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env)
    err = proc.stderr
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", err).group(1)
    seconds = sum(float(p) * 60 ** i for i, p in enumerate(reversed(wall.split(":"))))
    cpu = sum(float(re.search(rf"{k} time \(seconds\): (\S+)", err).group(1)) for k in ("User", "System"))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1)) / 1024
    return seconds, cpu, rss, proc.returncode, proc.stdout, err


def headscope_messages(err):
    return [line for line in err.splitlines() if line.startswith("headscope")]


def estimate_and_refusal(headscope, model, text_file):
    """headscope's load estimate (bytes), from the refusal of a 1 MiB load budget, then a refusal just below it."""
    env = env_for(1)
    base = [headscope, "run", "--model", model, "--file", text_file, "--no-probe", "--no-corpus", "-q"]
    _, _, _, rc, _, err = timed(base + ["--max-load-memory", "1M"], env)
    msg = headscope_messages(err)
    print("budget 1 MiB:", rc, *msg, sep="\n  ")
    m = re.search(r"loading needs about ([\d.]+) (GiB|MiB)", err)
    if rc == 0 or not m:
        sys.exit("big_gguf.py: headscope did not refuse the model under a 1 MiB load budget")
    estimate = float(m.group(1)) * (2**30 if m.group(2) == "GiB" else 2**20)
    below = int(estimate * 0.95)
    _, _, _, rc, _, err = timed(base + ["--max-load-memory", str(below)], env)
    print(f"budget {below / 2**30:.2f} GiB (5 % below the estimate):", rc, *headscope_messages(err), sep="\n  ")
    refused = rc != 0 and "loading needs about" in err
    return estimate, refused


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "build" / "bench" / "llama-8b-shape-q4_0.gguf"))
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--exact", action="store_true", help="quantize fresh normals for every tensor (slow)")
    ap.add_argument("--write-only", action="store_true", help="write the file and stop (keeps it)")
    ap.add_argument("--keep", action="store_true", help="keep the file after the benchmark")
    ap.add_argument("--reuse", action="store_true", help="benchmark an existing --out instead of writing it")
    ap.add_argument("--build", default=str(ROOT / "build"), help="headscope's build folder")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--T", type=int, default=512, help="tokens of the prompt")
    ap.add_argument("--gen", type=int, default=16, help="tokens llama-bench generates")
    ap.add_argument("--repeats", type=int, default=1, help="llama-bench repetitions")
    ap.add_argument("--pass-threads", default="",
                    help="thread counts at which build/decoder_bench times the forward pass alone ('' for none)")
    args = ap.parse_args()

    path = pathlib.Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if not (args.reuse and path.exists()):
        write_model(path, args.layers, args.exact)
    if args.write_only:
        return
    try:
        bench(args, path)
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
            print(f"deleted {path}")


def bench(args, path):
    import llamacpp
    from long_text import text_of_tokens
    binary, _ = llamacpp.build(llamacpp.unpack(llamacpp.sdist()))
    headscope = str(pathlib.Path(args.build) / "headscope")
    model_name, flags = llamacpp.cpu()
    print(f"CPU: {model_name}\nflags: {flags}")
    text_file = path.with_suffix(f".{args.T}.txt")
    text_file.write_text(text_of_tokens(str(VOCAB_FROM), args.T))

    estimate, refused = estimate_and_refusal(headscope, str(path), str(text_file))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows = []
    for t in [int(x) for x in args.threads.split(",")]:
        env = env_for(t)
        wall, cpu, rss, rc, out, err = timed(
            [headscope, "run", "--model", str(path), "--file", str(text_file), "--no-probe", "--no-corpus",
             "--threads", str(t), "--max-load-memory", str(int(estimate * 1.05))], env)
        if rc != 0:
            sys.exit(f"big_gguf.py: headscope run failed ({rc}):\n{err[-3000:]}")
        tokens = re.search(r"^(\d+) tokens", out, re.M)
        heads = sum(1 for line in out.splitlines() if re.match(r"^\d+\s+\d+\s+[\d.]+", line))
        rows.append(("headscope run", t, f"{tokens.group(1) if tokens else '?'} tokens, {heads} heads' statistics",
                     wall, cpu, rss))
        wall, cpu, rss, rc, out, err = timed(
            [str(binary), "-m", str(path), "-p", str(args.T), "-n", str(args.gen), "-t", str(t),
             "-r", str(args.repeats), "-o", "md"], env)
        if rc != 0:
            sys.exit(f"big_gguf.py: llama-bench failed ({rc}):\n{err[-3000:]}")
        rates = dict(re.findall(r"\|\s*(pp\d+|tg\d+)\s*\|\s*([\d.]+) ± [\d.]+\s*\|", out))
        rows.append(("llama-bench", t, ", ".join(f"{k} {v} t/s" for k, v in rates.items()), wall, cpu, rss))
        print(f"  done threads={t}", file=sys.stderr, flush=True)
    for t in [int(x) for x in args.pass_threads.split(",") if x]:
        wall, cpu, rss, rc, out, err = timed(
            [str(pathlib.Path(args.build) / "decoder_bench"), str(path), str(t), str(args.T), "--repeats", "1"],
            env_for(t))
        if rc != 0:  # e.g. refused: every capture of the full model at T = 512 needs tens of GiB
            rows.append(("decoder_bench", t, f"failed ({rc}): {err.strip().splitlines()[-1][:300]}", wall, cpu, rss))
            continue
        r = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
        rows.append(("decoder_bench", t, f"pp{args.T} {args.T * 1000 / r['all_ms']:.2f} t/s (every capture), "
                     f"pp{args.T} {args.T * 1000 / r['attention_ms']:.2f} t/s (attention only), "
                     f"tg {1000 / r['step_ms']:.2f} t/s (after {args.T})", wall, cpu, rss))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    print(f"\nheadscope's load estimate: {estimate / 2**30:.2f} GiB; a load budget 5 % below it "
          f"{'is refused before any weight is read' if refused else 'was NOT refused'}\n")
    print("| program | threads | what | wall s | CPU s | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for prog, t, what, wall, cpu, rss in rows:
        print(f"| {prog} | {t} | {what} | {wall:.1f} | {cpu:.1f} | {rss:.0f} |")
    text_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
