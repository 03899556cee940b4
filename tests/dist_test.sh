#!/usr/bin/env bash
# dist over MPI: the collectives on 2 ranks (tests/lua/dist_ranks.lua), Project 10 on 2 ranks, one
# process without mpirun, a rank that dies and a rank that errors (the other must stop within
# seconds, never hang), and Project 10 killed mid-training and resumed from its checkpoint.
# Usage: dist_test.sh MOONGRAD
set -uo pipefail
MG=$1
here=$(dirname "$0")
command -v mpirun >/dev/null || { echo "SKIPPED: no mpirun (Debian's openmpi-bin)"; exit 0; }
[ -f "$(dirname "$MG")/mgdist.so" ] || { echo "FAIL: mgdist.so is not beside $MG"; exit 1; }
# one core each (2 ranks with 2 threads each would share 2 cores), and no busy-waiting at barriers
export MG_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
run2() { timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$MG" "$@" 2>&1; }
fail() { echo "FAIL: $*"; exit 1; }

out=$(run2 "$here/lua/dist_ranks.lua") || fail "the collectives on 2 ranks:"$'\n'"$out"
echo "$out" | sed -n '1,4p'

# Project 10 on 2 ranks: the ranks end equal, and agree with one process within 1e-5 after 50
# steps in float32, and at the end of the run in float64
out=$(run2 "$here/../scripts/10_data_parallel.lua") || fail "project 10 on 2 ranks:"$'\n'"$out"
grep -q "All checks passed" <<<"$out" || fail "project 10 on 2 ranks:"$'\n'"$out"
grep -E "differ by|test accuracy" <<<"$out"
out=$(run2 "$here/../scripts/10_data_parallel.lua" --dtype float64 --steps 100) || fail "project 10 in float64:"$'\n'"$out"
grep -q "after 100 steps, against one process" <<<"$out" || fail "project 10 in float64 checked no end of run:"$'\n'"$out"
grep -E "differ by" <<<"$out"

# one process without mpirun: world_size 1, collectives return their input
out=$("$MG" -e 'dist.init(); assert(dist.rank == 0 and dist.world_size == 1)
local t = Tensor{1, 2}; assert(rawequal(dist.all_reduce(t, {op = "mean"}), t) and rawequal(dist.broadcast(t), t)); dist.barrier()
print("one process ok")' 2>&1) || fail "without mpirun: $out"
grep -q "one process ok" <<<"$out" || fail "without mpirun: $out"

# rank 1 kills itself with SIGKILL while rank 0 waits in an all-reduce
start=$(date +%s)
out=$(run2 -e 'dist.init()
if dist.rank == 1 then local pid = io.open("/proc/self/stat"):read("n"); os.execute("kill -9 " .. pid) end
while true do dist.all_reduce(Tensor.ones(1000)) end')
rc=$?
took=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || fail "a killed rank: mpirun exited 0"
[ "$took" -le 30 ] || fail "a killed rank: the job took ${took}s to stop"
grep -qi "signal 9\|killed" <<<"$out" || fail "a killed rank: no message naming it:"$'\n'"$out"
echo "killed rank: the job stopped after ${took}s (exit $rc)"

# rank 1 raises a Lua error while rank 0 waits at a barrier
start=$(date +%s)
out=$(run2 -e 'dist.init(); if dist.rank == 1 then error("boom on rank 1") end; dist.barrier(); print("never")')
rc=$?
took=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || fail "an erroring rank: mpirun exited 0"
[ "$took" -le 30 ] || fail "an erroring rank: the job took ${took}s to stop"
grep -q "boom on rank 1" <<<"$out" || fail "an erroring rank: the error is not shown:"$'\n'"$out"
grep -q "^never" <<<"$out" && fail "an erroring rank: rank 0 went past the barrier"
echo "erroring rank: the job stopped after ${took}s (exit $rc)"
# Project 10 killed with SIGKILL mid-training, then resumed from its last checkpoint: the same
# final weights as a run that was never interrupted
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
script="$here/../scripts/10_data_parallel.lua"
p10=(--steps 60 --check-steps 0)
out=$(run2 "$script" "${p10[@]}" --save "$tmp/whole.safetensors") || fail "project 10, uninterrupted:"$'\n'"$out"
setsid timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$MG" "$script" "${p10[@]}" \
  --checkpoint "$tmp/ck.safetensors" --every 10 --save "$tmp/killed.safetensors" >"$tmp/killed.log" 2>&1 &
job=$!
for _ in $(seq 600); do [ -f "$tmp/ck.safetensors" ] && break; sleep 0.1; done
[ -f "$tmp/ck.safetensors" ] || fail "project 10 wrote no checkpoint:"$'\n'"$(cat "$tmp/killed.log")"
sleep 0.5
kill -9 -- "-$job" 2>/dev/null
pkill -9 -f "10_data_parallel.lua.*killed.safetensors" 2>/dev/null
wait "$job" 2>/dev/null
[ -f "$tmp/killed.safetensors" ] && fail "project 10 finished before the kill (no test of a resume)"
step=$("$MG" -e "local _, m = state.safe_load('$tmp/ck.safetensors'); print(m.step)" 2>&1)
out=$(run2 "$script" "${p10[@]}" --checkpoint "$tmp/ck.safetensors" --resume --save "$tmp/killed.safetensors") ||
  fail "project 10, resumed:"$'\n'"$out"
same=$("$MG" -e "local a, b = state.safe_load('$tmp/whole.safetensors'), state.safe_load('$tmp/killed.safetensors')
local worst, n = 0, 0
for k, t in pairs(a) do worst = math.max(worst, (t - b[k]):abs():max():item()); n = n + 1 end
print(('%d %g'):format(n, worst))" 2>&1)
[ "${same#* }" = "0" ] || fail "the resumed run's weights differ from the uninterrupted run's: $same"
echo "killed after the checkpoint of step $step, resumed: the same weights as an uninterrupted run (${same%% *} tensors, difference 0)"
echo "dist: all passed"
