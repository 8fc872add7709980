#!/usr/bin/env bash
# `make test`: every check, in the order of the Makefile's targets, with one overlap. The sanitized
# build (clang, ASan + UBSan + the fuzzers' coverage; minutes of compiling on two cores) starts at
# once in the background at the lowest CPU priority (nice 19), so it compiles on whatever CPU the
# release tests leave idle (model loading, the browser tests' waits, single-threaded Python) and never
# takes CPU from them; the sanitized tests and the fuzzers then run when both are done.
# Its output goes to build-sanitize/background-build.log; a failed sanitized build fails `make test` with its tail.
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE_CMD=(make --no-print-directory)

"${MAKE_CMD[@]}" setup || exit 1
log=build-sanitize/background-build.log
# The configure step is quick and not niced; only the compile runs in the background.
"${MAKE_CMD[@]}" sanitize-configure || exit 1
nice -n 19 bash -c 'cmake --build --preset sanitize && cmake --build --preset sanitize --target fuzzers' >"$log" 2>&1 &
background=$!
trap 'kill "$background" 2>/dev/null; wait "$background" 2>/dev/null' EXIT

"${MAKE_CMD[@]}" lint test-cpp test-python test-wheel test-web || exit 1

if ! wait "$background"; then
  echo "make test: the sanitized build failed (the end of $log):" >&2
  tail -40 "$log" >&2
  exit 1
fi
trap - EXIT
"${MAKE_CMD[@]}" test-sanitize test-fuzz
