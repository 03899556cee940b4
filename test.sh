#!/usr/bin/env bash
# Set up and build if needed, then run every test.
#   ./test.sh             the normal build (build/), every test
#   ./test.sh --sanitize  a second build with AddressSanitizer + UndefinedBehaviorSanitizer
#                         (build-asan/, CMake option MG_SANITIZE=ON) and the tests under it
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
# Runs ctest with the given arguments, then lists the slowest tests (so they stay visible).
run_ctest() {
  local log; log=$(mktemp)
  local rc=0
  ctest --no-tests=error --output-on-failure -j2 "$@" | tee "$log" || rc=$?
  echo "slowest tests:"
  sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \(.*[^ .]\) \.\.*[ *]*[A-Za-z][A-Za-z ]* \([0-9.]*\) sec$/\2 s  \1/p' "$log" |
    sort -rn | sed -n 1,15p  # sed reads to the end: head would leave sort a SIGPIPE (exit 141 under pipefail)
  return "$rc"
}

if [ "${1:-}" != "--sanitize" ]; then
  cd build
  run_ctest
  exit
fi

if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMG_SANITIZE=ON
fi
ninja -C build-asan -j"${JOBS:-2}"
cd build-asan
# LeakSanitizer is on; tests/lsan.supp silences libedit's own never-freed strings (the REPL on a
# pseudo-terminal). The kernels clang compiles at run time are not instrumented, nor Lua or libedit.
# allocator_may_return_null=1: an impossible allocation (2^40 elements) throws std::bad_alloc as in
# the normal build, instead of ASan stopping the process (the crash sweep asks for such sizes).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:allocator_may_return_null=1
export LSAN_OPTIONS="suppressions=$PWD/../tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# ASan frames are several times bigger: give the recursive passes the same depth headroom as the
# normal build (the 10,000-op chain test), where the hard limit allows.
ulimit -s 65536 2>/dev/null || true
# The tests labelled "sanitize": the engine's, the fuzzers, the loaders and the crash sweep, on the
# CPU. The CL and VULKAN runs stay out: the drivers (PoCL, lavapipe) are not instrumented and
# keep allocations LeakSanitizer would report; the rest is covered by the normal build.
run_ctest -L sanitize
