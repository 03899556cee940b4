-- T1: one training step of scripts/04_mnist.lua's CNN at batch 512 (forward, backward, Adam),
-- under TinyJit, median of 5 steps after warm-up. Prints "T1 <ms> ms" for bench/run.sh.
-- Random inputs: the time does not depend on the values.
local mnist = dofile((arg[0]:match("^(.*/)") or "") .. "../scripts/mnist_model.lua")
Tensor.manual_seed(0)
local model = mnist.model()
local opt = optim.Adam(state.get_parameters(model), { lr = 1e-3 })
local step = mnist.train_step(model, opt)
Tensor.training = true
local bs = tonumber(arg[1]) or 512
local times = {}
for i = 1, 8 do
  local x = Tensor.rand(bs, 1, 28, 28):realize()
  local y = (Tensor.rand(bs) * 10):cast("int32"):realize()
  local t0 = show.clock()
  step(x, y):item()
  if i > 3 then times[#times + 1] = show.clock() - t0 end
end
table.sort(times)
print(("T1 %.3f ms"):format(times[(#times + 1) // 2] * 1e3))
