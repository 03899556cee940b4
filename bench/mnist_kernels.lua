-- The kernels of one training step of scripts/04_mnist.lua's CNN at batch 512, each with its time,
-- GFLOPS, GB/s and share of the machine's limit (the roofline), the costliest first: where the
-- step spends, and how far each kernel is from what the machine can do. A plain step, not under
-- TinyJit (whose replays print no per-kernel lines); the fourth step, after compiles and warm-up.
--   MG_THREADS=1 build/moongrad bench/mnist_kernels.lua [N]   (N: how many kernels to list, 20)
local mnist = dofile((arg[0]:match("^(.*/)") or "") .. "../scripts/mnist_model.lua")
Tensor.manual_seed(0)
local model = mnist.model()
local opt = optim.Adam(state.get_parameters(model), { lr = 1e-3 })
Tensor.training = true
local function step(x, y)
  local loss = model(x):sparse_categorical_crossentropy(y)
  loss:backward()
  opt:step(loss)
  return loss:item()
end
local log
for i = 1, 4 do
  local x = Tensor.rand(512, 1, 28, 28):realize()
  local y = (Tensor.rand(512) * 10):cast("int32"):realize()
  if i < 4 then step(x, y) else log = show.kernel_log(step, x, y) end
end
local total = 0
for _, k in ipairs(log) do total = total + k.seconds end
table.sort(log, function(a, b) return a.seconds > b.seconds end)
print(("one step: %d kernels, %.1f ms in them; the costliest:"):format(#log, total * 1e3))
for i = 1, math.min(tonumber(arg[1]) or 20, #log) do
  local k = log[i]
  print(("  %-30s %-26s %8.2f ms %5.1f%% %7.1f GFLOPS %6.1f GB/s  %s"):format(k.name,
    "(" .. table.concat(k.shape, ", ") .. ")", k.seconds * 1e3, 100 * k.seconds / total,
    k.flops / k.seconds * 1e-9, k.bytes / k.seconds * 1e-9,
    k.limit or ""))
end
