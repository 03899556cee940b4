"""T1 for PyTorch: the same CNN and step as bench/mnist_step.lua, batch 512, N threads.
usage: /usr/bin/python3 bench/mnist_step.py THREADS [BATCH [DEVICE]]   (DEVICE: cpu, or cuda on a GPU machine)"""
import os, sys, time
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(int(sys.argv[1]))  # before numpy/torch load OpenBLAS, which would use every core
import torch
import torch.nn as nn
torch.set_num_threads(int(sys.argv[1]))
bs = int(sys.argv[2]) if len(sys.argv) > 2 else 512
dev = sys.argv[3] if len(sys.argv) > 3 else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 5), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(64 * 4 * 4, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model.train()
times = []
for i in range(8):
  x, y = torch.rand(bs, 1, 28, 28, device=dev), torch.randint(0, 10, (bs,), device=dev)
  t0 = time.perf_counter()
  opt.zero_grad()
  loss = nn.functional.cross_entropy(model(x), y)
  loss.backward()
  opt.step()
  loss.item()  # waits for the GPU
  if i > 2: times.append(time.perf_counter() - t0)
times.sort()
print(f"T1 {times[len(times) // 2] * 1e3:.3f} ms")
