#!/usr/bin/env bash
# BEAM: a search writes its choice to the SQLite cache; a second process takes it from there
# (same opts, nothing tried, nothing compiled); two processes may share the cache at once; a
# damaged cache file costs a search, never an error; the values never change.
set -euo pipefail
MG=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME=$dir BEAM_BUDGET=3 MG_THREADS=1
code='local a, b = Tensor.arange(0, 48 * 40):reshape(48, 40):cast("float32") / 100, Tensor.arange(0, 40 * 36):reshape(40, 36):cast("float32") / 50
local c = a:matmul(b):realize()
local ref = Context({BEAM=0}, function() return a:matmul(b):realize() end)
local d, m = (c - ref):abs():max():item(), ref:abs():max():item()
assert(d <= 1e-6 * m, "BEAM changed the values by " .. d .. " (largest " .. m .. ")")
print("sum", ("%.2f"):format(c:sum():item()))'
# Two searches may choose different opts (timing noise), which may sum in another order: the
# printed sums of such runs agree to float32 rounding, not to the digit.
same_sum() {
  awk -v a="$(sed -n 's/^sum\t//p' <<<"$1")" -v b="$(sed -n 's/^sum\t//p' <<<"$2")" \
    'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * (a < 0 ? -a : a)) }'
}
first=$(BEAM=2 DEBUG=1 "$MG" -e "$code")
second=$(BEAM=2 DEBUG=1 "$MG" -e "$code")
echo "first run:"; grep BEAM <<<"$first"
echo "second run:"; grep -E "BEAM|compiled" <<<"$second"
chose=$(echo "$first" | sed -n 's/.*\(r_[0-9_]*\) *chose \(.*\): .*/\1 \2/p')
cached=$(echo "$second" | sed -n 's/.*\(r_[0-9_]*\) *from the cache: \(.*\)/\1 \2/p')
[ -n "$chose" ] || { echo "FAIL: the first run did not search"; exit 1; }
[ "$chose" = "$cached" ] || { echo "FAIL: the cache gave '$cached', the search chose '$chose'"; exit 1; }
grep -q " tried," <<<"$second" && { echo "FAIL: the second run searched again"; exit 1; }
n2=$(echo "$second" | sed -n 's/.*(\([0-9]*\) compiled).*/\1/p' | awk '{s+=$1} END {print s+0}')
[ "$n2" -eq 0 ] || { echo "FAIL: the second run compiled $n2 kernels"; exit 1; }
[ "$(grep '^sum' <<<"$first")" = "$(grep '^sum' <<<"$second")" ] || { echo "FAIL: results differ"; exit 1; }

# :beam alone shows the cache
echo ":beam" | "$MG" | grep -q "beam.sqlite (.* kernel" || { echo "FAIL: :beam does not show the cache"; exit 1; }

# two processes searching at once share the file
rm -f "$dir"/moongrad/beam.sqlite*
BEAM=2 "$MG" -e "$code" > "$dir/p1" & BEAM=2 "$MG" -e "$code" > "$dir/p2"; wait
same_sum "$(cat "$dir/p1")" "$(cat "$dir/p2")" || { echo "FAIL: concurrent runs differ: $(cat "$dir/p1") $(cat "$dir/p2")"; exit 1; }

# a damaged cache file: searched again, right answer, exit status 0
rm -f "$dir"/moongrad/beam.sqlite-*
echo "this is not a database" > "$dir/moongrad/beam.sqlite"
out=$(BEAM=2 "$MG" -e "$code")
same_sum "$out" "$(cat "$dir/p1")" || { echo "FAIL: a damaged cache changed the output: $out, not $(cat "$dir/p1")"; exit 1; }
echo "PASS: every choice read back from the cache:"; echo "$chose"
