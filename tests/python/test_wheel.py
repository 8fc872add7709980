"""The wheel file that `make python` builds installs into a clean virtualenv (nothing but the wheel
and numpy) and runs a text there."""
import glob
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import MINILM, ROOT, TEXT


def test_wheel_in_clean_venv(tmp_path):
    wheels = sorted(glob.glob(os.path.join(os.environ.get("HEADSCOPE_WHEELS", ROOT / "build" / "dist"), "headscope-*.whl")))
    if not wheels:
        pytest.skip("no wheel built (make python)")
    venv = tmp_path / "venv"
    # No pip inside the venv (ensurepip is the slow part): this interpreter's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                           "--disable-pip-version-check", wheels[-1], "numpy"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    script = ("import sys, headscope; m = headscope.load(sys.argv[1], threads=2); r = m.run(sys.argv[2], corpus=False);"
              "print(headscope.__file__); print(r.attention.shape, round(float(r.attention.sum()), 3))")
    proc = subprocess.run([str(python), "-c", script, str(MINILM), TEXT], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr
    location, shape = proc.stdout.splitlines()
    assert pathlib.Path(location).is_relative_to(venv)  # the wheel's copy, not the project's
    T = 16
    assert shape == f"(6, 12, {T}, {T}) {6 * 12 * T:.1f}"


def test_sdist_carries_every_source_the_build_compiles(tmp_path):
    """`python -m build` builds the wheel from the sdist: every committed file of the C++ core, the
    bindings and the web UI must be in it (an unanchored exclude pattern such as "models" once
    dropped src/models/ and "build*" src/pipeline/build_atlas.cc, and the wheel could not link)."""
    tracked = subprocess.run(["git", "ls-files", "CMakeLists.txt", "pyproject.toml", "include", "src", "python",
                              "web/src", "web/package.json", "web/package-lock.json"],
                             cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import tarfile
    (sdist,) = tmp_path.glob("headscope-*.tar.gz")
    with tarfile.open(sdist) as tar:
        packed = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = sorted(set(tracked.stdout.split()) - packed)
    assert not missing, f"{len(missing)} files missing from the sdist, first {missing[:10]}"
