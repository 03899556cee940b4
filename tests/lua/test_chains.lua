-- Graph walks are linear in the number of distinct nodes. Each chain below reuses its nodes
-- (relu is where(x > 0, x, 0), so it reads x twice; x*x; where), which a walk without a visited
-- set follows once per path: 2^n paths. Scheduling and building the gradient of several thousand
-- ops must finish quickly; CMake gives this test a short timeout, so a regression fails it.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local N = 4000

local function chains(x)
  local relu, sq, wh = x, x, x
  for _ = 1, N // 4 do relu = ((relu + 1) * 0.5):relu() - 0.25 end
  for _ = 1, N // 2 do sq = (sq * sq) * 0.5 + sq end
  for _ = 1, N // 3 do wh = wh:gt(0):where(wh * 0.5, wh) + 0.125 end
  return { relu = relu, sq = sq, where = wh }
end

H.test("schedules of 4,000-op chains with shared inputs are one kernel each", function()
  local x = Tensor.rand(16):realize()
  for name, y in pairs(chains(x)) do
    local s = y:schedule()
    assert(#s == 1, ("%s: %d kernels"):format(name, #s))
  end
end)

H.test("the gradient of a 4,000-op chain builds and schedules", function()
  local x = Tensor.rand(16):realize():requires_grad_()
  local y = chains(x).relu
  local g = Tensor.gradient(y:sum(), { x })[1]
  assert(#g:schedule() >= 1)
end)

H.test("a shared chain realizes to the value a plain-Lua loop computes", function()
  local x = Tensor { 0.5, -1.5, 2.0 }
  local y = x
  for _ = 1, 300 do y = ((y + 1) * 0.5):relu() - 0.25 end
  local want = {}
  for i, v in ipairs({ 0.5, -1.5, 2.0 }) do
    for _ = 1, 300 do v = math.max((v + 1) * 0.5, 0) - 0.25 end
    want[i] = v
  end
  H.same(y:tolist(), want, 1e-5)
end)

H.done()
