#!/usr/bin/env bash
# Minimises each target's corpus and keeps it in git: merges build-sanitize/corpus/<target>/ (what
# the runs found), build-sanitize/seeds/<target>/ and the kept fuzz/corpus/<target>.tar.xz into the
# smallest set of inputs with the same coverage (libFuzzer's -merge=1), and packs that set, with
# fixed names, times and owners, back into fuzz/corpus/<target>.tar.xz.
#   fuzz/minimise.sh [TARGET ...]        (after make fuzz-build; default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
B=$ROOT/build-sanitize
if [ $# -gt 0 ]; then TARGETS=("$@"); else
  TARGETS=(); for f in fuzz/*_fuzzer.cc; do n=$(basename "$f" .cc); TARGETS+=("${n%_fuzzer}"); done
fi
export HEADSCOPE_MODEL=${HEADSCOPE_MODEL:-$ROOT/models/all-MiniLM-L6-v2}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0}
export OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p fuzz/corpus
for t in "${TARGETS[@]}"; do
  inputs=()
  for d in "$B/corpus/$t" "$B/seeds/$t"; do [ -d "$d" ] && inputs+=("$d"); done
  if [ -f "fuzz/corpus/$t.tar.xz" ]; then
    mkdir -p "$work/old" && tar -C "$work/old" -xJf "fuzz/corpus/$t.tar.xz" && inputs+=("$work/old/$t")
  fi
  mkdir -p "$work/new/$t"
  "$B/${t}_fuzzer" -merge=1 -timeout=10 -rss_limit_mb=3072 -malloc_limit_mb=1024 -max_len=65536 \
    "$work/new/$t" "${inputs[@]}" >"$work/$t.log" 2>&1 || { echo "minimise: $t failed:"; tail -5 "$work/$t.log"; exit 1; }
  tar -C "$work/new" -cJf "fuzz/corpus/$t.tar.xz" --sort=name --mtime=@0 --owner=0 --group=0 "$t"
  echo "minimise: $t: $(ls "$work/new/$t" | wc -l) inputs, $(grep -o '[0-9]* new features' "$work/$t.log" | tail -1)"
  rm -rf "$work/old" "$work/new"
done
