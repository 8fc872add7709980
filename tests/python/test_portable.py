"""The package and the CLI run on any x86-64-v2 CPU, whichever machine built them (docs/reliability.md,
"Portable binaries"): the code outside the hand-written kernel variants has no AVX instruction, the
variants are chosen at run time (headscope.kernel_isa(), HEADSCOPE_ISA), and the installed package
runs a text on emulated CPUs without AVX-512 (Haswell) and without any AVX (Nehalem)."""
import glob
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from conftest import MINILM, ROOT

BUILD = ROOT / "build"
# An instruction on a 256- or 512-bit register: AVX or later, which x86-64-v2 does not have.
WIDE = re.compile(r"%[yz]mm\d")
# Where such instructions may be: the kernel variants (src/ops/*_avx2.cc, *_avx512.cc,
# src/io/gguf_quants_avx*.cc: namespace kernels) and the F16C row conversion (src/io/float_bits_f16c.cc);
# a template instance is named after its return type.
VARIANT = re.compile(r"^(\w+ )?(headscope::(ops|io)::kernels::|headscope::io::f16_to_f32_row_f16c\()")
VARIANT_OBJECT = re.compile(r"_(avx2|avx512|f16c)\.cc\.o$")
QEMU = shutil.which("qemu-x86_64")


def _native_build() -> bool:
    cache = BUILD / "CMakeCache.txt"
    return cache.exists() and "HEADSCOPE_NATIVE:BOOL=ON" in cache.read_text()


def _disassembly(path: pathlib.Path) -> list[str]:
    if not shutil.which("objdump"):
        pytest.skip("objdump is not installed (binutils)")
    if _native_build():
        pytest.skip("build/ is configured with HEADSCOPE_NATIVE=ON: a binary for this CPU only")
    proc = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                          check=True)
    return proc.stdout.splitlines()


def _wide_by_function(lines: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    function = "?"
    for line in lines:
        header = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if header:
            function = header.group(1)
        elif WIDE.search(line):
            counts[function] = counts.get(function, 0) + 1
    return counts


def _isa_of_subprocess(setting: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "HEADSCOPE_ISA"}
    if setting is not None:
        env["HEADSCOPE_ISA"] = setting
    return subprocess.run([sys.executable, "-c", "import headscope; print(headscope.kernel_isa())"], env=env,
                          capture_output=True, text=True, timeout=120)


def test_kernel_isa_is_lowered_by_the_setting_and_agrees_with_the_cli(headscope, cli):
    best = _isa_of_subprocess(None).stdout.strip()
    assert best in ("portable", "avx2", "avx512")
    assert _isa_of_subprocess("portable").stdout.strip() == "portable"
    order = ["portable", "avx2", "avx512"]
    assert _isa_of_subprocess("avx2").stdout.strip() == order[min(1, order.index(best))]
    bad = _isa_of_subprocess("avx9")
    assert bad.returncode != 0 and "HEADSCOPE_ISA" in bad.stderr and "portable" in bad.stderr
    # This process (HEADSCOPE_ISA as make test-wheel sets it) and the CLI under the same environment.
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=True).stdout
    assert f"(kernels: {headscope.kernel_isa()})" in version


def test_cli_has_wide_registers_only_in_kernel_variants(cli):
    counts = _wide_by_function(_disassembly(cli))
    outside = sorted(f for f in counts if not VARIANT.search(f))
    assert outside == [], f"AVX registers outside the kernel variants: {outside[:10]}"
    assert any(f.startswith("headscope::ops::kernels::") for f in counts)  # the variants are linked in


def test_module_has_wide_registers_only_from_kernel_variants(headscope):
    # The module is stripped, so its instructions cannot be named by function: the number of wide-register
    # instructions in it must be exactly the number in the variant objects it was linked from.
    module = pathlib.Path(headscope._core.__file__)
    built = list((BUILD / "python").glob("_core.*.so"))
    if len(built) != 1 or built[0].read_bytes() != module.read_bytes():
        pytest.skip(f"the installed module is not the one of {BUILD / 'python'} (make python)")
    objects = sorted(o for o in glob.glob(str(BUILD / "CMakeFiles/headscope_core.dir/src/*/*.cc.o"))
                     if VARIANT_OBJECT.search(o))
    assert {pathlib.Path(o).name for o in objects} >= {"panel_linear_avx2.cc.o", "quant_gemv_avx512.cc.o",
                                                       "float_bits_f16c.cc.o"}
    in_variants = sum(sum(_wide_by_function(_disassembly(pathlib.Path(o))).values()) for o in objects)
    in_module = sum(_wide_by_function(_disassembly(module)).values())
    assert in_variants > 0
    assert in_module == in_variants


@pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 (qemu-user) is not installed")
@pytest.mark.parametrize("cpu,isa", [("Nehalem", "portable"), ("Haswell", "avx2")])
def test_package_runs_on_an_emulated_older_cpu(tmp_path, cpu, isa):
    # Nehalem: SSE4.2 and POPCNT, no AVX; Haswell: AVX2, FMA, F16C, no AVX-512. An instruction the
    # emulated CPU lacks ends the process with SIGILL.
    script = ("import sys, headscope; m = headscope.load(sys.argv[1], threads=1);"
              "r = m.run('The cat sat.', corpus=False, probe=False);"
              "print(headscope.kernel_isa(), r.attention.shape, round(float(r.attention.sum()), 3))")
    env = {k: v for k, v in os.environ.items() if k != "HEADSCOPE_ISA"}
    proc = subprocess.run([QEMU, "-cpu", cpu, sys.executable, "-c", script, str(MINILM)], capture_output=True,
                          text=True, timeout=900, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    T = 6  # [CLS] the cat sat . [SEP]
    assert proc.stdout.split() == [isa, "(6,", "12,", f"{T},", f"{T})", f"{6 * 12 * T:.1f}"]
