"""PyTorch's DistributedDataParallel (gloo backend) on the MNIST CNN of bench/mnist_step.py,
batch 512 in all, split over the processes, one thread each: the peer of bench/dist_step.lua.
usage: /usr/bin/python3 bench/dist_step.py PROCESSES   (prints "P1 <ms> ms" from rank 0)"""
import os, sys, time
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "1"
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

def run(rank, world):
  os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29517"
  dist.init_process_group("gloo", rank=rank, world_size=world)
  torch.set_num_threads(1)
  torch.manual_seed(0)
  model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
                        nn.Conv2d(32, 64, 5), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(64 * 4 * 4, 10))
  ddp = nn.parallel.DistributedDataParallel(model)
  opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
  bs, times = 512 // world, []
  for i in range(10):
    x, y = torch.rand(bs, 1, 28, 28), torch.randint(0, 10, (bs,))
    dist.barrier()
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = nn.functional.cross_entropy(ddp(x), y)
    loss.backward()
    opt.step()
    loss.item()
    dist.barrier()
    if i > 2: times.append(time.perf_counter() - t0)
  if rank == 0:
    times.sort()
    print(f"P1 {times[len(times) // 2] * 1e3:.3f} ms")
  dist.destroy_process_group()

if __name__ == "__main__":
  world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
  mp.spawn(run, args=(world,), nprocs=world)
