# How many kernels tinygrad runs for one training step of the MNIST CNN that moongrad trains
# (scripts/mnist_model.lua), on tinygrad's CPU backend (C compiled with clang), batch 512, to set
# beside bench/mnist_kernels.lua. A plain eager step, not under TinyJit: the fourth, after three
# warm-up steps. Prints the count, then each kernel's name in the order it ran.
# tinygrad is not a Debian package, so CI does not run this. Run it with a tinygrad checkout:
#   PYTHONPATH=/path/to/tinygrad /usr/bin/python3 bench/tinygrad_mnist_kernels.py
# (written against tinygrad a9069c17; on releases that still use CLANG=1 set that instead of DEV.)
import contextlib, io, os, re, sys
os.environ.setdefault("DEV", "CPU")
from tinygrad import Tensor, nn, GlobalCounters, Context, Device

Tensor.manual_seed(0)
layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,   # 28 -> 24 -> 12
          nn.Conv2d(32, 64, 5), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,  # 12 -> 8 -> 4
          lambda x: x.flatten(1), nn.Linear(64 * 4 * 4, 10)]
# all of get_parameters: 10 trained tensors, plus BatchNorm's running stats, which Adam realizes too
opt = nn.optim.Adam(nn.state.get_parameters(layers), lr=1e-3)

def step(x, y):
  with Context(TRAINING=1):
    opt.zero_grad()
    loss = x.sequential(layers).sparse_categorical_crossentropy(y).backward()
    loss.realize(*opt.schedule_step())  # loss with the update, as moongrad's opt:step(loss)
  return loss.item()

def batch():
  return Tensor.rand(512, 1, 28, 28).realize(), (Tensor.rand(512) * 10).cast("int32").realize()

for _ in range(3): step(*batch())
x, y = batch()
GlobalCounters.reset()
out = io.StringIO()
with contextlib.redirect_stdout(out), Context(DEBUG=2): step(x, y)
count = GlobalCounters.kernel_count

# DEBUG=2 prints one "*** DEVICE  n  name  arg ..." line per kernel; drop colours, keep the name
lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in out.getvalue().splitlines()]
names = [m.group(1).strip() for l in lines if (m := re.match(r"\*\*\* \S+\s+\d+ (.*?)\s+arg\s+\d+", l))]
copies = [n for n in names if n.startswith("copy")]
print(f"tinygrad on {Device.DEFAULT}: one training step runs {count} kernels "
      f"({len(names) - len(copies)} compiled, {len(copies)} copies)")
for i, n in enumerate(names, 1): print(f"  {i:3d} {n}")
if len(names) != count: print(f"note: {len(names)} DEBUG=2 lines for {count} counted kernels", file=sys.stderr)
