-- BEAM against the hand-coded opts, for bench/run.sh: run with BEAM=2 and an empty cache.
-- Prints "name value unit" lines: the search time of each workload's first realize (S*), then the
-- workload's speed with the opts found (V*, the same workloads as U5-U7 in bench/user.lua) and
-- with the hand-coded opts (H*), timed in turns in this one process: on a shared machine, two
-- figures from different moments differ by more than the opts do.
-- f's seconds, or those f returns (leaving out its own set-up)
local function timed(f)
  local t0 = show.clock()
  local own = f()
  return type(own) == "number" and own or show.clock() - t0
end

-- median seconds of f with BEAM's opts and with the hand-coded ones, run in turns
local function both(n, f)
  f(); Context({ BEAM = 0 }, f) -- the hand-coded kernels compiled before timing
  local tb, th = {}, {}
  for i = 1, n do
    tb[i] = timed(f)
    th[i] = timed(function() return Context({ BEAM = 0 }, f) end)
  end
  table.sort(tb); table.sort(th)
  return tb[(n + 1) // 2], th[(n + 1) // 2]
end

for key, n in pairs({ ["6"] = 1024, ["7"] = 256 }) do
  local a, b = Tensor.rand(n, n):realize(), Tensor.rand(n, n):realize()
  print(("S%s %.2f s"):format(key, timed(function() a:matmul(b):realize() end)))
  local tb, th = both(n == 1024 and 7 or 21, function() a:matmul(b):realize() end)
  print(("V%s %.2f GFLOPS"):format(key, 2 * n ^ 3 / tb * 1e-9))
  print(("H%s %.2f GFLOPS"):format(key, 2 * n ^ 3 / th * 1e-9))
end

local img = Tensor.rand(64, 1, 28, 28):realize()
local w1 = (Tensor.rand(32, 1, 3, 3) - 0.5):realize():requires_grad_()
local w2 = (Tensor.rand(64, 32, 3, 3) - 0.5):realize():requires_grad_()
-- new images and weights (written in place) before each timed step, as bench/user.lua's U5: the
-- same graph on unchanged buffers would read the forward's values cached by the step before
local function convs()
  img = Tensor.rand(64, 1, 28, 28):realize()
  w1:assign(Tensor.rand(32, 1, 3, 3) - 0.5):realize()
  w2:assign(Tensor.rand(64, 32, 3, 3) - 0.5):realize()
  w1.grad, w2.grad = nil, nil
  local t0 = show.clock()
  local loss = img:conv2d(w1):relu():conv2d(w2):relu():sum()
  loss:backward()
  Tensor.realize_all { w1.grad, w2.grad }
  return show.clock() - t0
end
print(("S5 %.2f s"):format(timed(convs)))
local tb, th = both(5, convs)
print(("V5 %.2f ms"):format(tb * 1e3))
print(("H5 %.2f ms"):format(th * 1e3))
