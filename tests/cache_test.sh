#!/usr/bin/env bash
# The on-disk kernel cache: a second process running the same script compiles zero kernels.
set -euo pipefail
MG=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME=$dir DEBUG=1
code='local a = Tensor.arange(0, 12):reshape(3, 4)
print(((a + 1) * 2):relu():sum():item())
print(a:cast("float32"):softmax(1):sum():item())'
first=$("$MG" -e "$code")
second=$("$MG" -e "$code")
echo "first run:"; echo "$first"
echo "second run:"; echo "$second"
n1=$(echo "$first" | sed -n 's/.*(\([0-9]*\) compiled).*/\1/p' | awk '{s+=$1} END {print s+0}')
n2=$(echo "$second" | sed -n 's/.*(\([0-9]*\) compiled).*/\1/p' | awk '{s+=$1} END {print s+0}')
[ "$n1" -gt 0 ] || { echo "FAIL: first run compiled nothing ($n1)"; exit 1; }
[ "$n2" -eq 0 ] || { echo "FAIL: second run compiled $n2 kernels"; exit 1; }
# the numbers must not change either
[ "$(grep -v '^\*\*\*' <<<"$first")" = "$(grep -v '^\*\*\*' <<<"$second")" ] || { echo "FAIL: results differ"; exit 1; }
ls "$dir/moongrad/kernels/"*.o >/dev/null
echo "PASS: first run compiled $n1 kernels, second run 0"
