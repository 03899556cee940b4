-- D1, D2: elementwise 4M (a*b+c, float32) and matmul 512 (float32) on every device that runs
-- here, beside the CPU device, in one process. Each figure is the median of 7 timed runs after
-- two warm-up runs (which compile); inputs are made on the device, results read back once.
-- Prints: name device milliseconds
local names, why = Device.names()
local function median(t) table.sort(t); return t[(#t + 1) // 2] end
local function time(fn)
  fn(); fn()
  local ts = {}
  for i = 1, 7 do
    local t0 = show.clock()
    fn()
    ts[i] = show.clock() - t0
  end
  return median(ts) * 1e3
end
for _, dev in ipairs({ "CPU", "LLVM", "CL", "VULKAN", "CUDA" }) do
  local present = false
  for _, n in ipairs(names) do present = present or n == dev end
  if not present then
  elseif why[dev] then
    print(("# %s skipped: %s"):format(dev, why[dev]))
  else
    Tensor.manual_seed(1)
    local a, b, c = Tensor.rand(4194304, { device = dev }), Tensor.rand(4194304, { device = dev }),
        Tensor.rand(4194304, { device = dev })
    -- a GPU's kernels are queued: each timed run waits for its own
    print(("D1_elementwise_4M %s %.3f"):format(dev, time(function() (a * b + c):realize(); Device.synchronize(dev) end)))
    local x, y = Tensor.rand(512, 512, { device = dev }), Tensor.rand(512, 512, { device = dev })
    print(("D2_matmul_512 %s %.3f"):format(dev, time(function() x:matmul(y):realize(); Device.synchronize(dev) end)))
  end
end
