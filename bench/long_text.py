"""Long texts: wall time and peak memory of `headscope run` (every statistic and role of every
head) at growing lengths, streamed and dense, beside transformers with output_attentions=True.

    .venv/bin/python bench/long_text.py [--lengths 1024 2048 4096 8192] [--threads 2]
                                         [--model models/SmolLM2-135M-Instruct] [--no-reference]

Each measurement is its own process, run alone, timed by /usr/bin/time -v (wall clock and
maximum resident set size). The text is English from ../shared/data (UD EWT dev sentences), cut to
exactly N tokens by the model's own tokenizer. A side that would not fit in the machine's memory
is skipped (and said so): dense maps need 2·L·H·T² floats, transformers' attentions L·H·T².
The forward pass alone (`--maps stream` with statistics off is not a mode, so the floor is
estimated): the matrix-multiply FLOPs of the pass, 2·params·T + 4·L·H·T²·d_head (causal: half the
second term), at the GFLOP/s that `bench/linear_bench` measures on this machine is printed too."""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

from bench_env import env_for

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "ud" / "en_ewt-ud-dev.conllu"


def text_of_tokens(model_dir, n):
    """English text whose encoding by the model's tokenizer has n tokens (BOS and the like included)."""
    from transformers import AutoTokenizer
    path = pathlib.Path(model_dir)
    gguf = sorted(path.glob("*.gguf"))
    tok = (AutoTokenizer.from_pretrained(str(path), gguf_file=gguf[0].name) if gguf
           else AutoTokenizer.from_pretrained(str(path)))
    sentences = [l[9:].strip() for l in DATA.read_text().splitlines() if l.startswith("# text = ")]
    text = " ".join(sentences)
    while len(tok(text)["input_ids"]) < n:
        text = text + " " + text
    # Cut after the token that makes n with the tokens the model adds ([CLS]/[SEP], BOS).
    added = len(tok("")["input_ids"])
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    return text[:enc["offset_mapping"][n - added - 1][1]]


def timed(cmd, env):
    """(seconds, peak RSS in MiB, returncode, stderr) of cmd under /usr/bin/time -v."""
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", proc.stderr).group(1)
    parts = [float(p) for p in wall.split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1)) / 1024
    return seconds, rss, proc.returncode, proc.stderr


REFERENCE = r"""
import sys, time, pathlib, torch, transformers
path = pathlib.Path(sys.argv[1]); text = open(sys.argv[2]).read()
gguf = sorted(path.glob("*.gguf"))
kw = dict(torch_dtype=torch.float32, attn_implementation="eager")
if gguf:
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), gguf_file=gguf[0].name, **kw)
    tok = transformers.AutoTokenizer.from_pretrained(str(path), gguf_file=gguf[0].name)
else:
    model = transformers.AutoModel.from_pretrained(str(path), **kw)
    tok = transformers.AutoTokenizer.from_pretrained(str(path))
enc = tok(text, return_tensors="pt")
with torch.no_grad():
    out = model(**enc, output_attentions=True)
print(len(out.attentions), tuple(out.attentions[0].shape))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct"))
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--memory-gib", type=float, default=None, help="memory to assume (default: MemTotal)")
    args = ap.parse_args()
    env = env_for(args.threads)
    binary = str(ROOT / "build" / "headscope")
    model = pathlib.Path(args.model)
    gguf = sorted(model.glob("*.gguf"))
    model_arg = str(gguf[0]) if gguf else str(model)
    mem_kib = int(re.search(r"MemTotal:\s+(\d+)", pathlib.Path("/proc/meminfo").read_text()).group(1))
    memory = (args.memory_gib * 2 ** 30) if args.memory_gib else mem_kib * 1024
    info = json.loads(subprocess.run([binary, "run", "--model", model_arg, "--text", "x", "--json", "/dev/stdout",
                                      "--quiet", "--no-probe"], capture_output=True, text=True, env=env).stdout)
    L, H = info["model"]["n_layer"], info["model"]["n_head"]
    print(f"model {model.name}: {L} layers x {H} heads; {args.threads} threads; memory {memory / 2**30:.1f} GiB")
    print(f"{'T':>6} {'side':<28} {'seconds':>8} {'peak MiB':>9}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.lengths:
            text_path = pathlib.Path(tmp) / f"text{n}.txt"
            text_path.write_text(text_of_tokens(model, n))
            sides = [("headscope run --maps stream", ["--maps", "stream"], 0),
                     ("headscope run --maps dense", ["--maps", "dense"], 2 * L * H * n * n * 4)]
            for name, extra, need in sides:
                if need > 0.8 * memory:
                    print(f"{n:>6} {name:<28} {'skipped: dense maps need ' + str(need >> 20) + ' MiB':>18}")
                    continue
                s, rss, rc, err = timed([binary, "run", "--model", model_arg, "--file", str(text_path), "--quiet",
                                         "--no-probe", "--max-memory", str(int(0.9 * memory)), *extra], env)
                said = [l for l in err.splitlines() if l.startswith("headscope:")]
                status = "" if rc == 0 else f"  (exit {rc}: {(said or ['?'])[-1][:100]})"
                print(f"{n:>6} {name:<28} {s:>8.1f} {rss:>9.0f}{status}", flush=True)
                rows.append({"T": n, "side": name, "seconds": s, "peak_mib": rss, "rc": rc})
            if not args.no_reference:
                need = L * H * n * n * 4 * 2  # the attentions plus softmax's own copy
                if need > 0.8 * memory:
                    print(f"{n:>6} {'transformers attentions':<28} skipped: needs about {need >> 20} MiB")
                    continue
                s, rss, rc, err = timed([sys.executable, "-c", REFERENCE, str(model), str(text_path)], env)
                status = "" if rc == 0 else f"  (exit {rc})"
                print(f"{n:>6} {'transformers attentions':<28} {s:>8.1f} {rss:>9.0f}{status}", flush=True)
                rows.append({"T": n, "side": "transformers", "seconds": s, "peak_mib": rss, "rc": rc})
    print(json.dumps({"model": model.name, "threads": args.threads, "rows": rows}))


if __name__ == "__main__":
    main()
