#!/usr/bin/env bash
# Data parallelism on this machine, in one run: the MNIST step (batch 512 in all) as 1 process x
# 2 threads and as 2 processes x 1 thread over MPI, beside PyTorch's DistributedDataParallel (gloo)
# at 2 processes x 1 thread, and as 1 process with the batch sharded over CPU:0 and CPU:1 (a lane
# of 1 thread each); and dist.all_reduce of 4 MiB (plain, and replayed by TinyJit as in the step)
# beside MPI_Allreduce called directly.
#   bench/dist.sh        (after ./setup.sh; needs mpirun and Debian's python3-torch)
set -euo pipefail
cd "$(dirname "$0")/.."
MG=${MG:-build/moongrad}
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2 -x MG_THREADS=1 -x OMPI_MCA_mpi_yield_when_idle=1)
mpicc -O2 -o build/allreduce_raw bench/allreduce_raw.c
one=$(MG_THREADS=2 "$MG" bench/dist_step.lua)
two=$("${mpi[@]}" "$MG" bench/dist_step.lua)
torch=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/dist_step.py 2 2>/dev/null)
raw=$("${mpi[@]}" build/allreduce_raw)
/usr/bin/python3 - "$one" "$two" "$torch" "$raw" <<'PY'
import sys
def val(text, key): return float(next(l.split()[1] for l in text.splitlines() if l.startswith(key + " ")))
one, two, torch, raw = sys.argv[1:5]
d1, d2, p2, s1 = val(one, "D1"), val(two, "D1"), val(torch, "P1"), val(one, "S1")
print(f"{'MNIST step, batch 512 in all':44} {'ms':>9}")
print(f"{'  moongrad, 1 process x 2 threads':44} {d1:9.1f}")
print(f"{'  moongrad, 2 processes x 1 thread (MPI)':44} {d2:9.1f}   {d1 / d2:.2f}x the 1-process step")
print(f"{'  PyTorch DDP (gloo), 2 processes x 1 thread':44} {p2:9.1f}   moongrad {p2 / d2:.2f}x PyTorch's speed")
print(f"{'  moongrad, 1 process, batch sharded on CPU:0, CPU:1':44} {s1:9.1f}   {d1 / s1:.2f}x the 1-process step")
a, j, r = val(two, "A1"), val(two, "A2"), val(raw, "R1")
print(f"all-reduce of 4 MiB float32, 2 ranks: MPI_Allreduce {r:.2f} GB/s; dist.all_reduce {a:.2f} GB/s ({a / r:.2f}x),"
      f" under TinyJit {j:.2f} GB/s ({j / r:.2f}x)")
PY
