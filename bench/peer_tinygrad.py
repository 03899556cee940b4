# Optional peer: tinygrad's CPU backend, if importable (set TINYGRAD_PATH to a checkout of
# tinygrad v0.10.3; its CPU backend needs `clang` on PATH). Same "name value unit" lines.
import time, statistics
from tinygrad import Tensor, Device

def median(n, f): return statistics.median(f() for _ in range(n))

N = 4194304
a, b = Tensor.rand(N).realize(), Tensor.rand(N).realize()
def w1():
  r = ((a + 1) * 2).relu() - b * 0.5
  t0 = time.perf_counter(); r.realize(); Device[Device.DEFAULT].synchronize(); return time.perf_counter() - t0
print(f"W1 {3*4*N/median(20, w1)*1e-9:.2f} GB/s")

x = Tensor.rand(16).realize()
def w6():
  t0 = time.perf_counter(); r = x
  for i in range(100): r = r * 1.001 if i % 2 else r + 0.5
  r.realize(); return time.perf_counter() - t0
print(f"W6 {median(20, w6)*1e3:.4f} ms")

m1, m2 = Tensor.rand(512, 512).realize(), Tensor.rand(512, 512).realize()
def mm():
  r = m1 @ m2
  t0 = time.perf_counter(); r.realize(); return time.perf_counter() - t0
print(f"M1 {2*512**3/median(5, mm)*1e-9:.2f} GFLOPS")
