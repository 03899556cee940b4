-- x:shard(devices, {axis=}): one tensor split over CPU:0 and CPU:1 (stdlib/multi.lua), against the
-- same computation on one device; and Project 4's CNN trained on a sharded batch, loss for loss.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test, same = H.test, H.same
local devs = { "CPU:0", "CPU:1" }

local x = (Tensor.arange(24):reshape(4, 6):cast("float32") - 10) / 4
local m = x:shard(devs, { axis = 0 })

test("shard: a piece per device, cut along the axis or whole; gathered back as it was", function()
  assert(#m.pieces == 2 and m.pieces[1].device == "CPU" and m.pieces[2].device == "CPU:1", "devices")
  same(m.pieces[2]:to("CPU"):tolist(), x[{ { 2, 4 } }]:tolist())
  same(m.shape, { 4, 6 })
  same(m:to("CPU"):tolist(), x:tolist())
  local r = x:shard(devs)
  assert(r.axis == nil and r.pieces[2].shape[1] == 4, "replicated")
  local none -- {axis = none} is {}: replicated too
  assert(x:shard(devs, { axis = none }).axis == nil, "an empty options table")
  local w = x:clone():realize()
  w:shard_(devs, { axis = none })
  assert(w.axis == nil, "shard_ with an empty options table")
  same(x:shard(devs, { axis = 1 }):to("CPU"):tolist(), x:tolist())
  H.errors(function() x:shard(devs, { axis = 2 }) end, "axis 2 is out of range")
  H.errors(function() Tensor.ones(3, 2):shard(devs, { axis = 0 }) end, "does not split into 2 devices")
end)

test(":schedule and :kernels name each piece's device", function()
  local on = {}
  for _, it in ipairs((m * 2):sum(1):schedule()) do on[it.bufs[1]:match("^<buf#%d+ (%S+)")] = true end
  assert(on.CPU and on["CPU:1"], "kernels on both devices")
  local log = show.kernel_log(function() return ((m * 3):sum(1)):realize() end)
  local reduced = {} -- each device reduces its piece (x's own kernels and copies come beside them)
  for _, k in ipairs(log) do reduced[k.device] = reduced[k.device] or k.name:match("^r_") ~= nil end
  assert(reduced.CPU and reduced["CPU:1"], "devices in the kernel log")
end)

test("kernels of two devices realized together (a lane each, engine/realize.cpp): values against Lua", function()
  -- per device a chain of kernels that depend on each other (a sum broadcast back, then another)
  local function chain(t) return ((t - t:mean(1, true)) ^ 2):softmax(1):cumsum(1) end
  local a, b = Tensor.randn(64, 33):realize(), Tensor.randn(48, 33):to("CPU:1"):realize()
  local ya, yb = chain(a), chain(b)
  Tensor.realize_all({ ya, yb })
  assert(yb.device == "CPU:1", "stays on its device")
  for _, pair in ipairs({ { a, ya }, { b, yb } }) do
    local rows, got = pair[1]:tolist(), pair[2]:tolist()
    for i, r in ipairs(rows) do
      local mean, sq, z, acc = 0, {}, 0, 0
      for _, v in ipairs(r) do mean = mean + v / #r end
      for j, v in ipairs(r) do sq[j] = (v - mean) ^ 2 end
      local mx = math.max(table.unpack(sq))
      for j = 1, #sq do z = z + math.exp(sq[j] - mx) end
      for j = 1, #sq do
        acc = acc + math.exp(sq[j] - mx) / z
        assert(math.abs(got[i][j] - acc) <= 1e-5, ("row %d col %d: %g against %g"):format(i, j, got[i][j], acc))
      end
    end
  end
end)

test("matmul with the right operand sharded, or the contracted dim: against one device, gradients too", function()
  local a = (Tensor.arange(24):reshape(4, 6):cast("float32") - 11) / 5
  local b = (Tensor.arange(48):reshape(6, 8):cast("float32") - 20) / 7
  local want = a:matmul(b):tolist()
  local function close(t, what)
    local got = t:to("CPU"):tolist()
    for i = 1, 4 do
      for j = 1, 8 do assert(math.abs(got[i][j] - want[i][j]) < 1e-5, ("%s at %d,%d"):format(what, i, j)) end
    end
  end
  local cols = a:matmul(b:shard(devs, { axis = 1 }))
  assert(cols.axis == 1 and cols.pieces[2].shape[2] == 4, "w's columns: the product cut along its last dim")
  close(cols, "column-parallel")
  local rows = a:shard(devs, { axis = 1 }):matmul(b:shard(devs, { axis = 0 }))
  assert(rows.axis == nil, "the contracted dim cut: the product whole on each device")
  close(rows, "row-parallel")
  close(a:shard(devs, { axis = 1 }):matmul(b), "x cut along the contracted dim, w whole")
  close(a:matmul(b:shard(devs, { axis = 0 })), "w cut along its rows, x whole")
  close(a:shard(devs):matmul(b:shard(devs, { axis = 1 })), "x replicated, w's columns")
  -- one cut along the contracted dim, the other along another: that one gathered and cut along it too
  local mixed = a:shard(devs, { axis = 0 }):matmul(b:shard(devs, { axis = 0 }))
  assert(mixed.axis == nil, "the product whole on each device")
  close(mixed, "x's rows, w's contracted rows")
  close(a:shard(devs, { axis = 1 }):matmul(b:shard(devs, { axis = 1 })), "x's contracted columns, w's columns")
  -- x cut along its rows, w along its columns: w gathered, whole on each device
  local both = a:shard(devs, { axis = 0 }):matmul(b:shard(devs, { axis = 1 }))
  assert(both.axis == 0, "x's rows")
  close(both, "x's rows, w's columns")
  -- gradients through a column-parallel then a row-parallel layer (a sharded MLP), as on one device
  local w1 = b:detach():requires_grad_()
  local w2 = ((Tensor.arange(16):reshape(8, 2):cast("float32") - 7) / 9):requires_grad_()
  local h = a:matmul(w1:shard(devs, { axis = 1 })):relu()
  local loss = h:matmul(w2:shard(devs, { axis = 0 })):square():sum()
  loss:backward()
  local v1, v2 = b:detach():requires_grad_(), w2:detach():requires_grad_()
  local ref = a:matmul(v1):relu():matmul(v2):square():sum()
  ref:backward()
  assert(math.abs(loss:item() - ref:item()) < 1e-4 * math.abs(ref:item()), "loss")
  for k, pair in ipairs({ { w1, v1 }, { w2, v2 } }) do
    local got, exp = pair[1].grad:tolist(), pair[2].grad:tolist()
    for i = 1, #exp do
      for j = 1, #exp[i] do
        assert(math.abs(got[i][j] - exp[i][j]) < 1e-4, ("w%d's gradient at %d,%d: %g vs %g"):format(k, i, j, got[i][j], exp[i][j]))
      end
    end
  end
end)

test("shard_: the tensor itself becomes the sharded one; its gradient stays whole", function()
  local t = Tensor.arange(12):reshape(4, 3):cast("float32"):realize()
  local same_t = t
  assert(t:shard_(devs, { axis = 0 }) == same_t, "shard_ returns the tensor itself")
  assert(getmetatable(t) == getmetatable(m) and t.axis == 0 and #t.pieces == 2, "sharded along axis 0")
  assert(t.pieces[2].device == "CPU:1", "a piece on CPU:1")
  same(t:to("CPU"):tolist(), { { 0., 1., 2. }, { 3., 4., 5. }, { 6., 7., 8. }, { 9., 10., 11. } })
  same((t * 2 + 1):sum(0):to("CPU"):tolist(), { 40., 48., 56. })
  same((Tensor.ones(4, 3) + t):to("CPU"):tolist()[4], { 10., 11., 12. }) -- a plain tensor on the left
  assert(tostring(t):find("sharded", 1, true), "printed as sharded")
  H.errors(function() t:shard_(devs) end, "sharded already")
  -- a weight replicated in place: its gradient is the whole tensor's, as if never sharded
  local w = Tensor({ { 1, -2 }, { 3, 0.5 }, { -1, 2 } }):realize():requires_grad_()
  local x = Tensor.arange(8):reshape(4, 2):cast("float32")
  local want = x:matmul(Tensor({ { 1, 3, -1 }, { -2, 0.5, 2 } })):relu():sum()
  w:shard_(devs)
  local loss = x:shard(devs, { axis = 0 }):matmul(w:transpose()):relu():sum()
  loss:backward()
  assert(math.abs(loss:item() - want:item()) < 1e-5, "loss")
  local wp = Tensor({ { 1, -2 }, { 3, 0.5 }, { -1, 2 } }):requires_grad_()
  x:matmul(wp:transpose()):relu():sum():backward()
  same(w.grad:tolist(), wp.grad:tolist())
  -- an optimizer step updates every piece
  local opt = optim.SGD({ w }, { lr = 0.1 })
  opt:step()
  local moved = (Tensor({ { 1, -2 }, { 3, 0.5 }, { -1, 2 } }) - wp.grad * 0.1):tolist()
  for i = 1, 2 do
    local got = w.pieces[i]:to("CPU"):tolist()
    for r = 1, 3 do
      for c = 1, 2 do assert(math.abs(got[r][c] - moved[r][c]) < 1e-6, ("piece %d at %d,%d"):format(i, r, c)) end
    end
  end
  -- a layer whose weight is replicated in place reads it as x.T (nn.Linear's forward)
  local lin = nn.Linear(2, 3)
  local plain = lin(x):tolist()
  lin.weight:shard_(devs)
  local t2 = lin.weight.T
  assert(getmetatable(t2) == getmetatable(m) and t2.shape[1] == 2 and t2.shape[2] == 3, "x.T of a sharded weight")
  same(lin(x:shard(devs, { axis = 0 })):to("CPU"):tolist(), plain, 1e-6)
end)

test("parameters replicated in place (shard_) train as on one device: Adam steps, under TinyJit too", function()
  Tensor.manual_seed(5)
  local batches = {}
  for i = 1, 5 do batches[i] = { Tensor.randn(4, 6):realize(), Tensor.randn(4, 3):realize() } end
  local function run(shard, jit)
    Tensor.manual_seed(6)
    local l1, l2 = nn.Linear(6, 8), nn.Linear(8, 3)
    local params = { l1.weight, l1.bias, l2.weight, l2.bias }
    local opt = optim.Adam(params, { lr = 0.05 })
    if shard then for _, p in ipairs(params) do p:shard_(devs) end end
    local function step(x, y)
      local loss = ((l2(l1(x):relu()) - y) ^ 2):mean()
      loss:backward()
      opt:step(loss)
      return loss
    end
    if jit then step = TinyJit(step) end
    local losses = {}
    for i, b in ipairs(batches) do
      local x, y = b[1], b[2]
      if shard then x, y = x:shard(devs, { axis = 0 }), y:shard(devs, { axis = 0 }) end
      losses[i] = step(x, y):item()
    end
    local final = {}
    for i, p in ipairs(params) do final[i] = p:to("CPU"):tolist() end
    return losses, final
  end
  local want_losses, want = run(false, false)
  for _, jit in ipairs({ false, true }) do
    local losses, got = run(true, jit)
    same(losses, want_losses, 1e-5)
    same(got, want, 1e-5)
  end
end)

test("elementwise ops, with numbers, plain and replicated tensors, run per piece", function()
  local b = Tensor.arange(6):cast("float32")
  same(((m * 2 + 1):relu() - b):to("CPU"):tolist(), ((x * 2 + 1):relu() - b):tolist(), 1e-6)
  same((b - m):to("CPU"):tolist(), (b - x):tolist(), 1e-6) -- a plain tensor on the left
  same((m * x:shard(devs)):exp():to("CPU"):tolist(), (x * x):exp():tolist(), 1e-5)
  H.errors(function() return m + x:shard({ "CPU:0", "CPU:1", "CPU:2" }, { axis = 1 }) end, "over different devices")
end)

test("methods written over several primitives (%, round, squeeze()); bindings that take one tensor read the whole", function()
  same((m % 0.75):to("CPU"):tolist(), (x % 0.75):tolist(), 1e-6)
  same((1.5 % m):to("CPU"):tolist(), (1.5 % x):tolist(), 1e-6) -- the number on the left
  same((Tensor.full({ 6 }, 2.5) % m):to("CPU"):tolist(), (Tensor.full({ 6 }, 2.5) % x):tolist(), 1e-6)
  same((m * 1.3):round():to("CPU"):tolist(), (x * 1.3):round():tolist())
  local a, b = Tensor._broadcasted(m, 2) -- two results, both cut
  assert(a.axis == 0 and b.axis == 0, "both results sharded")
  same(b:to("CPU"):tolist(), Tensor.full({ 4, 6 }, 2.0):tolist())
  local col = x:reshape(4, 1, 6, 1):shard(devs, { axis = 0 })
  local sq = col:squeeze() -- the shares (2, 1, 6, 1) would lose dim 0 as well
  same(sq.shape, { 4, 6 })
  assert(sq.axis == 0, "still cut along dim 0")
  same(sq:to("CPU"):tolist(), x:tolist())
  same(Tensor.rand(2, 3):shard(devs, { axis = 0 }):reshape(2, 1, 3):squeeze().shape, { 2, 3 }) -- shares of 1
  -- Tensor(t) and show.try_opts are C++ bindings: the sharded tensor gathered, its gradient flowing back
  local w = x:clone():realize():requires_grad_()
  local whole = Tensor(w:shard(devs, { axis = 1 }) * 3)
  assert(whole.device == "CPU", "gathered onto the first device")
  same(whole:tolist(), (x * 3):tolist(), 1e-6)
  whole:sum():backward()
  same(w.grad:tolist(), Tensor.full({ 4, 6 }, 3.0):tolist())
  assert(show.try_opts(m * 2, {}).name == "E_4_6", "one kernel over the whole (4, 6)")
end)

test("sharded weights: saved whole, loaded back into their pieces; aliases (clip, view) route too", function()
  local w = x:detach()
  w:shard_(devs, { axis = 0 })
  local model = { layer = { weight = w, bias = Tensor.ones(6) } }
  local path = os.tmpname()
  state.safe_save(state.get_state_dict(model), path)
  local sd = state.safe_load(path)
  os.remove(path)
  same(sd["layer.weight"]:tolist(), x:tolist()) -- the whole tensor in the file
  w:assign(Tensor.zeros(4, 6)):realize() -- a whole value, cut as the target is
  same(w:to("CPU"):tolist(), Tensor.zeros(4, 6):tolist())
  state.load_state_dict(model, sd)
  same(w.pieces[2]:to("CPU"):tolist(), x[{ { 2, 4 } }]:tolist())
  same(w:clip(-1, 1):to("CPU"):tolist(), x:clip(-1, 1):tolist())
  same(w:view(4, 3, 2):to("CPU"):tolist(), x:view(4, 3, 2):tolist())
end)

test("tensors cut along different axes meet: the second is cut again along the first's axis", function()
  local v = x:detach():requires_grad_()
  local w = (x * 0.5 + 1):detach():requires_grad_()
  local sum = v:shard(devs, { axis = 0 }) * w:shard(devs, { axis = 1 })
  assert(sum.axis == 0 and sum.pieces[2].device == "CPU:1", "along the first's axis")
  same(sum:to("CPU"):tolist(), (x * (x * 0.5 + 1)):tolist(), 1e-6)
  sum:sum():backward()
  same(v.grad:tolist(), (x * 0.5 + 1):tolist(), 1e-6) -- d(v * w)/dv = w, through the re-cut
  same(w.grad:tolist(), x:tolist(), 1e-6)
end)

test("reductions: over the sharded axis combined across devices, over the others per piece", function()
  same(m:sum():item(), x:sum():item(), 1e-5)
  same(m:sum(0):to("CPU"):tolist(), x:sum(0):tolist(), 1e-5)
  same(m:sum(1):to("CPU"):tolist(), x:sum(1):tolist(), 1e-5)
  same(m:max(0):to("CPU"):tolist(), x:max(0):tolist())
  same(m:min():item(), x:min():item())
  same(m:mean({ 0, 1 }):item(), x:mean({ 0, 1 }):item(), 1e-6)
  same(m:softmax(-1):to("CPU"):tolist(), x:softmax(-1):tolist(), 1e-6)
  same(m:argmax(1):tolist(), x:argmax(1):tolist())
end)

test("along the sharded axis: pad, cat, flip, cumsum, softmax, log_softmax as on one device, gradients too", function()
  -- before, pad and cat padded each device's share (cat of (4, 6) with itself came out (12, 6)),
  -- and the others refused the sharded axis
  local ops = {
    { "pad", function(t, a) return t:pad(a == 0 and { { 1, 2 }, nil } or { nil, { 0, 2 } }) end },
    { "cat", function(t, a) return t:cat(t * 2, { dim = a }) end },
    { "flip", function(t, a) return t:flip(a) end },
    { "cumsum", function(t, a) return t:cumsum(a) end },
    { "softmax", function(t, a) return t:softmax(a) end },
    { "log_softmax", function(t, a) return t:log_softmax(a) end },
  }
  local weights = Tensor.rand(9, 12):realize()
  for _, op in ipairs(ops) do
    for a = 0, 1 do
      local function run(cut)
        local v = x:clone():requires_grad_()
        local y = op[2](cut and v:shard(devs, { axis = a }) or v, a)
        ;(y * weights:shrink({ { 0, y.shape[1] }, { 0, y.shape[2] } })):sum():backward()
        if cut then y = y:to("CPU") end
        return y:tolist(), v.grad:tolist()
      end
      local want, want_grad = run(false)
      local got, got_grad = run(true)
      same(got, want, 1e-5, op[1] .. " along " .. a)
      same(got_grad, want_grad, 1e-5, op[1] .. "'s gradient along " .. a)
    end
  end
  -- padded to a length that does not divide into the devices: whole on each
  local odd = m:pad({ { 1, 0 }, nil })
  assert(odd.axis == nil and odd.pieces[2].shape[1] == 5, "replicated")
  same(odd:to("CPU"):tolist(), x:pad({ { 1, 0 }, nil }):tolist())
end)

test("movement ops and a matmul with whole weights keep track of the sharded axis", function()
  local w = Tensor.arange(12):reshape(6, 2):cast("float32") / 10
  same(m:matmul(w):to("CPU"):tolist(), x:matmul(w):tolist(), 1e-5)
  same(m:reshape(4, 2, 3):permute(1, 0, 2):to("CPU"):tolist(), x:reshape(4, 2, 3):permute(1, 0, 2):tolist())
  same(m:unsqueeze(0):transpose(0, 1):flatten(1):to("CPU"):tolist(), x:unsqueeze(0):transpose(0, 1):flatten(1):tolist())
  same(m:reshape(4, 1, 6):expand(4, 3, 6):sum(1):to("CPU"):tolist(), (x * 3):tolist(), 1e-5)
  -- the sharded dim split or merged with the dims after it, where each device keeps equal runs
  for _, s in ipairs({ { 2, 12 }, { 2, 2, 6 }, { 24 }, { 1, 4, 3, 2 } }) do
    local r = m:reshape(s)
    assert(r.pieces[1].device == "CPU" and r.pieces[2].device == "CPU:1", "pieces stay on their devices")
    same(r:to("CPU"):tolist(), x:reshape(s):tolist())
  end
  local by_cols = x:shard(devs, { axis = 1 })
  same(by_cols:reshape(4, 2, 3):to("CPU"):tolist(), x:reshape(4, 2, 3):tolist())
  assert(by_cols:reshape(4, 2, 3).axis == 1, "the split dim's first part is the sharded one")
  -- a cut of the sharded dim within one device's piece is that piece's cut, on the first device
  local cut = m:shrink({ { 3, 4 }, { 1, 5 } })
  assert(show.typeof(cut) == "Tensor" and cut.device == "CPU", "a plain tensor on the first device")
  same((cut + x:shrink({ { 3, 4 }, { 1, 5 } })):tolist(), (x:shrink({ { 3, 4 }, { 1, 5 } }) * 2):tolist())
  same(cut:to("CPU"):tolist(), x:shrink({ { 3, 4 }, { 1, 5 } }):tolist())
  same(m:shrink({ { 0, 2 }, nil }):tolist(), x:shrink({ { 0, 2 }, { 0, 6 } }):tolist())
  -- across pieces: the whole tensor's cut, on the first device
  local across = m:shrink({ { 1, 3 }, nil })
  assert(show.typeof(across) == "Tensor" and across.device == "CPU", "gathered onto CPU")
  same(across:tolist(), x:shrink({ { 1, 3 }, { 0, 6 } }):tolist())
  -- where no dim of the new shape holds whole runs of each piece, the whole tensor's, replicated
  for _, r in ipairs({ m:reshape(3, 8), by_cols:reshape(24), by_cols:flatten() }) do
    assert(r.axis == nil and #r.pieces == 2, "replicated on both devices")
    same(r:to("CPU:1"):tolist(), x:reshape(r.shape):tolist())
  end
end)

test("indexing, index assignment and repeat, along the sharded dim and across it, as on one device", function()
  local by_cols = x:shard(devs, { axis = 1 })
  local keys = { 2, -1, { 3, 4 }, { { 1, 3 } }, { { nil, nil, 2 }, 1 }, { { nil, nil, -1 } }, { nil, { 2, 5 } },
    { Tensor.newaxis, nil, 1 }, { "...", 1 }, Tensor({ 0, 3 }), { nil, Tensor({ 0, 5, 2 }) } }
  for _, t in ipairs({ m, by_cols, x:shard(devs) }) do
    for k, key in ipairs(keys) do
      local got = t[key]
      assert(got ~= nil, "key " .. k .. " gave nil")
      same(got:to("CPU"):tolist(), x[key]:tolist())
    end
  end
  -- a whole run of the sharded dim stays sharded; one index into it is that device's piece
  assert(m[{ nil, 2 }].axis == 0 and by_cols[1].axis == 0, "the sharded axis moves past an index before it")
  assert(m[3].device == "CPU" and by_cols[{ nil, 4 }].device == "CPU", "an index into it: on the first device")
  -- x[key] = v writes the tensor's own pieces
  local w = x:clone():realize()
  w:shard_(devs, { axis = 0 })
  w[{ 3, { 1, 3 } }] = 7
  local want = x:tolist()
  want[4][2], want[4][3] = 7.0, 7.0
  same(w:to("CPU"):tolist(), want)
  local s = x:shard(devs, { axis = 1 })
  s[{ 0, 5 }] = -1
  want = x:tolist()
  want[1][6] = -1.0
  same(s:to("CPU"):tolist(), want)
  H.errors(function() s.pieces_of = 1 end, "no field 'pieces_of'")
  -- repeat along the sharded dim is the whole tensor's, cut again; along another, per piece
  for _, r in ipairs({ { 2, 1 }, { 1, 2 }, { 3, 2, 1 } }) do
    for _, t in ipairs({ m, by_cols }) do same(t:repeat_(r):to("CPU"):tolist(), x:repeat_(r):tolist()) end
  end
  assert(m:repeat_(2, 1).axis == 0 and m:repeat_(3, 1, 1).axis == 1, "repeated, still sharded")
  for _, r in ipairs({ { 1, 0 }, { -3, 0 }, { 2, 1 }, { { 1, 2 }, { 0, 1 } } }) do
    for _, t in ipairs({ m, by_cols }) do
      local got = t:roll(r[1], r[2])
      assert(got.axis == t.axis, "rolled, still sharded along its axis")
      same(got:to("CPU"):tolist(), x:roll(r[1], r[2]):tolist())
    end
  end
  same(m:transpose():to("CPU"):tolist(), x:transpose():tolist())
end)

test("max and min over the sharded axis split their gradient among ties on every device, as on one", function()
  local v = Tensor({ { 1, 3 }, { 3, 0 }, { 3, 2 }, { 1, 1 } }):cast("float32")
  local function grad_of(f, axis)
    local w = v:clone():realize():requires_grad_()
    f(axis and w:shard(devs, { axis = axis }) or w):backward()
    return w.grad:tolist()
  end
  local third = 1 / 3
  local cases = {
    { function(t) return t:max() end, { { 0, third }, { third, 0 }, { third, 0 }, { 0, 0 } } },
    { function(t) return t:max(0):sum() end, { { 0, 1 }, { 0.5, 0 }, { 0.5, 0 }, { 0, 0 } } },
    { function(t) return (t * -1):min(0, true):sum() end, { { 0, -1 }, { -0.5, 0 }, { -0.5, 0 }, { 0, 0 } } },
    { function(t) return t:min() end, { { 0, 0 }, { 0, 1 }, { 0, 0 }, { 0, 0 } } },
  }
  for k, c in ipairs(cases) do
    same(grad_of(c[1]), c[2], 1e-6)
    for _, axis in ipairs({ 0, 1 }) do
      local ok, got = pcall(grad_of, c[1], axis)
      assert(ok, got)
      for i = 1, 4 do
        for j = 1, 2 do
          assert(math.abs(got[i][j] - c[2][i][j]) < 1e-6, ("case %d, axis %d, at %d,%d: %g"):format(k, axis, i, j, got[i][j]))
        end
      end
    end
  end
end)

test("a sharded tensor's methods take keywords and their options; broadcasting keeps the cut dim", function()
  same(m:sum({ axis = 1, keepdim = true }):to("CPU"):tolist(), x:sum(1, true):tolist(), 1e-6)
  same(m:sum{ axis = { 0, 1 } }:item(), x:sum():item(), 1e-5)
  same(m:sum(0, false, "float64"):to("CPU"):tolist(), x:sum(0, false, "float64"):tolist(), 1e-9)
  assert(m:sum(0, false, "float64").dtype == "float64", "sum's dtype")
  same(m:softmax{ axis = 0 }:to("CPU"):tolist(), x:softmax(0):tolist(), 1e-6)
  local w = (Tensor.arange(12):reshape(6, 2):cast("float32") - 5) / 3
  same(m:matmul{ x = w }:to("CPU"):tolist(), x:matmul(w):tolist(), 1e-5)
  local r = x:transpose()
  same(m:matmul(r, true):to("CPU"):tolist(), r:matmul(x):tolist(), 1e-5) -- reverse: r @ m
  -- (3, 4, 6) against (4, 6) cut along its dim 0: the product cut along dim 1, the same dim
  local big = Tensor.arange(72):reshape(3, 4, 6):cast("float32") / 10
  local prod = big * m
  assert(prod.axis == 1 and prod.pieces[1].shape[2] == 2, "cut along dim 1 of three")
  same(prod:to("CPU"):tolist(), (big * x):tolist(), 1e-6)
  same((big:shard(devs, { axis = 2 }) + m):to("CPU"):tolist(), (big + x):tolist(), 1e-6)
end)

test("the show commands take a sharded tensor: the graph of each piece, each device's source, the VIZ page", function()
  local y = m * 2 + 1
  local out = {}
  local write = io.write
  local print_ = print
  io.write = function(...) for _, v in ipairs({ ... }) do out[#out + 1] = tostring(v) end end
  print = function(...) for _, v in ipairs({ ... }) do out[#out + 1] = tostring(v) .. "\n" end end
  local ok, err = pcall(function()
    show.ir(y, "graph")
    show.src(y, "LLVM")
  end)
  io.write, print = write, print_
  assert(ok, err)
  local text = table.concat(out)
  assert(text:find("piece 1 on CPU\n", 1, true) and text:find("piece 2 on CPU:1", 1, true), text)
  assert(not text:find("\nnil\n", 1, true), "a piece's graph printed as nil")
  local _, kernels = text:gsub("// kernel %d+ of", "")
  assert(kernels >= 2, "one kernel per piece at least: " .. text)
  local path = show.viz_write(y.pieces, "sharded")
  local f = assert(io.open(path))
  local page = f:read("a")
  f:close()
  os.remove(path)
  assert(page:find("CPU:1", 1, true), "the page names the second device")
  H.errors(function() show.viz_write({}, "none") end, "empty list")
end)

test("gradients flow through the pieces and the copies to the tensor that was sharded", function()
  local w = Tensor({ { 0.5, -1 }, { 2, 0.25 }, { 1, 1 }, { -0.5, 3 }, { 0, 1 }, { 1, 0 } })
  w.requires_grad = true
  local xs = x:clone():realize()
  xs.requires_grad = true
  local loss = (xs:shard(devs, { axis = 0 }):matmul(w):relu() * 3):sum()
  loss:backward()
  local gw, gx = w.grad:tolist(), xs.grad:tolist()
  w.grad, xs.grad = nil, nil
  ((xs:matmul(w):relu() * 3):sum()):backward()
  same(gw, w.grad:tolist(), 1e-5)
  same(gx, xs.grad:tolist(), 1e-5)
end)

test("three devices: the ring all-reduce leaves the whole sum on each, and gradients flow back through it", function()
  local ring = require("multi").ring
  local mode = ring.mode
  ring.mode = 2 -- the ring whatever the size (tinygrad's RING=2); small tensors go whole otherwise
  local three = { "CPU", "CPU:1", "CPU:2" }
  local v = (Tensor.arange(42):reshape(6, 7):cast("float32") - 20) / 8
  local r = v:shard(three, { axis = 0 }):sum(0) -- 7 elements in 3 chunks of 2, 2 and 3
  for i, p in ipairs(r.pieces) do
    assert(p.device == (i == 1 and "CPU" or three[i]), "piece " .. i .. " on " .. p.device)
    same(p:to("CPU"):tolist(), v:sum(0):tolist(), 1e-5, "device " .. three[i])
  end
  same(v:shard(three, { axis = 0 }):max(0):to("CPU"):tolist(), v:max(0):tolist())
  local a = v:clone():realize()
  a.requires_grad = true
  local s = a:shard(three, { axis = 0 }):sum(0)
  local sq = s * s
  sq:sum():backward()
  local got = a.grad:tolist()
  a.grad = nil
  local t = a:sum(0)
  local tt = t * t
  tt:sum():backward()
  same(got, a.grad:tolist(), 1e-5)
  -- beside the 2 copies that shard the input: the ring passes chunks, 2 (n - 1) = 4 copies per
  -- device; whole tensors take n - 1 = 2
  local copies = {}
  for _, m in ipairs({ 2, 0 }) do
    ring.mode = m
    local n = 0
    local r = Tensor.rand(6, 7):realize():shard(three, { axis = 0 }):sum(0) -- new: nothing cached
    for _, k in ipairs(show.kernel_log(function() r:realize() end)) do
      if k.reason:find("a copy to another device", 1, true) then n = n + 1 end
    end
    copies[#copies + 1] = n
  end
  ring.mode = mode
  assert(copies[1] == 2 + 12 and copies[2] == 2 + 6, ("copies: ring %d, whole %d"):format(copies[1], copies[2]))
  same(v:shard(three, { axis = 0 }):sum(0):to("CPU"):tolist(), v:sum(0):tolist(), 1e-5, "whole")
end)

test("a copy between CPU:0 and CPU:1 is a COPY in the graph: a copy kernel in the schedule, values and gradients", function()
  local a = (Tensor.arange(12):reshape(3, 4):cast("float32") - 5) / 2
  a.requires_grad = true
  local b = a.T:to("CPU:1") -- the copy kernel reads a's buffer through the transpose
  assert(b.device == "CPU:1", b.device)
  local function reasons(t)
    local why = {}
    for _, it in ipairs(t:schedule()) do why[#why + 1] = it.reason end
    return why
  end
  same(reasons(b), { "a copy to another device (Tensor:to)" })
  -- computed values are computed where their inputs live, then copied
  same(reasons((a * 2):to("CPU:1")), { "copied to another device: computed on its own first", "a copy to another device (Tensor:to)" })
  local log = show.kernel_log(function() return ((a * 2):to("CPU:1") + 1):realize() end)
  assert(#log == 3 and log[1].device == "CPU" and log[2].device == "CPU:1" and log[3].device == "CPU:1", "a * 2 on CPU, the copy and + 1 on CPU:1")
  local back = (b * b):to("CPU") + 1
  local want = {}
  for i, row in ipairs(a.T:tolist()) do
    want[i] = {}
    for j, v in ipairs(row) do want[i][j] = v * v + 1 end
  end
  same(back:tolist(), want)
  back:sum():backward() -- d/da of sum(a^2 + 1) is 2a, back through both copies
  local grad = {}
  for i, row in ipairs(a:tolist()) do
    grad[i] = {}
    for j, v in ipairs(row) do grad[i][j] = 2 * v end
  end
  same(a.grad:tolist(), grad)
  -- a constant (it reads no buffer) is on the default device, and copied lazily like any tensor:
  -- TinyJit must not take it for data made on the host
  local c = Tensor.full({ 2 }, 3.5):to("CPU:1")
  assert(c.device == "CPU:1", c.device)
  same(c:tolist(), { 3.5, 3.5 })
  local r = Tensor.arange(5):to("CPU:1")
  assert(r.device == "CPU:1" and Tensor.arange(5):_copy("CPU:1") ~= nil, "a lazy copy")
  same(r:tolist(), { 0, 1, 2, 3, 4 })
  -- without a copy, tensors of two devices still do not meet in one kernel
  H.errors(function() return (a + a:to("CPU:1")):realize() end, "a kernel reads tensors on", ":to(")
end)

test("copies back and forth between two devices' chains in one realize (lanes wait for each other's buffers)", function()
  local x0 = Tensor.rand(64, 64):realize()
  local p0, p1 = x0, x0:to("CPU:1")
  local q0, q1 = x0, x0
  for _ = 1, 4 do
    p0 = (p0 * 1.5 + 0.25):relu():sum(1, true):expand(64, 64) / 64
    p1 = ((p1 * 0.5 - 0.25):relu() + p0:to("CPU:1")):to("CPU"):to("CPU:1")
    q0 = (q0 * 1.5 + 0.25):relu():sum(1, true):expand(64, 64) / 64
    q1 = (q1 * 0.5 - 0.25):relu() + q0
  end
  Tensor.realize_all({ p0, p1 })
  assert(p1.device == "CPU:1", p1.device)
  same(p1:to("CPU"):tolist(), q1:tolist(), 1e-6)
  same(p0:tolist(), q0:tolist(), 1e-6)
end)

test("a constant realized on one device is not read on another (a batch norm step, then a mean)", function()
  -- a constant's kernel (a count, a zero) was cached on its node, which every device's graph
  -- shares: the next graph on the other device read it where it was
  Tensor.training = true
  local v = Tensor.rand(4, 2, 3, 3):realize()
  v.requires_grad = true
  local sharded = v:shard(devs, { axis = 0 })
  nn.BatchNorm(2)(sharded):sum():backward()
  local mean = sharded:mean({ 0, 2, 3 })
  v.grad = nil
  local sq = mean * mean
  sq:sum():backward()
  Tensor.training = false
  local mine = v.grad:tolist()
  v.grad = nil
  local m1 = v:mean({ 0, 2, 3 })
  local sq1 = m1 * m1
  sq1:sum():backward()
  same(mine, v.grad:tolist(), 1e-6)
end)

test("a tensor sharded over the CPU and a GPU device (CL, CUDA) where it runs: values and gradients", function()
  local _, why = Device.names()
  for _, gpu in ipairs({ "CL", "CUDA" }) do
    if why[gpu] then
      print("skipped: " .. gpu .. " cannot run here: " .. why[gpu])
    else
      local mixed = x:shard({ "CPU", gpu }, { axis = 0 })
      assert(mixed.pieces[2].device == gpu, mixed.pieces[2].device)
      same((mixed * 2 + 1):relu():sum(1):to("CPU"):tolist(), (x * 2 + 1):relu():sum(1):tolist(), 1e-5)
      same(mixed:sum(0):to("CPU"):tolist(), x:sum(0):tolist(), 1e-5)
      local w = Tensor({ { 1.0 }, { 2 }, { 3 }, { 4 }, { 5 }, { 6 } })
      w.requires_grad = true
      mixed:matmul(w):sum():backward()
      same(w.grad:flatten():tolist(), x:sum(0):tolist(), 1e-5) -- d sum(x @ w) / dw = the column sums
      -- the ring all-reduce through the GPU's copies (each piece's chunk passes over both kinds)
      local ring = require("multi").ring
      local mode = ring.mode
      ring.mode = 2
      local three = { "CPU", gpu, "CPU:1" }
      local v = (Tensor.arange(42):reshape(6, 7):cast("float32") - 20) / 8
      local r = v:shard(three, { axis = 0 }):sum(0)
      ring.mode = mode
      for i, p in ipairs(r.pieces) do
        assert(p.device == three[i], "piece " .. i .. " on " .. p.device)
        same(p:to("CPU"):tolist(), v:sum(0):tolist(), 1e-5, "ring, device " .. three[i])
      end
    end
  end
end)

test("conv2d and max_pool2d of a batch cut along dim 0 run per device, Winograd included: values and gradients", function()
  Tensor.manual_seed(3)
  local xs = Tensor.randn(4, 16, 8, 8):realize()
  local w = (Tensor.randn(16, 16, 3, 3) * 0.1):realize()
  local function run(shard)
    local xin = xs:detach()
    xin.requires_grad, w.requires_grad, w.grad = true, true, nil
    local input = shard and xin:shard(devs, { axis = 0 }) or xin
    local y = Tensor.max_pool2d(input:conv2d(w, nil, 1, 1, 1, 1):relu())
    local out = (y * y):sum()
    local log = show.kernel_log(function() out:backward(); Tensor.realize_all({ xin.grad, w.grad }) end)
    return y:to("CPU"):tolist(), xin.grad:tolist(), w.grad:tolist(), log
  end
  local y1, dx1, dw1 = run(false)
  local y2, dx2, dw2, log = run(true)
  -- two batch sizes, two kernels each: their float32 sums differ in order (Winograd's error is
  -- about 1e-6 of the largest value, outputs up to 5 here)
  same(y2, y1, 5e-5)
  same(dx2, dx1, 5e-5)
  same(dw2, dw1, 1e-3) -- the weight's gradient (values up to 25): two devices' sums added
  -- Winograd's 36 matmuls (one per transformed position) ran on the second device too
  local wino = false
  for _, k in ipairs(log) do wino = wino or (k.device == "CPU:1" and k.shape[1] == 36) end
  assert(wino, "no Winograd matmul on CPU:1")
end)

test("the MNIST CNN trained on a batch sharded over CPU:0 and CPU:1 follows the one-device loss curve, under TinyJit too", function()
  local mnist = dofile((arg[0]:match("^(.*/)") or "") .. "../../scripts/mnist_model.lua")
  local X, Y = datasets.mnist_digits()
  local function run(shard, jit)
    Tensor.manual_seed(0)
    local model = mnist.model()
    local opt = optim.Adam(state.get_parameters(model), { lr = 1e-3 })
    local step = TinyJit(function(xb, yb)
      local loss = model(xb):sparse_categorical_crossentropy(yb)
      loss:backward()
      opt:step(loss)
      return loss
    end)
    local sample = datasets.sampler(X, Y, 1)
    local losses = {}
    Tensor.training = true
    for i = 1, 5 do
      local xb, yb = sample(32)
      if shard then xb, yb = xb:shard(devs, { axis = 0 }), yb:shard(devs, { axis = 0 }) end
      if jit then
        losses[i] = step(xb, yb):item()
      else
        local loss = model(xb):sparse_categorical_crossentropy(yb)
        losses[i] = loss:item()
        loss:backward()
        opt:step()
      end
    end
    Tensor.training = false
    return losses
  end
  local one, two, jitted = run(false), run(true), run(true, true)
  for i = 1, #one do
    assert(math.abs(one[i] - two[i]) <= 1e-5, ("step %d: loss %.7f on one device, %.7f sharded"):format(i, one[i], two[i]))
    assert(math.abs(one[i] - jitted[i]) <= 1e-5,
      ("step %d: loss %.7f on one device, %.7f sharded under TinyJit"):format(i, one[i], jitted[i]))
  end
  assert(one[5] < one[1], "the loss did not fall")
end)

H.done()
