-- The MNIST CNN's training step (scripts/mnist_model.lua, batch 512 in all) data parallel over
-- the ranks: each rank takes 512 / world_size images, the gradients are averaged (dist's
-- DataParallel), then Adam steps, under TinyJit as bench/mnist_step.lua (the all-reduce is a step
-- of the capture). Then the all-reduce of a 4 MiB float32 tensor. Rank 0 prints, for bench/dist.sh:
--   D1 <ms> ms          median step (of 7, after 3 warm-up)
--   S1 <ms> ms          one process only: the same step with the batch sharded over CPU:0 and
--                       CPU:1 (x:shard; the gradients meet through copies in the graph)
--   A1 <GB/s> GB/s      dist.all_reduce of 4 MiB (bytes / time, median of 20): a new result each
--                       call, whose buffer the last-but-one call's result gives back (a minor
--                       collection, interp/lua_state.cpp)
--   A2 <GB/s> GB/s      the same under TinyJit, as in the step: the replay reuses its result's buffer
--   mpirun -np 2 -x MG_THREADS=1 build/moongrad bench/dist_step.lua     (or without mpirun)
local mnist = dofile((arg[0]:match("^(.*/)") or "") .. "../scripts/mnist_model.lua")
dist.init()
Tensor.manual_seed(0)
local model = mnist.model()
local ddp = dist.DataParallel(model)
local opt = optim.Adam(ddp.params, { lr = 1e-3 })
Tensor.training = true
local bs = 512 // dist.world_size
local function median(t) table.sort(t); return t[(#t + 1) // 2] end
local step = TinyJit(function(x, y)
  local loss = ddp(x):sparse_categorical_crossentropy(y)
  loss:backward()
  ddp:sync()
  opt:step(loss)
  return loss
end)
local times = {}
for i = 1, 10 do
  local x = Tensor.rand(bs, 1, 28, 28):realize()
  local y = (Tensor.rand(bs) * 10):cast("int32"):realize()
  dist.barrier()
  local t0 = show.clock()
  step(x, y):item()
  dist.barrier()
  if i > 3 then times[#times + 1] = show.clock() - t0 end
end
local sharded
if dist.world_size == 1 then
  local devs, st = { "CPU:0", "CPU:1" }, {}
  local sharded_step = TinyJit(function(x, y)
    local loss = model(x):sparse_categorical_crossentropy(y)
    loss:backward()
    opt:step(loss)
    return loss
  end)
  for i = 1, 10 do
    local x = Tensor.rand(512, 1, 28, 28):realize():shard(devs, { axis = 0 })
    local y = (Tensor.rand(512) * 10):cast("int32"):realize():shard(devs, { axis = 0 })
    local t0 = show.clock()
    sharded_step(x, y):item()
    if i > 3 then st[#st + 1] = show.clock() - t0 end
  end
  sharded = median(st)
end
local t = Tensor.rand(1 << 20):realize()
local function time_all_reduce(f)
  local ar = {}
  for i = 1, 23 do
    dist.barrier()
    local t0 = show.clock()
    f(t):realize()
    if i > 3 then ar[#ar + 1] = show.clock() - t0 end
  end
  return median(ar)
end
local plain = time_all_reduce(dist.all_reduce)
local jitted = time_all_reduce(TinyJit(function(x) return dist.all_reduce(x) end))
if dist.rank == 0 then
  print(("D1 %.3f ms"):format(median(times) * 1e3))
  if sharded then print(("S1 %.3f ms"):format(sharded * 1e3)) end
  print(("A1 %.3f GB/s"):format(4 * (1 << 20) / plain * 1e-9))
  print(("A2 %.3f GB/s"):format(4 * (1 << 20) / jitted * 1e-9))
end
