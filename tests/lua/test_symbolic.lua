-- Symbolic shapes: a bound Variable stands in shapes and slices, the kernel takes it as a
-- parameter (one compiled kernel for every value), and the values are those of the same work
-- done with plain numbers (the reference: slices with Lua integers, and hand-written loops).
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
Tensor.manual_seed(3)

local function rows(t) return t:tolist() end

test("Variable: bind, unbind, val, arithmetic, and bounds checked", function()
  local v = Variable("start_pos", 1, 10)
  assert(v.name == "start_pos" and v.min == 1 and v.max == 10)
  local vp = v:bind(4)
  assert(vp.val == 4 and tostring(vp) == "start_pos=4")
  local u, val = vp:unbind()
  assert(u == v and val == 4)
  local e = vp + 1
  assert(e.min == 2 and e.max == 11, "the range of start_pos+1")
  assert((vp + 1) - vp == 1, "start_pos+1 - start_pos folds to the number 1")
  H.errors(function() return v:bind(11) end, "start_pos = 11", "[1, 10]")
  H.errors(function() return v:bind(0) end, "outside its range")
  H.errors(function() return Variable("1x", 0, 3) end, "identifier")
  H.errors(function() return Variable("n", 5, 2) end, "min <= max")
  H.errors(function() return vp.val + e.val end, "not a bound Variable")
end)

test("a slice of symbolic length gives the plain slice's values, with one compiled kernel", function()
  local v = Variable("n", 1, 8)
  local x = Tensor.randn(3, 8):realize()
  local got = {}
  rows(x:shrink({ { 0, 3 }, { 0, v:bind(1) } }):sum(1)) -- the first value compiles the kernel
  local c0 = GlobalCounters.kernels_compiled
  for n = 1, 8 do got[n] = rows(x:shrink({ { 0, 3 }, { 0, v:bind(n) } }):sum(1)) end
  assert(GlobalCounters.kernels_compiled == c0, "a new value of n compiled a kernel")
  for n = 1, 8 do H.same(got[n], rows(x:shrink({ { 0, 3 }, { 0, n } }):sum(1)), 1e-5, "n = " .. n) end
end)

test("a symbolic offset: x[:, v:v+1] reads the column at v", function()
  local v = Variable("i", 0, 4)
  local x = Tensor.arange(15):reshape(3, 5):realize()
  for i = 0, 4 do
    local col = x:shrink({ { 0, 3 }, { v:bind(i), v:bind(i) + 1 } }):contiguous()
    H.same(rows(col), { { i }, { 5 + i }, { 10 + i } }, nil, "column " .. i)
  end
end)

test("schedule_with_vars: the kernel keeps the Variable; :src takes it as a parameter; the name shows it", function()
  local v = Variable("start_pos", 1, 16)
  local x = Tensor.randn(4, 16):realize()
  local items, vals = x:shrink({ { 0, 4 }, { 0, v:bind(7) } }):sum(1):schedule_with_vars()
  assert(#items == 1 and vals.start_pos == 7)
  assert(items[1].name:find("start_pos", 1, true), "kernel name " .. items[1].name)
  local src = items[1].src
  assert(src:find("start_pos", 1, true), "the source names start_pos")
  assert(not src:find("< 7", 1, true), "the value 7 is not compiled into the loop")
end)

test("attention over a symbolic number of keys equals attention over the plain slice", function()
  local v = Variable("start_pos", 0, 7)
  local K, V, q = Tensor.randn(1, 2, 8, 4):realize(), Tensor.randn(1, 2, 8, 4):realize(), Tensor.randn(1, 2, 1, 4)
  q = q:realize()
  for p = 0, 7 do
    local sp = v:bind(p)
    local got = q:scaled_dot_product_attention(K:shrink({ { 0, 1 }, { 0, 2 }, { 0, sp + 1 }, { 0, 4 } }),
      V:shrink({ { 0, 1 }, { 0, 2 }, { 0, sp + 1 }, { 0, 4 } }))
    local want = q:scaled_dot_product_attention(K:shrink({ { 0, 1 }, { 0, 2 }, { 0, p + 1 }, { 0, 4 } }),
      V:shrink({ { 0, 1 }, { 0, 2 }, { 0, p + 1 }, { 0, 4 } }))
    H.same(rows(got), rows(want), 1e-5, "start_pos = " .. p)
  end
end)

test("assigning into a slice at a Variable writes that slice in place and nothing else", function()
  local v = Variable("pos", 0, 5)
  local cache = Tensor.zeros(2, 6):contiguous():realize()
  local want = { { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 }, { 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 } }
  for p = 0, 5, 2 do
    local new = Tensor { { 10.0 + p }, { 20.0 + p } }:realize()
    local k0 = GlobalCounters.kernel_count
    cache:shrink({ { 0, 2 }, { v:bind(p), v:bind(p) + 1 } }):assign(new):realize()
    assert(GlobalCounters.kernel_count - k0 == 1, "one kernel, no copy of the whole cache")
    want[1][p + 1], want[2][p + 1] = 10.0 + p, 20.0 + p
    H.same(rows(cache), want, nil, "after writing position " .. p)
  end
end)

test("a slice assigned from an overlapping slice of the same buffer gets the old values", function()
  local x = Tensor.arange(6):contiguous():realize()
  x:shrink({ { 1, 6 } }):assign(x:shrink({ { 0, 5 } })):realize() -- x[1:] = x[:-1]
  H.same(rows(x), { 0, 0, 1, 2, 3, 4 })
  local y = Tensor.arange(6):contiguous():realize()
  y:shrink({ { 0, 5 } }):assign(y:shrink({ { 1, 6 } }) * 10):realize() -- y[:-1] = y[1:] * 10
  H.same(rows(y), { 10, 20, 30, 40, 50, 5 })
end)

test("TinyJit replays a capture with new values of a bound Variable", function()
  local v = Variable("start_pos", 0, 7)
  local cache = Tensor.zeros(1, 8):contiguous():realize()
  local step = TinyJit(function(x, sp)
    cache:shrink({ { 0, 1 }, { sp, sp + 1 } }):assign(x):realize()
    return cache:shrink({ { 0, 1 }, { 0, sp + 1 } }):sum():realize()
  end)
  local total, c0 = 0, nil
  for p = 0, 7 do
    total = total + (p + 1)
    local got = step(Tensor { { p + 1.0 } }, v:bind(p)):item()
    H.same(got, total, 1e-5, "position " .. p)
    if p == 2 then c0 = GlobalCounters.kernels_compiled end
  end
  assert(step.capture ~= nil)
  assert(GlobalCounters.kernels_compiled == c0, "a replay compiled a kernel")
  H.errors(function() step(Tensor { { 1.0 } }, v) end, "not a bound Variable")
  H.errors(function() step(Tensor { { 1.0 } }, 3) end, "values that change must be tensors or bound Variables")
end)

test("bad input: a slice a Variable's range can overrun, merging a symbolic dim, a number from a symbolic shape", function()
  local v = Variable("n", 1, 8)
  local x = Tensor.randn(2, 8)
  H.errors(function() return x:shrink({ { 0, 2 }, { v:bind(3), v:bind(3) + 1 } }) end, "out of range",
    "for some value of its variables")
  local y = x:shrink({ { 0, 2 }, { 0, v:bind(3) } })
  H.errors(function() return y:reshape(-1) end, "symbolic")
  H.errors(function() return y:reshape(2 * 8) end, "cannot reshape")
  H.errors(function() return y:tolist() end, "symbolic")
  H.errors(function() return Tensor.randn(3):shrink({ { 0, Variable("m", 1, 5):bind(2) } }) end, "out of range")
end)

H.done()
