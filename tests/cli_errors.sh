#!/usr/bin/env bash
# Failures outside Lua: a compiler that fails, and a damaged kernel cache entry.
set -euo pipefail
MG=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME=$dir
code='print((Tensor{1,2,3} * 3 + 1):tolist()[3])'

# a compile failure is a clear error and exit status 1, not a crash
set +e
err=$(MG_CLANG=false "$MG" -e "$code" 2>&1 >/dev/null); rc=$?
set -e
echo "compile failure: rc=$rc: $err"
[ "$rc" -eq 1 ] || { echo "FAIL: expected exit 1, got $rc"; exit 1; }
echo "$err" | grep -q "kernel compile failed" || { echo "FAIL: message does not say the compile failed"; exit 1; }

# a damaged cache entry is rebuilt, and the answer is still right
[ "$("$MG" -e "$code")" = "10" ] || { echo "FAIL: wrong value"; exit 1; }
for f in "$dir"/moongrad/kernels/*.so; do echo "garbage" > "$f"; done
out=$("$MG" -e "$code")
[ "$out" = "10" ] || { echo "FAIL: damaged cache gave '$out'"; exit 1; }
echo "PASS"
