#!/usr/bin/env bash
# Every distinct kernel the op suite and the op matrix make, built for CUDA (NVRTC -> PTX) while the suite runs on
# the CPU, and each PTX assembled by ptxas for sm_90. No GPU needed.
set -euo pipefail
moongrad=$1; src=$2; op_matrix=${3:-}
command -v ptxas >/dev/null || PATH=/usr/local/cuda/bin:$PATH
command -v ptxas >/dev/null || { echo "SKIPPED: no ptxas (CUDA toolkit) here"; exit 0; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for t in test_torch_refs test_autograd test_nn; do
  MG_CROSS_COMPILE="CUDA:$out" "$moongrad" "$src/tests/lua/$t.lua" > /dev/null
done
# every primitive op on every dtype too
[ -z "$op_matrix" ] || MG_CROSS_COMPILE="CUDA:$out" "$op_matrix" CPU > /dev/null
# a refusal that names what CUDA C cannot do (a 16-bit float's bits: it computes them in float) is
# the op matrix's "clear error"; any other error is a failure
refused=$(grep -l "renderer cannot" "$out"/*.error 2>/dev/null | wc -l)
[ "$refused" -eq 0 ] || { echo "$refused kernels refused with a clear error, e.g.:"; grep -h "renderer cannot" "$out"/*.error | head -1; }
n=$(find "$out" -name "*.out" | wc -l); errors=$(grep -L "renderer cannot" "$out"/*.error 2>/dev/null | wc -l)
if [ "$errors" -gt 0 ]; then echo "$errors kernels did not compile for CUDA, e.g.:"; grep -L "renderer cannot" "$out"/*.error | head -1 | xargs cat; exit 1; fi
[ "$n" -gt 100 ] || { echo "only $n kernels: the suite did not run?"; exit 1; }
bad=0
for f in "$out"/*.out; do
  ptxas -arch=sm_90 -o /dev/null "$f" 2>"$out/ptxas.log" || { bad=$((bad+1)); echo "ptxas failed on $f:"; head -5 "$out/ptxas.log"; }
done
echo "$n kernels compiled by NVRTC; ptxas -arch=sm_90 rejected $bad"
[ "$bad" -eq 0 ]
