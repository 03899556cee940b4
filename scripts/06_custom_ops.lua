-- 06_custom_ops.lua: Project 6 of the guide. New ops written from primitives, and what fusion does
-- with them.
--   1. gelu (tanh form) from mul, add and exp: against Tensor.gelu and a plain-Lua reference
--   2. rms_norm from mul, mean, sqrt and a division: against nn.RMSNorm and plain Lua, and its
--      gradient (for x and the weight) against finite differences
--   3. swiglu, silu(x W1) * (x W3), with silu from exp: against the built-in silu and plain Lua
--   4. how many kernels each op is, and step-by-step realizes against one fused graph
-- A primitive op is one the engine has a rule for (engine/gradient.cpp): everything else,
-- these three included, is a composition the scheduler fuses. Every claim is asserted.
local lesson = require "lesson"
local section, same = lesson.section, lesson.same
Tensor.manual_seed(6)

-- tanh from exp alone: tanh(z) = 2 / (1 + e^(-2z)) - 1 (Lua 5.4 has no math.tanh)
local function tanh_lua(z) return 2 / (1 + math.exp(-2 * z)) - 1 end
local function tanh_t(z) return (z * -2):exp():add(1):reciprocal():mul(2):sub(1) end

-- A list of numbers as text, 4 decimals each.
local function fmt(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = ("%.4f"):format(v) end
  return table.concat(out, "  ")
end

-- The largest elementwise difference of two flat lists.
local function max_diff(a, b)
  local m = 0
  for i = 1, #a do m = math.max(m, math.abs(a[i] - b[i])) end
  return m
end

------------------------------------------------------------------------------
section("1. gelu from primitives: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))")

local function my_gelu(x)
  local inner = (x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)
  return x * 0.5 * (tanh_t(inner) + 1)
end
local xs = { -3.0, -1.0, -0.25, 0.0, 0.5, 1.0, 2.5, 4.0 }
local x = Tensor(xs)
local mine, builtin = my_gelu(x):tolist(), x:gelu():tolist()
local plain = {}
for i, v in ipairs(xs) do plain[i] = 0.5 * v * (1 + tanh_lua(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3))) end
print("x       " .. fmt(xs))
print("gelu(x) " .. fmt(mine))
print(("max |mine - Tensor.gelu| = %.2g, max |mine - plain Lua| = %.2g"):format(max_diff(mine, builtin),
  max_diff(mine, plain)))
same(mine, builtin, 1e-6)
same(mine, plain, 1e-6)
local grid = Tensor.linspace(-4, 4, 81)
lesson.plot("line", grid, { my_gelu(grid), grid:relu() }, { title = "my_gelu from primitives, and relu",
  labels = { "my_gelu(x)", "relu(x)" }, xlabel = "x" })

------------------------------------------------------------------------------
section("2. rms_norm from primitives: x / sqrt(mean(x^2) + eps) * weight")

local eps = 1e-6
local function my_rms_norm(x, w)
  local ms = (x * x):sum(-1, true) / x.shape[#x.shape] -- mean over the last axis
  return x / (ms + eps):sqrt() * w
end
local rows = { { 1.0, -2.0, 3.0, 0.5 }, { 0.1, 0.2, -0.3, 0.4 }, { 10.0, -10.0, 5.0, 0.0 } }
local ws = { 1.0, 0.5, 2.0, -1.0 }
local X, W = Tensor(rows), Tensor(ws)
local norm = nn.RMSNorm(4, { eps = eps })
norm.weight = W
local got, ref = my_rms_norm(X, W):tolist(), norm(X):tolist()
local plain_rms = {}
for r, row in ipairs(rows) do
  local ss = 0
  for _, v in ipairs(row) do ss = ss + v * v end
  local scale = 1 / math.sqrt(ss / #row + eps)
  plain_rms[r] = {}
  for c, v in ipairs(row) do plain_rms[r][c] = v * scale * ws[c] end
end
for r = 1, #rows do print(("row %d  %s  ->  %s"):format(r, fmt(rows[r]), fmt(got[r]))) end
same(got, ref, 1e-5)
same(got, plain_rms, 1e-5)
print("matches nn.RMSNorm and the plain-Lua loop (within 1e-5)")

-- d sum(rms_norm(x, w) * g) / dx and / dw, in float64, against central differences
local gs = { { 0.3, -1.0, 0.5, 2.0 }, { 1.0, 1.0, -0.5, 0.25 }, { -2.0, 0.1, 0.7, 1.5 } }
local G = Tensor(gs, "float64")
local xg = Tensor(rows, "float64"):requires_grad_()
local wg = Tensor(ws, "float64"):requires_grad_()
local function loss(x, w) return (my_rms_norm(x, w) * G):sum() end
loss(xg, wg):backward()
local function numeric(f, base, h)
  local out = {}
  for i = 1, #base do
    local up, down = { table.unpack(base) }, { table.unpack(base) }
    up[i], down[i] = base[i] + h, base[i] - h
    out[i] = (f(up) - f(down)) / (2 * h)
  end
  return out
end
local flat_rows = Tensor(rows, "float64"):flatten():tolist()
local num_x = numeric(function(v) return loss(Tensor(v, "float64"):reshape(3, 4), wg:detach()):item() end, flat_rows, 1e-6)
local num_w = numeric(function(v) return loss(Tensor(rows, "float64"), Tensor(v, "float64")):item() end, ws, 1e-6)
local dx, dw = xg.grad:flatten():tolist(), wg.grad:tolist()
print(("dL/dx: max |autograd - finite differences| = %.2g over %d entries"):format(max_diff(dx, num_x), #dx))
print(("dL/dw: max |autograd - finite differences| = %.2g over %d entries"):format(max_diff(dw, num_w), #dw))
same(dx, num_x, 1e-6)
same(dw, num_w, 1e-6)

------------------------------------------------------------------------------
section("3. swiglu: silu(x W1) * (x W3), silu(z) = z / (1 + e^-z)")

local function my_silu(z) return z / ((-z):exp() + 1) end
local function my_swiglu(x, w1, w3) return my_silu(x:matmul(w1)) * x:matmul(w3) end
local A, W1, W3 = Tensor.randn(3, 5), Tensor.randn(5, 4), Tensor.randn(5, 4)
local sw = my_swiglu(A, W1, W3):tolist()
local sw_builtin = (A:matmul(W1):silu() * A:matmul(W3)):tolist()
local a, w1, w3 = A:tolist(), W1:tolist(), W3:tolist()
local h1, h3 = lesson.matmul(a, w1), lesson.matmul(a, w3)
local sw_plain = {}
for i = 1, #h1 do
  sw_plain[i] = {}
  for j = 1, #h1[1] do sw_plain[i][j] = h1[i][j] / (1 + math.exp(-h1[i][j])) * h3[i][j] end
end
print(("swiglu of a 3x5 input with 5x4 weights, first row: %s"):format(fmt(sw[1])))
same(sw, sw_builtin, 1e-5)
same(sw, sw_plain, 1e-4)
print("matches the built-in silu and plain Lua")

------------------------------------------------------------------------------
section("4. Kernels: each op fused, and step by step")

-- Fresh inputs each time, so nothing is cached from a run before.
local function inputs()
  local t = Tensor.randn(256, 512)
  t:realize()
  return t
end
local function kernels(name, f)
  local t = inputs()
  local n = lesson.count_kernels(function() f(t):realize() end)
  print(("%-10s %d kernel%s"):format(name, n, n == 1 and "" or "s"))
  return n
end
local wide = Tensor.ones(512)
wide:realize()
local n_gelu = kernels("gelu", my_gelu)
local n_rms = kernels("rms_norm", function(t) return my_rms_norm(t, wide) end)
assert(n_gelu == 1, "gelu is elementwise: one kernel")
assert(n_rms <= 2, "rms_norm: the mean, then the scaling (at most 2 kernels)")

-- The same gelu with every intermediate realized: one kernel per primitive op, each writing its
-- result to memory and the next reading it back.
local function stepwise_gelu(t)
  local function r(v) return v:realize() end
  local cube = r(r(t * t) * t)
  local inner = r(r(r(t + r(cube * 0.044715)) * math.sqrt(2 / math.pi)))
  local th = r(r(r(r(r(r(inner * -2):exp()):add(1)):reciprocal()):mul(2)):sub(1))
  return r(r(t * 0.5) * r(th + 1))
end
local function timed(f)
  local t = inputs()
  f(t):realize() -- compiles
  t = inputs()
  local t0 = show.clock()
  local n = lesson.count_kernels(function() f(t):realize() end)
  return n, (show.clock() - t0) * 1e3
end
local n_step, ms_step = timed(stepwise_gelu)
local n_fused, ms_fused = timed(my_gelu)
print(("gelu on 256x512, step by step: %2d kernels, %.3f ms"):format(n_step, ms_step))
print(("gelu on 256x512, one graph:    %2d kernel,  %.3f ms"):format(n_fused, ms_fused))
same(stepwise_gelu(x):tolist(), my_gelu(x):tolist(), 1e-6)
assert(n_fused == 1 and n_step >= 12, "fusion makes the dozen primitive ops one kernel")
print("the values are the same; fusion turned " .. n_step .. " kernels into 1 (times vary by machine)")
