-- 03_autograd.lua: Project 3 of the guide. Reverse-mode autodiff, checked three ways.
--   1. gradients of pow, mul and sigmoid against their analytic forms and finite differences
--   2. a 2-layer MLP trained on XOR until its loss is below 0.01
--   3. how backward works here: each primitive op has one rule (engine/gradient.cpp), and the
--      gradient is just another lazy graph, fused and scheduled like the forward
--   4. a Huber loss written from primitives, its gradient checked numerically
-- Every claim is asserted.
local lesson = require "lesson"
local section, same = lesson.section, lesson.same
Tensor.manual_seed(3)

-- Central differences of a scalar function of one tensor, element by element (float64).
local function numeric_grad(f, x, eps)
  eps = eps or 1e-6
  local base = x:tolist()
  local out = {}
  for i = 1, #base do
    local function at(d)
      local v = { table.unpack(base) }
      v[i] = v[i] + d
      return f(Tensor(v, "float64")):item()
    end
    out[i] = (at(eps) - at(-eps)) / (2 * eps)
  end
  return out
end

------------------------------------------------------------------------------
section("1. Gradients against their analytic forms and finite differences")

local xs = { -1.5, -0.2, 0.7, 2.0 }
local ws = { 0.5, -1.0, 3.0, 0.25 }
local x = Tensor(xs, "float64"):requires_grad_()
local w = Tensor(ws, "float64"):requires_grad_()

-- y = sum(x^2): dy/dx = 2x
x:pow(2):sum():backward()
local want = {}
for i, v in ipairs(xs) do want[i] = 2 * v end
print("d sum(x^2)/dx      = " .. table.concat(x.grad:tolist(), ", ") .. "   (2x)")
same(x.grad:tolist(), want, 1e-9)
same(x.grad:tolist(), numeric_grad(function(t) return t:pow(2):sum() end, x), 1e-6)
x.grad = nil;

-- y = sum(x * w): dy/dw = x (and dy/dx = w)
(x * w):sum():backward()
print("d sum(x*w)/dw      = " .. table.concat(w.grad:tolist(), ", ") .. "   (x)")
same(w.grad:tolist(), xs, 1e-12)
same(x.grad:tolist(), ws, 1e-12)
same(w.grad:tolist(), numeric_grad(function(t) return (x:detach() * t):sum() end, w), 1e-6)
x.grad, w.grad = nil, nil

-- y = sigmoid(x): dy/dx = sigmoid(x) * (1 - sigmoid(x))
x:sigmoid():sum():backward()
want = {}
for i, v in ipairs(xs) do
  local s = 1 / (1 + math.exp(-v))
  want[i] = s * (1 - s)
end
print("d sigmoid(x)/dx    = " .. table.concat(x.grad:tolist(), ", ") .. "   (s(1-s))")
same(x.grad:tolist(), want, 1e-9)
same(x.grad:tolist(), numeric_grad(function(t) return t:sigmoid():sum() end, x), 1e-6)
local grid = {}
for i = -60, 60 do grid[#grid + 1] = i / 10 end
local g = Tensor(grid):requires_grad_()
g:sigmoid():sum():backward()
lesson.plot("line", grid, { g:sigmoid(), g.grad }, { title = "sigmoid and the gradient backward() computes",
  labels = { "sigmoid(x)", "d sigmoid(x)/dx" }, xlabel = "x" })

------------------------------------------------------------------------------
section("2. A 2-layer MLP learns XOR")

-- 10 samples: the four corners of XOR, repeated, with a little noise on the inputs
local pts, labels = {}, {}
local corners = { { 0, 0, 0 }, { 0, 1, 1 }, { 1, 0, 1 }, { 1, 1, 0 } }
for i = 1, 10 do
  local c = corners[(i - 1) % 4 + 1]
  pts[i] = { c[1] + (i > 4 and 0.05 * ((i % 3) - 1) or 0), c[2] + (i > 4 and 0.05 * ((i % 2) * 2 - 1) or 0) }
  labels[i] = { c[3] + 0.0 }
end
local X, Y = Tensor(pts), Tensor(labels)
local mlp = { l1 = nn.Linear(2, 8), l2 = nn.Linear(8, 1) }
local function forward(inp) return mlp.l2(mlp.l1(inp):tanh()):sigmoid() end
local opt = optim.Adam(state.get_parameters(mlp), { lr = 0.05 })
local loss
for step = 1, 500 do
  loss = forward(X):binary_crossentropy(Y)
  loss:backward()
  opt:step(loss)
  if step % 100 == 0 then print(("step %3d  loss %.5f"):format(step, loss:item())) end
  if loss:item() < 0.01 then
    print(("step %3d  loss %.5f  (below 0.01)"):format(step, loss:item()))
    break
  end
end
assert(loss:item() < 0.01, "XOR loss did not fall below 0.01: " .. loss:item())
local pred = forward(Tensor { { 0.0, 0.0 }, { 0.0, 1.0 }, { 1.0, 0.0 }, { 1.0, 1.0 } }):tolist()
print(("predictions for 00 01 10 11: %.3f %.3f %.3f %.3f"):format(pred[1][1], pred[2][1], pred[3][1], pred[4][1]))
assert(pred[1][1] < 0.1 and pred[2][1] > 0.9 and pred[3][1] > 0.9 and pred[4][1] < 0.1, "XOR not learned")

------------------------------------------------------------------------------
section("3. How backward works: one rule per primitive, and the result is a graph")

print([[
engine/gradient.cpp holds a table from each primitive op to its rule. Four of them:
  ADD    z = a + b       -> dz/da = g,      dz/db = g          (the gradient passes through)
  MUL    z = a * b       -> dz/da = g * b,  dz/db = g * a      (each side gets the other)
  REDUCE z = sum(a, ax)  -> dz/da = expand(g) back to a's shape (every element gets it)
  EXPAND (a broadcast)   -> sum g over the broadcast axes      (the mirror of REDUCE)
backward() walks the graph from the loss to the parameters in reverse topological order,
applies each node's rule, and adds up what reaches each tensor. No op has its own backward
code in Lua: sigmoid, softmax, conv2d and the losses are composed from primitives, so their
gradients come from these rules.]])
local a = Tensor.randn(3, 4):requires_grad_()
local b = Tensor.randn(4)
local g = Tensor.gradient((a * b):sum(), { a })[1]
print("\nThe gradient of sum(a * b) with respect to a, as a lazy graph (b broadcast to a's shape):")
print(g.uop)
local items = g:schedule()
print(("It runs as %d kernel(s), like any expression."):format(#items))
local bl = b:tolist()
same(g:tolist(), { bl, bl, bl }, 1e-6)

------------------------------------------------------------------------------
section("4. A Huber loss from primitives, its gradient checked numerically")

-- huber(r) = 0.5 r^2 where |r| <= delta, delta (|r| - 0.5 delta) elsewhere
local function huber(pred, target, delta)
  delta = delta or 1.0
  local r = pred - target
  local quad = r * r * 0.5
  local lin = (r:abs() - 0.5 * delta) * delta
  return r:abs():le(delta):where(quad, lin):mean()
end
local target = Tensor({ 0.0, 1.0, -1.0, 2.0, 0.5 }, "float64")
local p = Tensor({ 0.3, 3.0, -1.2, -0.5, 0.45 }, "float64"):requires_grad_()
huber(p, target):backward()
local num = numeric_grad(function(t) return huber(t, target) end, p)
print("autograd: " .. table.concat(p.grad:tolist(), ", "))
print("numeric:  " .. table.concat(num, ", "))
same(p.grad:tolist(), num, 1e-6)
-- and the closed form: r / n inside delta, delta * sign(r) / n outside
local pl, tl = p:tolist(), target:tolist()
local closed = {}
for i = 1, 5 do
  local r = pl[i] - tl[i]
  closed[i] = (math.abs(r) <= 1 and r or (r > 0 and 1 or -1)) / 5
end
same(p.grad:tolist(), closed, 1e-12)
print("\nAll checks passed.")
