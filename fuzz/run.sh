#!/usr/bin/env bash
# Runs every libFuzzer target of build-sanitize/ for SECONDS each (default 20), two at a time, and
# fails if any of them finds a crash, a sanitizer report, a leak, a timeout or an out-of-memory.
#   fuzz/run.sh [SECONDS] [TARGET ...]      TARGET: e.g. gguf (the gguf_fuzzer)
# Corpora grow in build-sanitize/corpus/<target>/ (kept between runs), seeds come from
# build-sanitize/seeds/<target>/ (fuzz/make_seeds.py) and from the minimised corpus kept in git,
# fuzz/corpus/<target>.tar.xz (unpacked to build-sanitize/kept/<target>/; every one of its inputs is
# run first, so a clean clone starts where the last campaign ended), findings are written to
# build-sanitize/findings/<target>/ and each run's log to build-sanitize/logs/<target>.log.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
B=$ROOT/build-sanitize
SECONDS_EACH=${1:-20}
shift || true
if [ $# -gt 0 ]; then TARGETS=("$@"); else
  TARGETS=(); for f in fuzz/*_fuzzer.cc; do n=$(basename "$f" .cc); TARGETS+=("${n%_fuzzer}"); done
fi
mkdir -p "$B/logs"
export HEADSCOPE_MODEL=${HEADSCOPE_MODEL:-$ROOT/models/all-MiniLM-L6-v2}
# Leaks of the sanitizers' own OpenMP runtime threads are not ours.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1

run_one() {
  local t=$1 exe=$B/${1}_fuzzer
  mkdir -p "$B/corpus/$t" "$B/findings/$t" "$B/kept"
  local kept=()
  if [ -f "$ROOT/fuzz/corpus/$t.tar.xz" ]; then
    if [ ! -d "$B/kept/$t" ] || [ "$ROOT/fuzz/corpus/$t.tar.xz" -nt "$B/kept/$t" ]; then
      rm -rf "$B/kept/$t" && tar -C "$B/kept" -xJf "$ROOT/fuzz/corpus/$t.tar.xz" && touch "$B/kept/$t"
    fi
    kept=("$B/kept/$t")
  fi
  # -rss_limit_mb / -malloc_limit_mb: a single input may not make the reader allocate more than
  # 1 GiB (the budgets of include/headscope/limits.h are far below); -timeout: 10 s per input.
  "$exe" "$B/corpus/$t" "$B/seeds/$t" "${kept[@]}" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=3072 \
    -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 -artifact_prefix="$B/findings/$t/" \
    >"$B/logs/$t.log" 2>&1
  local rc=$?
  local runs; runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$B/logs/$t.log" | grep -o '[0-9]*$' | tail -1)
  if [ $rc -eq 0 ]; then
    echo "fuzz: $t: ${runs:-?} runs in ${SECONDS_EACH} s, no findings"
  else
    echo "fuzz: $t: FOUND A PROBLEM (exit $rc) after ${runs:-?} runs; input in build-sanitize/findings/$t/, log:"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==" "$B/logs/$t.log" | head -8 | sed 's/^/  /'
  fi
  return $rc
}
export -f run_one
export B SECONDS_EACH ROOT
printf '%s\n' "${TARGETS[@]}" | xargs -P 2 -I{} bash -c 'run_one {}'
