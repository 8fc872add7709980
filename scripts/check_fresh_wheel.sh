#!/usr/bin/env bash
# `make check-fresh-wheel`: what a user gets from `pip install .` and `python -m build` in a fresh
# clone of this repository (docs/python.md, "Install"): the clone has no built views, no
# web/node_modules and no build folders, and each wheel is installed into a clean virtualenv that
# has nothing but the wheel and numpy. Checks that each installed package carries the notebook
# views, runs a text and writes a page with them. The C++ core is compiled in each build (about 20
# minutes each on two cores, less with ccache), so this is a manual check, not part of `make test`.
#
#   scripts/check_fresh_wheel.sh [WORK_DIR]     (default: a new folder under /tmp)
#
# Needs git, the C++ build dependencies of scripts/setup.sh, npm, and pip's access to the package
# index for the build requirements (scikit-build-core, nanobind) and numpy.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d /tmp/headscope-fresh-wheel.XXXXXX)}"
MODEL="${HEADSCOPE_MODEL:-$ROOT/models/all-MiniLM-L6-v2}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$WORK"
echo "check-fresh-wheel: working in $WORK"

# The committed tree only (HEAD), as `git clone` gives it.
rm -rf "$WORK/clone"
git clone -q --no-hardlinks "$ROOT" "$WORK/clone"
git -C "$WORK/clone" checkout -q "$(git -C "$ROOT" rev-parse HEAD)"
# ccache (when CMake finds it) takes paths relative to the build folder, so objects compiled from
# the same sources in another checkout can be reused; the result is the same either way. The wheel
# that `python -m build` makes from its sdist is built in a temporary folder, here under $WORK.
export CCACHE_BASEDIR="$WORK" TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"

# A clean virtualenv with pip, and a text run through the installed package, with a page written.
check_installed() {
  local venv="$1"
  "$venv/bin/python" - "$MODEL" "$WORK/page-$(basename "$venv").html" <<'EOF'
import pathlib, sys
import headscope
from headscope import views
package = pathlib.Path(headscope.__file__).parent
assert "site-packages" in str(package), package
assert views.BUNDLE.is_file() and views.BUNDLE.stat().st_size > 10_000, f"no views in {package}"
result = headscope.load(sys.argv[1], threads=2).run("The cat sat on the mat.", corpus=False)
page = pathlib.Path(headscope.save_html(result, sys.argv[2], view="layer"))
assert views.BUNDLE.read_text()[:200] in page.read_text(), "the page lacks the views' script"
print(f"  {package}: views {views.BUNDLE.stat().st_size} bytes, kernels {headscope.kernel_isa()}, "
      f"attention {result.attention.shape}, page {page.stat().st_size} bytes")
EOF
}

echo "check-fresh-wheel: pip install . (build isolation, in the clone)"
"$PYTHON" -m venv "$WORK/venv-pip"
(cd "$WORK/clone" && time "$WORK/venv-pip/bin/pip" install -q --disable-pip-version-check .)
check_installed "$WORK/venv-pip"

echo "check-fresh-wheel: python -m build (an sdist, then the wheel built from it)"
rm -rf "$WORK/clone/build-python" "$WORK/clone/web/node_modules" "$WORK/clone/python/headscope/_web"
"$PYTHON" -m venv "$WORK/venv-build"
"$WORK/venv-build/bin/pip" install -q --disable-pip-version-check build
(cd "$WORK/clone" && time "$WORK/venv-build/bin/python" -m build --outdir "$WORK/dist" .)
"$WORK/venv-build/bin/pip" install -q --disable-pip-version-check "$WORK"/dist/headscope-*.whl
check_installed "$WORK/venv-build"
echo "check-fresh-wheel: both wheels carry the views and run ($WORK/dist)"
