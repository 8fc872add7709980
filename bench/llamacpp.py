"""headscope against llama.cpp on the same GGUF files, same thread counts, on this machine.

  .venv/bin/python bench/llamacpp.py [--models models/SmolLM2-135M-Instruct,models/gemma-3-270m]
                                     [--threads 1,2] [--lengths 128,512] [--gen 16] [--repeats 3]
                                     [--build-only]

llama.cpp is the peer that captures nothing: it is built here from the vendored copy inside the
llama-cpp-python source package (.venv/share/llama-cpp-python/llama_cpp_python-*.tar.gz), which
headscope does not depend on. The first run unpacks the package into
.venv/share/llama-cpp-python/src/, configures vendor/llama.cpp (Release, GGML_NATIVE, CPU only,
static, no curl) and builds only the `llama-bench` target under `nice` with -j2; later runs reuse
the binary.

Measured, as tokens per second (medians over --repeats runs):
  pp<T>  prompt processing of T tokens. llama.cpp: `llama-bench -p T`. headscope: one forward pass
         over T tokens with every capture on (attention, head outputs, W_O contributions, hidden
         states), timed by build/decoder_bench (model loaded once, outside the timing).
  tg     one generated token. llama.cpp: `llama-bench -n N` (N tokens after an empty context, the
         mean rate). headscope: one step through the KV cache after the smallest T with the
         attention row captured (decoder_bench's step), i.e. at a longer context than llama.cpp's.
Prints the CPU (lscpu model name and flags), the load average, and a Markdown table with
ratio = headscope t/s / llama.cpp t/s (1.00 = as fast as llama.cpp)."""
import argparse
import glob
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_env import env_for, json_lines  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
# .venv is a link shared by checkouts: the real path keeps one build whichever checkout runs this.
CACHE = (ROOT / ".venv").resolve() / "share" / "llama-cpp-python"


def sdist():
    found = sorted(CACHE.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        sys.exit(f"llamacpp.py: no llama_cpp_python-*.tar.gz in {CACHE}; "
                 "download it with `.venv/bin/pip download --no-deps --no-binary :all: llama-cpp-python`")
    return found[-1]


def unpack(archive):
    """Unpacks the sdist once into CACHE/src/ and returns its vendor/llama.cpp folder."""
    name = archive.name[:-len(".tar.gz")]
    top = CACHE / "src" / name
    if not (top / "vendor" / "llama.cpp" / "CMakeLists.txt").exists():
        print(f"unpacking {archive.name} into {top.parent}", file=sys.stderr)
        with tarfile.open(archive) as tar:
            tar.extractall(top.parent, filter="data")
    return top / "vendor" / "llama.cpp"


def build(src):
    """Configures and builds llama-bench once; returns (binary, seconds spent building or None)."""
    out = src / "build-bench"
    binary = out / "bin" / "llama-bench"
    if binary.exists():
        return binary, None
    cache = out / "CMakeCache.txt"
    if cache.exists() and f"CMAKE_HOME_DIRECTORY:INTERNAL={src}\n" not in cache.read_text():
        sys.exit(f"llamacpp.py: {out} was configured from another path (another checkout, whose build may "
                 "still be running); wait for it to finish, or delete that folder to build again from here")
    t0 = time.monotonic()
    subprocess.run(["cmake", "-S", str(src), "-B", str(out), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=OFF",
                    "-DLLAMA_CURL=OFF", "-DGGML_CUDA=OFF", "-DGGML_VULKAN=OFF", "-DGGML_METAL=OFF",
                    "-DGGML_HIP=OFF", "-DGGML_SYCL=OFF", "-DGGML_OPENCL=OFF", "-DGGML_BLAS=OFF",
                    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF",
                    "-DLLAMA_BUILD_TOOLS=ON"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["nice", "cmake", "--build", str(out), "--target", "llama-bench", "-j2"], check=True,
                   stdout=subprocess.DEVNULL)
    return binary, time.monotonic() - t0


def llama_version(src, archive):
    """The sdist version and, where the package recorded it, the vendored llama.cpp commit."""
    version = archive.name[len("llama_cpp_python-"):-len(".tar.gz")]
    commit = ""
    head = src / ".git"
    if head.is_file():  # a submodule: .git names the gitdir
        gitdir = (src / head.read_text().split(":", 1)[1].strip()).resolve()
        head = gitdir / "HEAD"
    elif head.is_dir():
        head = head / "HEAD"
    if head.is_file():
        commit = head.read_text().strip()
    return version, commit


def cpu():
    info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return fields.get("Model name", "?").strip(), fields.get("Flags", "").strip()


def gguf(model_dir):
    files = sorted(glob.glob(os.path.join(model_dir, "*.gguf")))
    if not files:
        sys.exit(f"llamacpp.py: no .gguf file in {model_dir}")
    return files[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="models/SmolLM2-135M-Instruct,models/gemma-3-270m")
    ap.add_argument("--build", default=str(ROOT / "build"), help="headscope's build folder (decoder_bench)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--lengths", default="128,512")
    ap.add_argument("--gen", type=int, default=16, help="tokens llama-bench generates per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()

    archive = sdist()
    src = unpack(archive)
    binary, seconds = build(src)
    version, commit = llama_version(src, archive)
    print(f"llama.cpp: vendored in llama-cpp-python {version}" + (f", commit {commit}" if commit else ""))
    if seconds is not None:
        print(f"llama-bench built in {seconds:.0f} s ({binary})")
    if args.build_only:
        return

    model_name, flags = cpu()
    print(f"CPU: {model_name}\nflags: {flags}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    lengths = [int(x) for x in args.lengths.split(",")]
    rows = []
    for model_dir in args.models.split(","):
        model_dir = str(ROOT / model_dir) if not os.path.isabs(model_dir) else model_dir
        file = gguf(model_dir)
        for t in [int(x) for x in args.threads.split(",")]:
            ref = {}
            runs = subprocess.run([str(binary), "-m", file, "-p", args.lengths, "-n", str(args.gen),
                                   "-t", str(t), "-r", str(args.repeats), "-o", "json"],
                                  capture_output=True, text=True, env=env_for(t), check=True).stdout
            for r in json.loads(runs):
                key = f"pp{r['n_prompt']}" if r["n_prompt"] else "tg"
                ref[key] = statistics.median(r["samples_ts"])
            ours = {r["T"]: r for r in json_lines(
                [str(pathlib.Path(args.build) / "decoder_bench"), file, str(t),
                 *[str(x) for x in lengths], "--repeats", str(args.repeats)], env_for(t))}
            hs = {f"pp{T}": T * 1000.0 / ours[T]["all_ms"] for T in lengths}
            hs["tg"] = 1000.0 / ours[min(lengths)]["step_ms"]
            rows.append((os.path.basename(file), t, ref, hs))
            print(f"  done {os.path.basename(file)} threads={t}", file=sys.stderr)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    keys = [f"pp{T}" for T in lengths] + ["tg"]
    long = f"pp{max(lengths)}"
    print("\n| model | threads | " + " | ".join(f"{k} llama.cpp t/s | {k} headscope t/s | ratio" for k in keys) +
          f" | tg within 1.5x | {long} within 2x |")
    print("|---|---|" + "---|---|---|" * len(keys) + "---|---|")
    for name, t, ref, hs in rows:
        cells = " | ".join(f"{ref[k]:.1f} | {hs[k]:.1f} | {hs[k] / ref[k]:.2f}" for k in keys)
        met = ["met" if hs[k] * limit >= ref[k] else "not met" for k, limit in (("tg", 1.5), (long, 2.0))]
        print(f"| {name} | {t} | {cells} | {met[0]} | {met[1]} |")
    print(f"\nratio = headscope t/s / llama.cpp t/s. Targets: tg ratio >= {1 / 1.5:.2f} (within 1.5x), "
          f"pp{max(lengths)} ratio >= 0.50 (within 2x, every head captured).")


if __name__ == "__main__":
    main()
