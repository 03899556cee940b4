-- Bugs found in review, each pinned by its original repro and a hand-computed answer.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test, same = H.test, H.same

test("realize_all of many tensors (Lua stack)", function()
  local t = {}
  for i = 1, 200 do t[i] = Tensor { 1.0, 2.0 } * i end
  Tensor.realize_all(t)
  same(t[200]:tolist(), { 200.0, 400.0 })
end)

test("reshape of an empty non-contiguous view, then pad", function()
  same(Tensor.empty(0, 3).T:reshape(0, 3):pad { { 1, 0 }, { 0, 0 } }:tolist(), { { 0.0, 0.0, 0.0 } })
end)

test("two reduce loops over the same range at different loop levels", function()
  local x = Tensor { { 1.0, 2.0, 3.0, 4.0 } }
  local y = Tensor { { 1.0, 1.0, 1.0, 1.0 }, { 2.0, 2.0, 2.0, 2.0 } }
  same((x:expand(2, 4):sum(1) + (x * y):sum(1)):tolist(), { 20.0, 30.0 })
end)

test("a constant cast to bfloat16 rounds like a buffer cast", function()
  local c = (Tensor.full({ 2 }, 1.1):cast("bfloat16"):cast("float32") * 100):tolist()[1]
  local b = (Tensor { 1.1, 2.2 }:cast("bfloat16"):cast("float32") * 100):tolist()[1]
  same(c, 110.15625)
  same(b, 110.15625)
end)

test("max propagates NaN wherever it is", function()
  for _, t in ipairs { Tensor { 1.0, 0 / 0, 3.0 }, Tensor { 1.0, 3.0, 0 / 0 }, Tensor { 0 / 0, 1.0, 3.0 } } do
    local m = t:max():item()
    assert(m ~= m, "max should be nan, got " .. tostring(m))
  end
  local v = Tensor { 0 / 0 }:maximum(1):item()
  assert(v ~= v, "maximum(nan, 1) should be nan")
end)

test("integer pow is exact", function()
  same((Tensor { 11 } ^ 7):item(), 19487171)
  same((Tensor { 3, -2 } ^ 5):tolist(), { 243, -32 })
end)

test("x / x is exactly 1 and x // x is 1", function()
  for n = 1, 200 do
    local a = Tensor { n + 0.0 }
    assert((a / n):item() == 1.0, n .. "/" .. n .. " is not 1")
    assert(a:idiv(n):item() == 1.0, n .. "//" .. n .. " is not 1")
  end
end)

test("NOOPT applies to kernels already built in the process", function()
  local x = Tensor.ones(4, 4, 4)
  local merged = x:sum(2):schedule()[1].name
  local plain = Context({ NOOPT = 1 }, function() return x:sum(2):schedule()[1].name end)
  assert(merged ~= plain, "NOOPT did not change the kernel: " .. merged)
  same(plain, "r_4_4_4")
end)

test("metatables are hidden, so __gc cannot run twice", function()
  same(getmetatable(Tensor { 1.0 }), "locked")
end)

test("outputs sharing a realized intermediate each read their own values", function()
  local r = Tensor { 1.0, 2.0, 3.0, 4.0 }
  local c = r * 2
  local d = c + 1
  c:realize()
  local o1, o2 = d * 3, d * 5
  Tensor.realize_all { o1, o2 }
  same(o2:tolist(), { 15.0, 25.0, 35.0, 45.0 })
  same(o1:tolist(), { 9.0, 15.0, 21.0, 27.0 })
end)

test("a buffer larger than the machine's memory is an error, not a killed process", function()
  if Device.DEFAULT == "CPU" then
    H.errors(function() Tensor.zeros(10000000, 10000000):realize() end, "cannot allocate", "MiB")
  else -- a GPU-style device refuses the launch (too many work-groups) or the allocation
    local msg = H.errors(function() Tensor.zeros(10000000, 10000000):realize() end)
    assert(msg:find("launch dim", 1, true) or msg:find("allocat", 1, true), msg)
  end
  -- and the process goes on working
  same((Tensor { 1, 2 } + 1):tolist(), { 2, 3 })
end)

H.cpu_test("nested max/where/minimum render C of linear size (no copied operands)", function()
  local x, y = Tensor.rand(2, 16), Tensor.rand(2, 16)
  local v = Tensor { 2.0 }:gt(1):where(x:minimum(1), y)
  for _ = 1, 6 do v = v:maximum(v * 0.5):minimum(v + 1) end
  local item = v:max(1):schedule()[1]
  assert(#item.src < 40000, "kernel source is " .. #item.src .. " bytes")
  local want = {}
  local xl, yl = x:tolist(), y:tolist()
  for i = 1, 2 do
    local m = -math.huge
    for j = 1, 16 do
      local e = math.min(xl[i][j], 1)
      for _ = 1, 6 do e = math.min(math.max(e, e * 0.5), e + 1) end
      m = math.max(m, e)
    end
    want[i] = m
  end
  same(v:max(1):tolist(), want, 1e-6)
end)

test("two realizes of equal graphs give two buffers: an in-place assign to one leaves the other", function()
  local a = Tensor.ones(4):realize()
  local b = Tensor.ones(4):realize()
  a:assign(a * 3):realize()
  H.same(a:tolist(), { 3.0, 3.0, 3.0, 3.0 })
  H.same(b:tolist(), { 1.0, 1.0, 1.0, 1.0 })
  -- a value cached before an in-place write is not reused after it
  local p = Tensor { 1.0, 2.0 }:realize()
  local q1 = (p * 10):realize()
  p:assign(p + 1):realize()
  H.same((p * 10):tolist(), { 20.0, 30.0 })
  H.same(q1:tolist(), { 10.0, 20.0 })
end)

test("an assign realized as a dependency is applied once", function()
  local w = Tensor { 1.0, 2.0, 3.0 }:realize()
  w:assign(w + 1)
  same((w * 2):tolist(), { 4.0, 6.0, 8.0 })
  same(w:tolist(), { 2.0, 3.0, 4.0 })
  same(w:tolist(), { 2.0, 3.0, 4.0 })
end)

test("assign to an unrealized tensor never writes a buffer another tensor holds", function()
  local a = Tensor.ones(4):realize()
  local c = Tensor.ones(4)
  c:assign(c * 3):realize()
  same(a:tolist(), { 1.0, 1.0, 1.0, 1.0 })
  same(c:tolist(), { 3.0, 3.0, 3.0, 3.0 })
end)

test("parameters with equal graphs get their own gradients", function()
  local a = Tensor.ones(3):requires_grad_()
  local b = Tensor.ones(3):requires_grad_();
  (a * 2 + b * 3):sum():backward()
  same(a.grad:tolist(), { 2.0, 2.0, 2.0 })
  same(b.grad:tolist(), { 3.0, 3.0, 3.0 })
end)

test("huge shapes are errors, not wrapped sizes", function()
  H.errors(function() Tensor.frombytes("", { 1 << 62 }, "float32") end, "too many elements")
  H.errors(function() Tensor.zeros(1 << 31, 1 << 31) end, "too many elements")
end)

test("a realized constant is its own buffer: assigning to it leaves equal constants made later alone", function()
  -- with a zeros(1) alive, zeros(1):realize() was cached on the shared constant node, zeros(2)
  -- became a view of that buffer, and an in-place += 1 changed it (a batch norm's bias read the
  -- other's num_batches_tracked)
  local keep = Tensor.zeros(1)
  local n = Tensor.zeros(1):realize()
  local b = Tensor.zeros(2):realize()
  n:assign(n + 1):realize()
  H.same(b:tolist(), { 0.0, 0.0 })
  H.same(n:tolist(), { 1.0 })
  H.same(keep:tolist(), { 0.0 })
  local bn1, bn2 = nn.BatchNorm(2), nn.BatchNorm(2)
  Tensor.training = true
  local o = optim.Adam(state.get_parameters(bn1), { lr = 0.1 })
  bn1(Tensor.randn(4, 2, 3, 3)):sum():backward()
  o:step()
  Tensor.training = false
  H.same(bn2.bias:tolist(), { 0.0, 0.0 })
  H.same(bn2.num_batches_tracked:tolist(), { 0.0 })
end)

H.cpu_test("a max-pool's window reduce is compiled without AVX-512, and gives the same values", function()
  -- its AVX-512 code ran 3x slower on Zen 4 (c_renderer.cpp, window_reduce); a matmul keeps the
  -- profile's width
  local _, m = Device.machine()
  local x = Tensor.rand(2, 3, 8, 6):realize()
  local pooled = x:max_pool2d()
  local src = pooled:schedule()[1].src
  assert(src:find("//!flag -mno-avx512f", 1, true), "no -mno-avx512f line:\n" .. src)
  local mm = Tensor.rand(64, 64):matmul(Tensor.rand(64, 64)):schedule()
  assert((mm[#mm].src:find("-mno-avx512f", 1, true) ~= nil) == (m.float_lanes < 16), "a matmul's flags")
  local v, want = x:tolist(), {}
  for n = 1, 2 do for c = 1, 3 do for y = 1, 4 do for z = 1, 3 do
    local best = -math.huge
    for dy = 0, 1 do for dz = 0, 1 do best = math.max(best, v[n][c][2 * y - 1 + dy][2 * z - 1 + dz]) end end
    want[#want + 1] = best
  end end end end
  H.same(pooled:flatten():tolist(), want, 0)
end)

H.cpu_test("a tile whose rows fill 512-bit vectors is compiled at 512 bits under the AVX-512 profile", function()
  -- clang's own choice for an Intel core is 256 bits, where the 8x32 tile sized for 32 registers of
  -- 16 floats spilled (2-3x slower); an elementwise kernel keeps clang's choice
  local _, m = Device.machine()
  local a, b = Tensor.rand(64, 48):realize(), Tensor.rand(48, 64):realize()
  local items = a:matmul(b):schedule()
  local src = items[#items].src
  assert((src:find("-mprefer-vector-width=512", 1, true) ~= nil) == (m.float_lanes >= 16), "a matmul's flags:\n" .. src:sub(1, 300))
  assert(not (a + 1):schedule()[1].src:find("-mprefer-vector-width=512", 1, true), "an add's flags")
  local av, bv, got = a:tolist(), b:tolist(), a:matmul(b):tolist()
  for i = 1, 64 do for j = 1, 64 do
    local s = 0
    for k = 1, 48 do s = s + av[i][k] * bv[k][j] end
    assert(math.abs(got[i][j] - s) <= 1e-4, ("c[%d][%d] = %g, want %g"):format(i, j, got[i][j], s))
  end end
end)

H.cpu_test("a window reduce compiled without AVX-512 gets a tile that AVX2's registers hold", function()
  -- a 3x3 convolution over one channel: its tile was sized for 32 AVX-512 registers (26 outputs
  -- by 4 channels) and then compiled for AVX2's 16, 2.4x slower than a tile sized for them
  local x, w = Tensor.rand(4, 1, 12, 30):realize(), (Tensor.rand(8, 1, 3, 3) - 0.5):realize()
  local y = x:conv2d(w)
  local items = y:schedule()
  local src = items[#items].src
  assert(src:find("//!flag -mno-avx512f", 1, true), "no -mno-avx512f line:\n" .. src)
  local accs = 0
  for _ in src:gmatch("float acc%d+ = ") do accs = accs + 1 end
  assert(accs > 1 and accs <= 8 * 16 / 2, accs .. " accumulators for 16 registers of 8 floats")
  local xv, wv, got = x:tolist(), w:tolist(), y:tolist()
  for n = 1, 4 do for c = 1, 8 do for i = 1, 10 do for j = 1, 28 do
    local s = 0
    for di = 0, 2 do for dj = 0, 2 do s = s + xv[n][1][i + di][j + dj] * wv[c][1][di + 1][dj + 1] end end
    assert(math.abs(got[n][c][i][j] - s) <= 1e-5, ("y[%d][%d][%d][%d] = %g, want %g"):format(n, c, i, j, got[n][c][i][j], s))
  end end end end
end)

test("a loss realized after its gradients reads the forward's buffers, not computing them again", function()
  -- the scheduler realizes a graph rewritten first (custom gradients dropped: max_pool2d's, and
  -- Winograd's), and cached the values on the rewritten nodes only: the second convolution, above
  -- the pool's custom gradient, was computed again for the loss
  Tensor.manual_seed(5)
  local x = Tensor.randn(2, 16, 8, 8):realize()
  local w = (Tensor.randn(16, 16, 3, 3) * 0.1):realize()
  local function loss_of(a, b)
    return (a:conv2d(b, nil, 1, 1, 1, 1):relu():max_pool2d():conv2d(b, nil, 1, 1, 1, 1) ^ 2):mean()
  end
  local want = loss_of(x, w):item()
  w.requires_grad = true
  local loss = loss_of(x, w)
  loss:backward()
  w.grad:realize()
  local log = show.kernel_log(function() loss:realize() end)
  for _, k in ipairs(log) do
    assert(k.shape[1] ~= 36, "the loss computed the convolution again: " .. k.name)
  end
  assert(#log <= 2, #log .. " kernels for the loss after its gradient")
  assert(math.abs(loss:item() - want) <= 1e-6 * math.abs(want), loss:item() .. " vs " .. want)
end)

-- x (16x16) summed along dim 1 (r), and what r + 1 and r:reshape(4, 4):permute(1, 0) * k + c hold
local function sums_and_views(x, k, c)
  local v, sums = x:tolist(), {}
  for i = 1, 16 do
    sums[i] = 0
    for j = 1, 16 do sums[i] = sums[i] + v[i][j] end
  end
  local wa, wb = {}, {}
  for i = 1, 16 do wa[i] = sums[i] + 1 end
  for i = 1, 4 do
    wb[i] = {}
    for j = 1, 4 do wb[i][j] = sums[(j - 1) * 4 + i] * k + c end
  end
  return sums, wa, wb
end

test("a reduce read plainly by one output and through a view by another is computed once", function()
  -- the view's kernel stores the reduce on its own; the plain reader, scheduled first, had fused
  -- it again (U5's conv1 computed twice: in its gradient's kernel and for Winograd's transform)
  local x = Tensor.rand(16, 16):realize()
  local r = x:sum(1)
  local a, b = r + 1, r:reshape(4, 4):permute(1, 0) + 2
  local reduces = 0
  for _, k in ipairs(show.kernel_log(function() Tensor.realize_all { a, b } end)) do
    if k.name:match("^r_") then reduces = reduces + 1 end
  end
  assert(reduces == 1, reduces .. " kernels computed the sum")
  local _, wa, wb = sums_and_views(x, 1, 2)
  same(a:tolist(), wa, 1e-5)
  same(b:tolist(), wb, 1e-5)
end)

test("a graph built again over new buffers reuses its first schedule, reading the new buffers (SCACHE)", function()
  -- the sum gets a kernel of its own (read plainly by a and through a view by b), so the schedule
  -- caches it on the node: a replay must cache this run's buffer there, not the first run's
  local function run()
    local x = Tensor.rand(16, 16):realize()
    local r = x:sum(1)
    local a, b = r + 1, r:reshape(4, 4):permute(1, 0) * 2
    Tensor.realize_all { a, b }
    local sums, wa, wb = sums_and_views(x, 2, 0)
    same(a:tolist(), wa, 1e-5)
    same(b:tolist(), wb, 1e-5)
    -- the sum is this run's buffer: reading it is one elementwise kernel, not the sum again
    local c = r * 3
    local log = show.kernel_log(function() c:realize() end)
    assert(#log == 1 and log[1].name:match("^E_"), "r * 3 ran " .. #log .. " kernels: " .. (log[1] or {}).name)
    local w3 = {}
    for i = 1, 16 do w3[i] = sums[i] * 3 end
    same(c:tolist(), w3, 1e-5)
  end
  local c0 = GlobalCounters.schedules_cached
  for _ = 1, 3 do run() end
  assert(GlobalCounters.schedules_cached - c0 >= 2, "runs 2 and 3 should replay run 1's schedule")
  local c1 = GlobalCounters.schedules_cached
  Context({ SCACHE = 0 }, run)
  same(GlobalCounters.schedules_cached, c1)
end)

test("a replayed schedule with assigns writes each step's new values (SCACHE)", function()
  -- an optimizer's shape: m and w assigned in one realize, w's update reading the new m
  local w, m = Tensor { 1.0, 2.0, 3.0, 4.0 }:realize(), Tensor.zeros(4):realize()
  local lw, lm = { 1.0, 2.0, 3.0, 4.0 }, { 0.0, 0.0, 0.0, 0.0 }
  local c0 = GlobalCounters.schedules_cached
  for _ = 1, 4 do
    local x = Tensor.rand(4):realize()
    local xv = x:tolist()
    m:assign(m * 0.9 + w * x * 0.1)
    w:assign(w - m * 0.5)
    Tensor.realize_all { m, w }
    for i = 1, 4 do
      lm[i] = lm[i] * 0.9 + lw[i] * xv[i] * 0.1
      lw[i] = lw[i] - lm[i] * 0.5
    end
    same(m:tolist(), lm, 1e-5)
    same(w:tolist(), lw, 1e-5)
  end
  assert(GlobalCounters.schedules_cached - c0 >= 2, "steps 2 to 4 should replay step 1's schedule")
end)

test("an assign into a never-written buffer keeps cached values; into a written one it does not", function()
  -- The first write to a Tensor.empty buffer (winograd.lua's padded layouts) cannot make a value
  -- computed earlier stale, so values stay cached; a later write to the same buffer can (the
  -- schedule cache keys the two apart), and what reads the buffer sees each write. c, a sum with
  -- a kernel of its own in d's realize, is read from its buffer while cached, else from x again.
  local x = Tensor.arange(12):float():reshape(3, 4):realize()
  local x_buf = (x - 7):schedule()[1].bufs[2]
  local c = (x * 3):sum(1, true)
  local _ = (c + x):realize()
  local buf = Tensor.empty(3, 6)
  for step = 1, 3 do
    local v = buf:shrink({ { 0, 3 }, { 0, 4 } })
    v:assign(x + step)
    local got, xs = (v * 2):tolist(), x:tolist()
    for i = 1, 3 do
      for j = 1, 4 do
        assert(got[i][j] == 2 * (xs[i][j] + step), ("step %d: v[%d][%d] = %g"):format(step, i, j, got[i][j]))
      end
    end
    local reads = (c * 2):schedule()[1].bufs[2]
    assert((reads ~= x_buf) == (step == 1), ("step %d: c * 2 reads %s (x is %s)"):format(step, reads, x_buf))
  end
end)

test("a buffer read after an assign into a view of it reads the assigned values", function()
  -- Before, buf showed the old values until the view itself was realized. Assigns run in the
  -- order they were made (the second overwrites part of the first); a value read from the same
  -- buffer (a shift) is the buffer before its own assign.
  local buf = Tensor.zeros(2, 3):contiguous():realize()
  buf:shrink({ { 0, 2 }, { 0, 2 } }):assign(Tensor.ones(2, 2) * 5)
  same(buf:tolist(), { { 5.0, 5.0, 0.0 }, { 5.0, 5.0, 0.0 } })
  local v1 = buf:shrink({ { 0, 2 }, { 0, 2 } })
  v1:assign(Tensor.ones(2, 2))
  buf:shrink({ { 0, 2 }, { 1, 3 } }):assign(Tensor.ones(2, 2) * 2)
  same((buf * 10):sum():item(), 100.0) -- {{1, 2, 2}, {1, 2, 2}}
  same(buf:tolist(), { { 1.0, 2.0, 2.0 }, { 1.0, 2.0, 2.0 } })
  same(v1:tolist(), { { 1.0, 2.0 }, { 1.0, 2.0 } })
  local x = Tensor.arange(5):float():contiguous():realize()
  x:shrink({ { 1, 5 } }):assign(x:shrink({ { 0, 4 } }))
  same(x:tolist(), { 0.0, 0.0, 1.0, 2.0, 3.0 })
end)

H.done()
