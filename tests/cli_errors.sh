#!/usr/bin/env bash
# The kernel cache on disk going wrong: damaged entries, truncated entries, a cache directory
# that cannot be written. Each must still give the right answer (by compiling again), never a crash.
set -euo pipefail
MG=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME=$dir
code='print((Tensor{1,2,3} * 3 + 1):tolist()[3])'
compiled() { DEBUG=1 "$MG" -e "$code" | sed -n 's/.*(\([0-9]*\) compiled).*/\1/p' | awk '{s+=$1} END {print s+0}'; }

[ "$("$MG" -e "$code")" = "10" ] || { echo "FAIL: wrong value"; exit 1; }
[ "$(compiled)" -eq 0 ] || { echo "FAIL: the cache was not used"; exit 1; }

# garbage in every entry: rebuilt, and the answer is still right
for f in "$dir"/moongrad/kernels/*.o; do echo "garbage" > "$f"; done
[ "$("$MG" -e "$code")" = "10" ] || { echo "FAIL: damaged cache gave a wrong answer"; exit 1; }
[ "$(compiled)" -eq 0 ] || { echo "FAIL: the damaged entries were not rewritten"; exit 1; }

# entries cut short (a full disk) or with one byte flipped: detected by the digest, rebuilt
for f in "$dir"/moongrad/kernels/*.o; do head -c 700 "$f" > "$f.t" && mv "$f.t" "$f"; done
[ "$("$MG" -e "$code")" = "10" ] || { echo "FAIL: truncated cache gave a wrong answer"; exit 1; }
for f in "$dir"/moongrad/kernels/*.o; do printf '\x90' | dd of="$f" bs=1 seek=600 conv=notrunc status=none; done
n=$(compiled)
[ "$n" -gt 0 ] || { echo "FAIL: a flipped byte was not detected"; exit 1; }
[ "$("$MG" -e "$code")" = "10" ] || { echo "FAIL: flipped byte gave a wrong answer"; exit 1; }

# a cache directory that cannot be created: compiles in memory, same answer, exit status 0
touch "$dir/file"
out=$(XDG_CACHE_HOME=$dir/file "$MG" -e "$code")
[ "$out" = "10" ] || { echo "FAIL: unwritable cache gave '$out'"; exit 1; }
echo "PASS"
