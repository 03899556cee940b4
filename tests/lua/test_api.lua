-- The inspection API: laziness and kernel counts, uop/st/schedule objects, globals.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test, same = H.test, H.same

local function kernels() return GlobalCounters.kernel_count end

test("building is lazy; realize runs the fused kernel", function()
  local a = Tensor { 1, 2, 3 }
  local k = kernels()
  local b = ((a + 1) * 2):relu()
  assert(kernels() == k, "building ran a kernel")
  assert(#b:schedule() == 1, "expected one fused kernel in the schedule")
  assert(b:realize() == b, "realize returns self")
  assert(kernels() == k + 1, "realize should run 1 kernel, ran " .. (kernels() - k))
  b:realize()
  assert(kernels() == k + 1, "a second realize must not run again")
end)

test("realize_all realizes several tensors", function()
  local a = Tensor { 1.0, 2.0 }
  local x, y = a * 2, a + 3
  Tensor.realize_all(x, y)
  local k = kernels()
  same(x:tolist(), { 2.0, 4.0 })
  same(y:tolist(), { 4.0, 5.0 })
  assert(kernels() == k, "reading realized tensors must not run kernels")
end)

test("GlobalCounters reads live and resets", function()
  Tensor { 1, 2 }:add(1):realize()
  assert(GlobalCounters.kernel_count > 0)
  assert(type(GlobalCounters.time_sum_s) == "number")
  GlobalCounters.reset()
  assert(GlobalCounters.kernel_count == 0, "reset should zero kernel_count")
end)

test("uop objects", function()
  local a = Tensor { 1, 2, 3 }
  local u = (a + 1).uop
  assert(u.op == "ADD" and u.dtype == "int32", "op/dtype: " .. u.op .. " " .. u.dtype)
  assert(#u.src == 2)
  same(u.shape, { 3 })
  assert(tostring(u):find("ADD", 1, true), "tostring prints the tree")
  assert((a + 1).uop == (a + 1).uop, "hash-consing: equal graphs are the same UOp")
  assert(#u:toposort() >= 3)
end)

test("ShapeTrackers of views", function()
  local m = Tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  local st = m.st
  assert(st.contiguous, "a fresh tensor is contiguous")
  local p = m:permute(1, 0).st
  same(p.shape, { 3, 2 })
  same(p.views[#p.views].strides, { 1, 3 })
  assert(not p.contiguous)
  local e = m:reshape(1, 2, 3):expand(4, 2, 3).st
  same(e.views[#e.views].strides, { 0, 3, 1 })
  assert(tostring(st):find("ShapeTracker", 1, true))
  H.errors(function() return (m + 1).st end, "not a view")
  -- the playground agrees with the tensor's own view
  assert(ShapeTracker.contiguous { 2, 3 }:permute(1, 0) == p)
  assert(p:offset_of { 2, 1 } == 5, "element [2][1] of the transpose is memory offset 5")
end)

test("schedule items", function()
  local x = Tensor { 1.0, 2.0, 3.0 }
  local s = (x * 2):sum():schedule()
  assert(#s == 1, "elementwise fuses into the reduce")
  assert(type(s[1].ast) == "string" and s[1].ast:find("SINK", 1, true))
  assert(tostring(s[1]):len() > 0)
  assert(s[1].src:find(s[1].name, 1, true), "kernel source names the kernel")
  assert(#s[1].bufs == 2)
end)

test("properties", function()
  local a = Tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  same(a.shape, { 2, 3 })
  assert(a.ndim == 2 and a.device == Device.DEFAULT and a.dtype == dtypes.int32)
  same(a.T.shape, { 3, 2 })
  assert(tostring(a):find("[[1, 2, 3],", 1, true), "numpy-like printing: " .. tostring(a))
end)

test("methods can be added from Lua", function()
  function Tensor.double(x) return x * 2 end
  same(Tensor { 1, 2 }:double():tolist(), { 2, 4 })
  same(Tensor.relu(Tensor { -1, 1 }):tolist(), { 0, 1 })
  Tensor.double = nil
end)

test("Context, setdebug and dtypes", function()
  local d = getdebug()
  local r1, r2 = Context({ DEBUG = 0, NOOPT = true }, function() return getdebug(), "x" end)
  assert(r1 == 0 and r2 == "x", "Context returns the function's results")
  setdebug(0)
  assert(getdebug() == 0)
  setdebug(d)
  assert(dtypes.itemsize("float32") == 4 and dtypes.is_float(dtypes.half) and dtypes.is_int("int8"))
end)

H.done()
