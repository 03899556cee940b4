-- Gradients against central finite differences in float64, for every op with a backward rule
-- and the composed ops built on them, on views and broadcasts. The reference knows nothing of
-- the gradient rules: it only evaluates the forward function at nudged inputs.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test

Tensor.manual_seed(7)
local F64 = { dtype = "float64" }

local function flat(t)
  local out = {}
  local function walk(v)
    if type(v) == "table" then for _, x in ipairs(v) do walk(x) end else out[#out + 1] = v end
  end
  walk(t:tolist())
  return out
end

local function from_flat(vals, shape) return Tensor(vals, F64):reshape(shape) end

-- Checks d(sum(f(xs) * w))/dx for each input against finite differences. shapes: one per input;
-- prep turns raw normals into the input domain (e.g. positive for log).
local function check(name, f, shapes, prep, tol, eps)
  test(name, function()
    tol = tol or 1e-5
    local xs = {}
    for i, s in ipairs(shapes) do
      local x = Tensor.randn(s, F64)
      if prep and prep[i] then x = prep[i](x) end
      xs[i] = x:realize()
    end
    local out = f(table.unpack(xs))
    local w = Tensor.randn(out.shape, F64):realize() -- a non-uniform seed
    local function loss(...) return (f(...) * w):sum() end
    local grads = Tensor.gradient(loss(table.unpack(xs)), xs)
    eps = eps or 1e-6
    for i, x in ipairs(xs) do
      local base = flat(x)
      local got = flat(grads[i])
      for k = 1, #base do
        local function at(delta)
          local v = { table.unpack(base) }
          v[k] = v[k] + delta
          local args = { table.unpack(xs) }
          args[i] = from_flat(v, x.shape)
          return loss(table.unpack(args)):item()
        end
        local num = (at(eps) - at(-eps)) / (2 * eps)
        local err = math.abs(got[k] - num)
        assert(err <= tol * math.max(1, math.abs(num)),
          ("%s: input %d element %d: gradient %.9g, finite differences %.9g"):format(name, i, k, got[k], num))
      end
    end
  end)
end

local pos = function(x) return x:abs() + 0.5 end
local unit = function(x) return x:sigmoid() * 0.8 + 0.1 end -- in (0.1, 0.9)
local away = function(x) return x + x:gt(0):where(0.2, -0.2) end -- away from kinks at 0

-- primitives, with broadcasting
check("add (broadcast)", function(a, b) return a + b end, { { 3, 1 }, { 1, 4 } })
check("sub (broadcast)", function(a, b) return a - b end, { { 2, 3 }, { 3 } })
check("mul (broadcast)", function(a, b) return a * b end, { { 3, 1 }, { 1, 4 } })
check("div", function(a, b) return a / b end, { { 2, 3 }, { 2, 3 } }, { nil, pos })
check("pow (both sides)", function(a, b) return a ^ b end, { { 5 }, { 5 } }, { pos })
check("neg", function(a) return -a end, { { 4 } })
check("exp, log", function(a) return a:exp() + a:abs():add(0.5):log() end, { { 6 } })
check("sqrt, rsqrt, reciprocal", function(a) return a:sqrt() + a:rsqrt() + a:reciprocal() end, { { 6 } }, { pos })
check("sin, cos", function(a) return a:sin() * a:cos() end, { { 6 } })
check("relu, abs (away from 0)", function(a) return a:relu() + a:abs() * 2 end, { { 8 } }, { away })
check("sigmoid, tanh", function(a) return a:sigmoid() + a:tanh() end, { { 6 } })
check("square", function(a) return a:square() end, { { 5 } })
check("maximum, minimum", function(a, b) return a:maximum(b) + a:minimum(b) * 3 end, { { 7 }, { 7 } })
check("where", function(a, b) return a:gt(0):where(a * 2, b) end, { { 6 }, { 6 } }, { away })
-- linear, so a wide step is exact; a narrow one would measure float32 rounding
check("cast float64 -> float32 -> float64", function(a) return (a:cast("float32") * 3):cast("float64") end, { { 4 } },
  nil, 1e-5, 1e-1)

-- reductions
check("sum over an axis, keepdim", function(a) return a:sum(1, true) * a end, { { 3, 4 } })
check("sum over everything", function(a) return a:sum() end, { { 2, 3 } })
check("max over an axis", function(a) return a:max(0) end, { { 4, 3 } })
check("min", function(a) return a:min(1) end, { { 3, 4 } })
check("mean", function(a) return a:mean({ 0, 2 }) end, { { 2, 3, 2 } })
check("softmax", function(a) return a:softmax(-1) end, { { 2, 5 } })
check("log_softmax", function(a) return a:log_softmax(0) end, { { 4, 2 } })
check("cumsum", function(a) return a:cumsum(1) end, { { 2, 5 } })
check("matmul", function(a, b) return a:matmul(b) end, { { 3, 4 }, { 4, 2 } })

-- movement, also stacked on each other
check("reshape, permute", function(a) return a:reshape(3, 4):permute(1, 0) * Tensor.arange(0, 3, F64) end, { { 2, 6 } })
check("expand", function(a) return a:reshape(3, 1):expand(3, 4) * Tensor.arange(0, 4, F64) end, { { 3 } })
check("pad", function(a) return a:pad({ { 1, 2 }, { 0, 1 } }) end, { { 2, 3 } })
check("shrink and slice", function(a) return a:shrink({ { 1, 3 }, { 0, 2 } }) + a[{ { 0, 2 }, { 1, 3 } }] end, { { 4, 3 } })
check("flip", function(a) return a:flip(0) * Tensor.arange(0, 3, F64):reshape(3, 1) end, { { 3, 2 } })
check("transpose of a pad of a flip", function(a) return a:flip(1):pad({ { 1, 0 }, { 0, 2 } }).T end, { { 2, 3 } })
check("cat, stack", function(a, b) return Tensor.cat({ a, b }, 1) + Tensor.stack({ a:sum(1), b:sum(1) }, 1):sum(1, true) end,
  { { 2, 3 }, { 2, 2 } })
check("gather", function(a) return a:gather(1, Tensor { { 2, 0 }, { 1, 1 } }) end, { { 2, 3 } })

-- composed ops
check("conv2d (stride 2, padding 1, bias)", function(x, w, b) return x:conv2d(w, b, { stride = 2, padding = 1 }) end,
  { { 1, 2, 5, 5 }, { 3, 2, 3, 3 }, { 3 } })
-- 32+ input values per output: the weight's gradient is the matmul of the windows
check("conv2d (36 values per output, stride 2, padding 1)",
  function(x, w) return x:conv2d(w, { stride = 2, padding = 1 }) end, { { 2, 4, 5, 5 }, { 3, 4, 3, 3 } })
-- a weight used by two convs, and an input that reaches a conv's weight too: the gradient of
-- one custom-gradient input must not be counted again through another
check("conv2d twice with the same small weight", function(x, w) return x:conv2d(w):conv2d(w) end,
  { { 1, 1, 7, 7 }, { 1, 1, 3, 3 } })
check("conv2d of an input by a weight made from it", function(x) return x:conv2d(x:shrink({ { 0, 1 }, { 0, 1 }, { 0, 3 }, { 0, 3 } }) * 2) end,
  { { 1, 1, 5, 5 } })
check("conv2d (groups 2, dilation 2)", function(x, w) return x:conv2d(w, { groups = 2, dilation = 2 }) end,
  { { 1, 4, 5, 5 }, { 2, 2, 2, 2 } })
check("max_pool2d", function(x) return x:max_pool2d(2) end, { { 1, 2, 4, 4 } })
check("max_pool2d overlapping (3, stride 1)", function(x) return x:max_pool2d(3, { stride = 1 }) end, { { 1, 1, 4, 4 } })
check("avg_pool2d", function(x) return x:avg_pool2d(2, { stride = 1 }) end, { { 1, 1, 3, 3 } })
check("linear", function(x, w, b) return x:linear(w, b) end, { { 2, 3 }, { 3, 4 }, { 4 } })
check("layernorm", function(x) return x:layernorm() end, { { 2, 5 } })
check("batchnorm", function(x, w, b, m, v) return x:batchnorm(w, b, m, v) end, { { 2, 3, 2, 2 }, { 3 }, { 3 }, { 3 }, { 3 } },
  { nil, nil, nil, nil, pos })
check("leaky_relu, elu, silu", function(x) return x:leaky_relu(0.1) + x:elu() + x:silu() end, { { 6 } }, { away })
check("softplus, gelu, erf", function(x) return x:softplus() + x:gelu() + x:erf() end, { { 6 } })
check("sparse_categorical_crossentropy with smoothing", function(x)
  return x:sparse_categorical_crossentropy(Tensor { 2, 0, 1 }, { label_smoothing = 0.1 }):reshape(1)
end, { { 3, 4 } })
check("cross_entropy with probabilities", function(x, p) return x:cross_entropy(p:softmax()):reshape(1) end, { { 2, 3 }, { 2, 3 } })
check("binary_crossentropy_logits, mse", function(x, y)
  return (x:binary_crossentropy_logits(y) + x:mse(y)):reshape(1)
end, { { 5 }, { 5 } }, { nil, unit })

-- backward() on parameters, accumulation, detach
test("backward fills .grad, accumulates, and skips detached paths", function()
  local w = Tensor({ 1.0, 2.0, 3.0 }):requires_grad_()
  local x = Tensor { 2.0, 0.5, -1.0 };
  (w * x):sum():backward()
  H.same(w.grad:tolist(), { 2.0, 0.5, -1.0 }, 1e-6);
  (w * w):sum():backward() -- adds 2w
  H.same(w.grad:tolist(), { 4.0, 4.5, 5.0 }, 1e-6)
  w.grad = nil;
  (w * w:detach()):sum():backward() -- only the first factor
  H.same(w.grad:tolist(), { 1.0, 2.0, 3.0 }, 1e-6)
  H.errors(function() Tensor{1.0, 2.0}:requires_grad_():backward() end, "needs a gradient argument")
  H.errors(function() (Tensor{1.0} * 2):sum():backward() end, "does not depend on any tensor with requires_grad")
end)

test("a custom gradient replaces the automatic one for the inputs it covers, and only for those", function()
  local id = Tensor._grad_fn(function(g, x, y) return g * 3, nil end)
  local x, y = Tensor({ 1.0, 2.0 }):requires_grad_(), Tensor({ 5.0, 7.0 }):requires_grad_()
  local v = Tensor._custom_grad(x * y, { x, y }, id)
  H.same(v:tolist(), { 5.0, 14.0 }) -- the value is the first argument's
  local v2 = Tensor._custom_grad(x * y, { x, y }, id)
  v2:sum():backward()
  H.same(x.grad:tolist(), { 3.0, 3.0 }) -- from the function
  H.same(y.grad:tolist(), { 1.0, 2.0 }) -- nil: automatic, d(x*y)/dy = x
  -- y depends on x: x's automatic share stops at y, and y's custom gradient flows back into x
  -- once (d/dx sum(x * 2x) = 4x; counting the path through y twice gave 6x)
  local x2 = Tensor({ 1.0, 2.0 }):requires_grad_()
  local y2 = x2 * 2
  local through = Tensor._grad_fn(function(g, a, b) return nil, g * a end)
  Tensor._custom_grad(x2 * y2, { x2, y2 }, through):sum():backward()
  H.same(x2.grad:tolist(), { 4.0, 8.0 })
  local boom = Tensor._grad_fn(function() error("boom") end)
  H.errors(function() Tensor._custom_grad(x * 2, { x }, boom):sum():backward() end, "boom")
  local wrong = Tensor._grad_fn(function() return Tensor({ 1.0 }) end)
  H.errors(function() Tensor._custom_grad(x * 2, { x }, wrong):sum():backward() end, "input 1 has shape (2,) but its gradient (1,)")
  local notensor = Tensor._grad_fn(function() return 5 end)
  H.errors(function() Tensor._custom_grad(x * 2, { x }, notensor):sum():backward() end, "not a Tensor or nil")
  H.errors(function() Tensor._custom_grad(x, { x }, 100000) end, "no function with id 100000")
  H.errors(function() Tensor._custom_grad(x, { x }, 1 << 32) end, "no function with id 4294967296")
end)

-- Reading a value (item, print, tolist, realize) keeps what backward needs, as in PyTorch: the
-- realized tensor is REALIZED(its buffer, the graph it came from).
test("item() then backward(): the gradient still flows", function()
  local w = Tensor.randn(3, 3)
  w.requires_grad = true
  local loss = (w * 2):sum()
  local v = loss:item()
  loss:backward()
  H.same(w.grad:tolist(), { { 2.0, 2.0, 2.0 }, { 2.0, 2.0, 2.0 }, { 2.0, 2.0, 2.0 } }) -- d(sum 2w)/dw = 2
  -- the value read is the sum of the values (hand computation over tolist)
  local want = 0
  for _, row in ipairs(w:tolist()) do for _, x in ipairs(row) do want = want + 2 * x end end
  assert(math.abs(v - want) <= 1e-5 * math.max(1, math.abs(want)), ("item %g, sum %g"):format(v, want))
  -- reading again runs no kernel: the REALIZED node is read as its buffer
  local k = GlobalCounters.kernel_count
  assert(loss:item() == v and GlobalCounters.kernel_count == k, "a second item() ran a kernel")
  assert(#loss:schedule() == 0, "a realized tensor schedules no kernel")
end)

test("print (tostring) and tolist, then backward()", function()
  local w = Tensor({ 1.0, -2.0, 3.0 }):requires_grad_()
  local loss = (w * w * w):sum() -- d/dw = 3w^2
  assert(tostring(loss):find("shape=()", 1, true))
  loss:backward()
  H.same(w.grad:tolist(), { 3.0, 12.0, 27.0 })
  w.grad = nil
  local y = w:exp()
  y:tolist()
  y:sum():backward() -- d/dw sum(exp w) = exp w
  H.same(w.grad:tolist(), { math.exp(1), math.exp(-2), math.exp(3) }, 1e-5 * math.exp(3))
end)

test("realize in the middle of a graph: dz/dx through a realized y, against finite differences", function()
  local F = { dtype = "float64" }
  local base = { 0.3, -1.2, 0.7, 2.0 }
  local function z_of(xv) -- z = sum(y * y), y = sin(x) * x + x^2
    local x = Tensor(xv, F)
    local y = x:sin() * x + x * x
    return (y * y):sum()
  end
  local x = Tensor(base, F):requires_grad_()
  local y = (x:sin() * x + x * x):realize()
  assert(y.uop.op == "REALIZED", "a realized y that x's gradient flows through keeps its graph")
  local z = y * y
  z = z:sum()
  z:backward()
  local got = x.grad:tolist()
  for k = 1, #base do
    local function at(d)
      local v = { table.unpack(base) }
      v[k] = v[k] + d
      return z_of(v):item()
    end
    local num = (at(1e-6) - at(-1e-6)) / 2e-6
    assert(math.abs(got[k] - num) <= 1e-6 * math.max(1, math.abs(num)),
      ("element %d: gradient %.9g, finite differences %.9g"):format(k, got[k], num))
  end
end)

test("a training loop that prints its loss every step trains exactly as one that does not", function()
  local function run(log)
    Tensor.manual_seed(3)
    local w1, w2 = Tensor.randn(4, 8):realize(), Tensor.randn(8, 1):realize()
    local opt = optim.Adam({ w1, w2 }, { lr = 0.01 })
    local losses = {}
    local x = Tensor.randn(5, 4):realize()
    for step = 1, 6 do
      local loss = ((x:matmul(w1):relu():matmul(w2) - 1) ^ 2):mean()
      if log then
        losses[step] = loss:item()
        tostring(loss) -- as print(loss) does
        loss:backward()
        opt:step()
      else
        loss:backward()
        opt:step(loss)
        losses[step] = loss:item()
      end
    end
    return w1:tolist(), w2:tolist(), losses
  end
  local a1, a2, al = run(true)
  local b1, b2, bl = run(false)
  H.same(a1, b1, 1e-6)
  H.same(a2, b2, 1e-6)
  H.same(al, bl, 1e-6)
  assert(al[6] < al[1], "the loss went down")
end)

test("a value realized together with an in-place write to its input is not reused for the same graph after", function()
  local w = Tensor { 1.0, 2.0 }:realize()
  local y = w * 2
  local keep = y + 0 -- keeps y's graph node alive, as a REALIZED loss does
  w:assign(w + 1)
  Tensor.realize_all({ y, w })
  H.same(y:tolist(), { 2.0, 4.0 })       -- computed before the write
  H.same((w * 2):tolist(), { 4.0, 6.0 }) -- the same graph node, after it: w is 2, 3 now
  assert(keep)
end)

test("what realizing keeps for backward is dropped by detach, assign and no_grad", function()
  local w = Tensor({ 1.0, 2.0 }):requires_grad_()
  local y = (w * 3):sum():realize()
  assert(y.uop.op == "REALIZED")
  local d = y:detach()
  assert(d.uop.op == "DETACH" and d.uop.src[1].op ~= "REALIZED", "detach drops the graph")
  H.errors(function() d:backward() end, "does not depend on any tensor with requires_grad")
  -- an assign's result is its buffer, with no graph
  local z = (w * 2):realize()
  z:assign(z + 1):realize()
  assert(z.uop.op ~= "REALIZED", "an assigned tensor holds no graph")
  H.same(z:tolist(), { 3.0, 5.0 })
  -- the results of backward are values
  y:backward()
  assert(w.grad.uop.op == "DETACH" or w.grad.uop.op ~= "REALIZED")
  w.grad:realize()
  assert(w.grad.uop.op ~= "REALIZED", "a gradient keeps no graph when realized")
  -- under no_grad a realize keeps nothing, and backward is refused
  Tensor.no_grad = true
  local n = (w * 5):sum():realize()
  assert(Tensor.no_grad == true)
  Tensor.no_grad = false
  assert(n.uop.op ~= "REALIZED", "no graph is kept under no_grad")
  H.errors(function() n:backward() end, "does not depend on any tensor with requires_grad")
  -- a tensor that no gradient can reach keeps nothing either
  local plain = (Tensor({ 1.0, 2.0 }) * 2):realize()
  assert(plain.uop.op ~= "REALIZED")
  -- and once requires_grad is off, realizing keeps nothing
  w.requires_grad = false
  assert((w * 2):realize().uop.op ~= "REALIZED")
end)

H.done()
