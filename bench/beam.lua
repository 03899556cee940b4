-- BEAM against the hand-coded opts, for bench/run.sh: run with BEAM=2 and an empty cache.
-- Prints "name value unit" lines: the search time of each workload's first realize (S*), then the
-- workload's speed with the opts found (V*, the same workloads as U5-U7 in bench/user.lua).
local function median(n, f)
  local t = {}
  for i = 1, n do
    local t0 = show.clock()
    f(i)
    t[i] = show.clock() - t0
  end
  table.sort(t)
  return t[(n + 1) // 2]
end
local function timed(f) local t0 = show.clock(); f(); return show.clock() - t0 end

for key, n in pairs({ V6 = 1024, V7 = 256 }) do
  local a, b = Tensor.rand(n, n):realize(), Tensor.rand(n, n):realize()
  print(("S%s %.2f s"):format(key:sub(2), timed(function() a:matmul(b):realize() end)))
  local t = median(n == 1024 and 5 or 20, function() a:matmul(b):realize() end)
  print(("%s %.2f GFLOPS"):format(key, 2 * n ^ 3 / t * 1e-9))
end

local img = Tensor.rand(64, 1, 28, 28):realize()
local w1 = (Tensor.rand(32, 1, 3, 3) - 0.5):realize():requires_grad_()
local w2 = (Tensor.rand(64, 32, 3, 3) - 0.5):realize():requires_grad_()
local function convs()
  w1.grad, w2.grad = nil, nil
  local loss = img:conv2d(w1):relu():conv2d(w2):relu():sum()
  loss:backward()
  Tensor.realize_all { w1.grad, w2.grad }
end
print(("S5 %.2f s"):format(timed(convs)))
print(("V5 %.2f ms"):format(median(5, convs) * 1e3))
