-- The workloads of issue 10 written as a user writes them at the prompt or in a script: plain
-- Lua loops, no collectgarbage(), no TinyJit. Prints "KEY value unit" lines for bench/run.sh;
-- bench/user.py times the same work in PyTorch. Medians after warm-up.
local function median(n, f) -- f may return the seconds to count (leaving out its own set-up)
  local ts = {}
  for i = 1, n + 2 do
    local t0 = show.clock()
    local own = f()
    if i > 2 then ts[#ts + 1] = type(own) == "number" and own or show.clock() - t0 end
  end
  table.sort(ts)
  return ts[(#ts + 1) // 2]
end
Tensor.manual_seed(0)

-- U1: elementwise, 4M float32, a new result each time (2 reads + 1 write)
local N = 4194304
local a, b = Tensor.rand(N):realize(), Tensor.rand(N):realize()
local u1 = median(30, function() (((a + 1) * 2):relu() - b * 0.5):realize() end)
print(("U1 %.2f GB/s"):format(3 * 4 * N / u1 * 1e-9))
-- U0: the same with collectgarbage() before each call (the figure U1 should come close to)
local u0 = median(30, function()
  collectgarbage()
  local t0 = show.clock()
  local _ = (((a + 1) * 2):relu() - b * 0.5):realize()
  return show.clock() - t0
end)
print(("U0 %.2f GB/s"):format(3 * 4 * N / u0 * 1e-9))

-- U2: a 100-op chain (+1, *0.5, relu, -0.25) on 16 elements, built and realized each time
local x = Tensor.rand(16):realize()
print(("U2 %.4f ms"):format(median(30, function()
  local y = x
  for _ = 1, 25 do y = ((y + 1) * 0.5):relu() - 0.25 end
  y:realize()
end) * 1e3))

-- U3: sum of 16M float32
local s = Tensor.rand(16 * 1024 * 1024):realize()
print(("U3 %.3f ms"):format(median(20, function() s:sum():realize() end) * 1e3))

-- U4: softmax over the last axis of 4096x1024
local sm = Tensor.rand(4096, 1024):realize()
print(("U4 %.3f ms"):format(median(10, function() sm:softmax(-1):realize() end) * 1e3))

-- U5: two convolutions forward and backward: 64x1x28x28 input, 32 and 64 3x3 filters. New
-- images and weights (written in place, as an optimizer does) before each timed step: the same
-- graph on the same buffers would read values the last step's realize left cached.
local img = Tensor.rand(64, 1, 28, 28):realize()
local w1 = (Tensor.rand(32, 1, 3, 3) - 0.5):realize():requires_grad_()
local w2 = (Tensor.rand(64, 32, 3, 3) - 0.5):realize():requires_grad_()
print(("U5 %.2f ms"):format(median(5, function()
  img = Tensor.rand(64, 1, 28, 28):realize()
  w1:assign(Tensor.rand(32, 1, 3, 3) - 0.5):realize()
  w2:assign(Tensor.rand(64, 32, 3, 3) - 0.5):realize()
  w1.grad, w2.grad = nil, nil
  local t0 = show.clock()
  local loss = img:conv2d(w1):relu():conv2d(w2):relu():sum()
  loss:backward()
  Tensor.realize_all { w1.grad, w2.grad }
  return show.clock() - t0
end) * 1e3))

-- U6, U7: matmul 1024 and 256
for key, n in pairs({ U6 = 1024, U7 = 256 }) do
  local m1, m2 = Tensor.rand(n, n):realize(), Tensor.rand(n, n):realize()
  local t = median(n == 1024 and 5 or 20, function() m1:matmul(m2):realize() end)
  print(("%s %.2f GFLOPS"):format(key, 2 * n ^ 3 / t * 1e-9))
end

-- U8: a kernel never seen before (a constant unique to this run), compiled and run
local c = (os.time() % 100000) + 0.123
local r64 = Tensor.rand(64):realize()
local t0 = show.clock()
local _ = ((r64 * c) + c):realize()
print(("U8 %.1f ms"):format((show.clock() - t0) * 1e3))
