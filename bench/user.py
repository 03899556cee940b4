# PyTorch's figures for bench/user.lua's workloads, as "KEY value unit" lines.
# Run with Debian's /usr/bin/python3. Usage: user.py THREADS
import os, sys, time, statistics

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(threads)  # before numpy/torch load OpenBLAS, which would use every core
import torch

torch.set_num_threads(threads)
torch.manual_seed(0)

def median(n, f): # f may return the seconds to count (leaving out its own set-up)
  ts = []
  for i in range(n + 2):
    t0 = time.perf_counter(); own = f(); t = time.perf_counter() - t0
    if i >= 2: ts.append(own if isinstance(own, float) else t)
  return statistics.median(ts)

N = 4194304
a, b = torch.rand(N), torch.rand(N)
print(f"U1 {3*4*N/median(30, lambda: ((a + 1) * 2).relu() - b * 0.5)*1e-9:.2f} GB/s")

x = torch.rand(16)
def u2():
  y = x
  for _ in range(25): y = ((y + 1) * 0.5).relu() - 0.25
print(f"U2 {median(30, u2)*1e3:.4f} ms")

s = torch.rand(16 * 1024 * 1024)
print(f"U3 {median(20, lambda: s.sum())*1e3:.3f} ms")
sm = torch.rand(4096, 1024)
print(f"U4 {median(10, lambda: sm.softmax(-1))*1e3:.3f} ms")

img = torch.rand(64, 1, 28, 28)
w1 = (torch.rand(32, 1, 3, 3) - 0.5).requires_grad_()
w2 = (torch.rand(64, 32, 3, 3) - 0.5).requires_grad_()
def u5(): # new images and weights before each timed step, as bench/user.lua
  global img
  img = torch.rand(64, 1, 28, 28)
  with torch.no_grad():
    w1.copy_(torch.rand(32, 1, 3, 3) - 0.5)
    w2.copy_(torch.rand(64, 32, 3, 3) - 0.5)
  w1.grad = w2.grad = None
  t0 = time.perf_counter()
  torch.conv2d(torch.conv2d(img, w1).relu(), w2).relu().sum().backward()
  return time.perf_counter() - t0
print(f"U5 {median(5, u5)*1e3:.2f} ms")

for key, n in (("U6", 1024), ("U7", 256)):
  m1, m2 = torch.rand(n, n), torch.rand(n, n)
  print(f"{key} {2*n**3/median(5 if n == 1024 else 20, lambda: m1 @ m2)*1e-9:.2f} GFLOPS")
