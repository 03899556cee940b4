-- TinyJit: replayed kernels give what running the function normally gives, training included;
-- a call that does not fit the capture is an error, never a wrong result.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
Tensor.manual_seed(5)

test("a jitted function gives the plain function's values on every call", function()
  local function f(x, y) return (x * y + 1):relu():sum(1), x:max() end
  local jf = TinyJit(f)
  for call = 1, 5 do
    local x, y = Tensor.randn(3, 4), Tensor.randn(3, 4)
    local a, b = jf(x, y)
    local wa, wb = f(x, y)
    H.same(a:tolist(), wa:tolist(), 1e-6, "call " .. call)
    H.same(b:item(), wb:item(), 1e-6, "call " .. call)
  end
  assert(jf.capture:kernel_count() >= 2, "the capture recorded no kernels")
end)

test("replays skip scheduling: no kernels are compiled or scheduled in Lua", function()
  local jf = TinyJit(function(x) return (x * 2):sum() end)
  for _ = 1, 2 do jf(Tensor.randn(8)) end
  local c0, k0 = GlobalCounters.kernels_compiled, GlobalCounters.kernel_count
  local r = jf(Tensor { 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0 })
  assert(GlobalCounters.kernels_compiled == c0)
  assert(GlobalCounters.kernel_count - k0 == jf.capture:kernel_count())
  H.same(r:item(), 72.0, 1e-5)
end)

test("training with TinyJit matches training without it, step for step", function()
  local function make()
    Tensor.manual_seed(11)
    return nn.Sequential { nn.Conv2d(1, 4, 3), Tensor.relu, nn.BatchNorm(4), Tensor.max_pool2d,
      function(x) return x:flatten(1) end, nn.Linear(4 * 3 * 3, 3) }
  end
  local m1, m2 = make(), make()
  local o1 = optim.Adam(state.get_parameters(m1), { lr = 0.01 })
  local o2 = optim.Adam(state.get_parameters(m2), { lr = 0.01 })
  local function step(m, o) return function(x, y)
    local loss = m(x):sparse_categorical_crossentropy(y)
    loss:backward()
    o:step(loss)
    return loss
  end end
  local plain, jitted = step(m1, o1), TinyJit(step(m2, o2))
  Tensor.training = true
  for s = 1, 6 do
    local x = Tensor.randn(5, 1, 8, 8)
    local y = Tensor { s % 3, (s + 1) % 3, 0, 1, 2 }
    local l1 = plain(x, y):item()
    local l2 = jitted(x, y):item()
    H.same(l2, l1, 1e-5, "loss at step " .. s)
  end
  Tensor.training = false
  local p1, p2 = state.get_state_dict(m1), state.get_state_dict(m2)
  for k, t in pairs(p1) do H.same(p2[k]:tolist(), t:tolist(), 1e-5, k) end
end)

test("a jitted step that reads its loss before backward() trains as the plain one does", function()
  local function make()
    Tensor.manual_seed(12)
    return nn.Sequential { nn.Linear(6, 5), Tensor.relu, nn.Linear(5, 3) }
  end
  local m1, m2 = make(), make()
  local o1 = optim.SGD(state.get_parameters(m1), { lr = 0.1 })
  local o2 = optim.SGD(state.get_parameters(m2), { lr = 0.1 })
  local function step(m, o, read) return function(x, y)
    local loss = m(x):sparse_categorical_crossentropy(y)
    if read then loss:item() end -- realizes the loss inside the capture; backward still works
    loss:backward()
    o:step(loss)
    return loss
  end end
  local plain, jitted = step(m1, o1, false), TinyJit(step(m2, o2, true))
  for s = 1, 5 do
    local x = Tensor.randn(4, 6)
    local y = Tensor { s % 3, (s + 1) % 3, 0, 1 }
    H.same(jitted(x, y):item(), plain(x, y):item(), 1e-5, "loss at step " .. s)
  end
  local p1, p2 = state.get_state_dict(m1), state.get_state_dict(m2)
  for k, t in pairs(p1) do H.same(p2[k]:tolist(), t:tolist(), 1e-5, k) end
end)

test("calls that do not fit the capture are errors", function()
  local jf = TinyJit(function(x, k) return x * k end)
  jf(Tensor { 1.0, 2.0 }, 2)
  jf(Tensor { 1.0, 2.0 }, 2)
  H.same(jf(Tensor { 3.0, 4.0 }, 2):tolist(), { 6.0, 8.0 })
  H.errors(function() jf(Tensor { 1.0, 2.0, 3.0 }, 2) end, "tensor argument 1 is (3) float32", "(2) float32")
  H.errors(function() jf(Tensor { 1, 2 }, 2) end, "int32")
  H.errors(function() jf(Tensor { 1.0, 2.0 }, 3) end, "argument 2 changed from 2 to 3")
  H.errors(function() jf(Tensor { 1.0, 2.0 }) end, "tensor arguments")
end)

test("slices as inputs are copied, so each call sees its own rows", function()
  local X = Tensor.arange(0, 12):reshape(6, 2):cast("float32"):realize()
  local f = TinyJit(function(x) return x:sum(1) end)
  for i = 0, 4 do H.same(f(X[{ { i, i + 2 } }]):tolist(), { 4.0 * i + 1, 4.0 * i + 5 }) end
end)

test("inputs passed in swapped order are swapped", function()
  local f = TinyJit(function(x, y) return x - y end)
  local a, b = Tensor { 5.0 }, Tensor { 2.0 }
  f(a, b)
  f(a, b)
  H.same(f(b, a):tolist(), { -3.0 })
end)

test("data made on the host inside a captured call is reported (replays reuse it)", function()
  local code = "Tensor.training = true; local f = TinyJit(function(x) return x:dropout(0.5):sum() end); " ..
      "for _ = 1, 3 do f(Tensor.ones(64)) end; " ..
      "local g = TinyJit(function(x) return (x * 2):sum() end); for _ = 1, 3 do g(Tensor.ones(64)) end"
  local p = io.popen(H.exe .. " -e '" .. code .. "' 2>&1")
  local out = p:read("a")
  p:close()
  local _, n = out:gsub("TinyJit warning", "")
  assert(n == 1 and out:find("reuses their first values", 1, true), "expected one warning (for f only), got:\n" .. out)
end)

test("a capture on the same inputs as the call before records the kernels, not a copy of that call's result", function()
  -- the second call's graph was the first's (equal nodes), whose values a realize had cached:
  -- the capture recorded one copy, and every replay on new inputs returned the first result
  local w = Tensor.rand(64, 64):realize()
  local x = Tensor.rand(8, 64):realize()
  local f = TinyJit(function(t) return t:matmul(w):relu():matmul(w):sum(1):realize() end)
  f(x)
  f(x)
  local y = Tensor.rand(8, 64):realize()
  local got = f(y):tolist()
  local yl, wl = y:tolist(), w:tolist()
  for r = 1, 8 do -- a C-like loop over the rows: relu(y w) w, summed
    local h, s = {}, 0
    for j = 1, 64 do
      local v = 0
      for k = 1, 64 do v = v + yl[r][k] * wl[k][j] end
      h[j] = math.max(v, 0)
    end
    for j = 1, 64 do
      local v = 0
      for k = 1, 64 do v = v + h[k] * wl[k][j] end
      s = s + v
    end
    assert(math.abs(got[r] - s) <= 1e-4 * math.abs(s), ("row %d: %g, want %g"):format(r, got[r], s))
  end
end)

H.done()
