-- The kernels of bench/user.lua's U5 (two convolutions forward and backward, 64x1x28x28, 32 and
-- 64 3x3 filters), each with its minimum over N steps (new images and weights each step, as U5),
-- and the sum of those minimums: on a shared machine one step's figures vary by more than a
-- change does, and a kernel's fastest run is the steadiest figure of it. With any third argument,
-- the kernels one by one, the costliest first, with their GB/s and share of the machine's limit.
--   MG_THREADS=1 build/moongrad bench/u5_kernels.lua [N] [LABEL] [list]
local img = Tensor.rand(64, 1, 28, 28):realize()
local w1 = (Tensor.rand(32, 1, 3, 3) - 0.5):realize():requires_grad_()
local w2 = (Tensor.rand(64, 32, 3, 3) - 0.5):realize():requires_grad_()
local function step()
  img = Tensor.rand(64, 1, 28, 28):realize()
  w1:assign(Tensor.rand(32, 1, 3, 3) - 0.5):realize()
  w2:assign(Tensor.rand(64, 32, 3, 3) - 0.5):realize()
  w1.grad, w2.grad = nil, nil
  local loss = img:conv2d(w1):relu():conv2d(w2):relu():sum()
  loss:backward()
  Tensor.realize_all { w1.grad, w2.grad }
end
step(); step() -- compiles and warm-up
local best, order = {}, {}
for _ = 1, tonumber(arg[1]) or 6 do
  for i, k in ipairs(show.kernel_log(step)) do
    local key = i .. " " .. k.name
    if not best[key] then
      best[key] = k
      order[#order + 1] = key
    elseif k.seconds < best[key].seconds then
      best[key] = k
    end
  end
end
local total = 0
for _, key in ipairs(order) do total = total + best[key].seconds end
print(("%s sum of per-kernel minimums: %.2f ms (%d kernels)"):format(arg[2] or "U5", total * 1e3, #order))
if arg[3] then
  table.sort(order, function(a, b) return best[a].seconds > best[b].seconds end)
  for _, key in ipairs(order) do
    local k = best[key]
    print(("  %-34s %-26s %7.3f ms %6.1f GB/s  %s"):format(key, "(" .. table.concat(k.shape, ", ") .. ")",
      k.seconds * 1e3, k.bytes / k.seconds * 1e-9, k.limit or ""))
  end
end
