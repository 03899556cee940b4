# Peer figures for bench/run.sh, printed as "name value unit" lines like bench_core.
# Run with Debian's /usr/bin/python3 (python3-torch, python3-numpy). Usage: peers.py THREADS
import os, sys, time, statistics

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(threads)  # before numpy/torch load OpenBLAS, which would use every core
import numpy as np
import torch

torch.set_num_threads(threads)
torch.manual_seed(0)

def median(n, f):
  return statistics.median(f() for _ in range(n))

N = 4194304
a, b = torch.rand(N), torch.rand(N)
def w1():
  t0 = time.perf_counter(); r = ((a + 1) * 2).relu() - b * 0.5; return time.perf_counter() - t0
print(f"W1 {3*4*N/median(20, w1)*1e-9:.2f} GB/s")

x = torch.rand(16)
def w6():
  t0 = time.perf_counter(); r = x
  for i in range(100): r = r * 1.001 if i % 2 else r + 0.5
  r.numpy(); return time.perf_counter() - t0
print(f"W6 {median(50, w6)*1e3:.4f} ms")

m1, m2 = torch.rand(512, 512), torch.rand(512, 512)
def mm():
  t0 = time.perf_counter(); r = m1 @ m2; return time.perf_counter() - t0
print(f"M1 {2*512**3/median(5, mm)*1e-9:.2f} GFLOPS")

n1, n2 = m1.numpy(), m2.numpy()
def npmm():
  t0 = time.perf_counter(); r = n1 @ n2; return time.perf_counter() - t0
print(f"B1 {2*512**3/median(5, npmm)*1e-9:.2f} GFLOPS")

q1, q2 = np.random.rand(1024, 1024).astype(np.float32), np.random.rand(1024, 1024).astype(np.float32)
def npmm1024():
  t0 = time.perf_counter(); r = q1 @ q2; return time.perf_counter() - t0
print(f"B2 {2*1024**3/median(5, npmm1024)*1e-9:.2f} GFLOPS")
