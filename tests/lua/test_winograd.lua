-- 3x3 and 5x5 convolutions as Winograd's F(4x4, 3x3) and F(2x2, 5x5) (stdlib/winograd.lua) against the direct
-- convolution (WINO=0), and the heuristic rule that makes its transforms fast: a stack's joined
-- dim upcast whole (engine/codegen/heuristic.cpp, upcast_joined_dims). PyTorch's values for the
-- same path are in test_torch_refs (the conv2d_winograd cases).
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
Tensor.manual_seed(11)

local function max_abs(t) return t:abs():max():item() end

-- value, input gradient and weight gradient of x:conv2d(w, b, opts), weighted by a fixed gy
local function conv_and_grads(wino, x, w, b, opts, gy)
  return Context({ WINO = wino }, function()
    local xi, wi = x:detach():requires_grad_(), w:detach():requires_grad_()
    local y = xi:conv2d(wi, b, opts)
    local gx, gw = table.unpack((y * gy):sum():gradient(xi, wi))
    Tensor.realize_all { y, gx, gw }
    return { y, gx, gw }
  end)
end

local function schedule_names(t)
  local names = {}
  for _, it in ipairs(t:schedule()) do names[#names + 1] = it.name end
  return table.concat(names, " ")
end

-- name, input shape, output channels, window, conv2d's opts, a bias
local cases = {
  { "no padding, 4x4 tiles exactly", { 2, 16, 10, 10 }, 16, 3, nil },
  { "padding 1, a ragged last tile", { 1, 16, 9, 11 }, 24, 3, { padding = 1 } },
  { "uneven padding", { 2, 20, 6, 7 }, 16, 3, { padding = { 1, 0, 2, 1 } } },
  { "a bias", { 1, 16, 5, 5 }, 17, 3, { padding = 1 }, true },
  { "5x5, no padding, 2x2 tiles exactly (the MNIST CNN's conv2)", { 2, 32, 12, 12 }, 16, 5, nil },
  { "5x5, padding 2, ragged tiles", { 1, 16, 7, 9 }, 20, 5, { padding = 2 } },
  { "5x5, uneven padding and a bias", { 2, 16, 6, 5 }, 16, 5, { padding = { 0, 1, 2, 3 } }, true },
  -- the output gradient stored in blocks of 8 or 16 tiles (the vector's floats): of one image's
  -- rows of tiles (any batch), or of the same tile of 8 images; float32 only (a wrong layout is
  -- off by far more than 1e-5, and each case's kernels take seconds to compile)
  { "1 image of 4x4 tiles: blocks of its tile rows", { 1, 16, 18, 18 }, 16, 3, nil, nil, true },
  { "8 images, 5x5, ragged 5x6 tiles: blocks of the same tile of 8 images", { 8, 16, 9, 11 }, 16, 5,
    { padding = 2 }, nil, true },
}

test("float64: the same values and gradients as the direct convolution, to rounding", function()
  for _, c in ipairs(cases) do
    local name, shape, cout, k, opts, bias, only32 = table.unpack(c)
    if only32 then goto continue end
    local x = Tensor.randn(shape, { dtype = "float64" }):realize()
    local w = Tensor.randn(cout, shape[2], k, k, { dtype = "float64" }):realize()
    local b = bias and Tensor.randn(cout, { dtype = "float64" }):realize() or nil
    local ref = Context({ WINO = 0 }, function() return x:conv2d(w, b, opts) end)
    local gy = Tensor.randn(ref.shape, { dtype = "float64" }):realize()
    local want = conv_and_grads(0, x, w, b, opts, gy)
    local got = conv_and_grads(1, x, w, b, opts, gy)
    for k, what in ipairs({ "value", "input gradient", "weight gradient" }) do
      local err = max_abs(got[k] - want[k]) / max_abs(want[k])
      assert(err < 1e-12, ("%s: %s differs by %.3g of its largest value"):format(name, what, err))
    end
    ::continue::
  end
end)

test("float32: within 1e-5 of the largest value (the transforms' rounding)", function()
  for _, c in ipairs(cases) do
    local name, shape, cout, k, opts = table.unpack(c)
    local x = Tensor.randn(shape):realize()
    local w = Tensor.randn(cout, shape[2], k, k):realize()
    local gy = Tensor.randn(Context({ WINO = 0 }, function() return x:conv2d(w, nil, opts) end).shape):realize()
    local want = conv_and_grads(0, x:cast("float64"), w:cast("float64"), nil, opts, gy:cast("float64"))
    local got = conv_and_grads(1, x, w, nil, opts, gy)
    for k, what in ipairs({ "value", "input gradient", "weight gradient" }) do
      local err = max_abs(got[k]:cast("float64") - want[k]) / max_abs(want[k])
      assert(err < 1e-5, ("%s: %s differs by %.3g of its largest value"):format(name, what, err))
    end
  end
end)

H.cpu_test("which convolutions take the path: 3x3 or 5x5, stride 1, one group, 16+ channels, float32/64", function()
  local x, w = Tensor.randn(1, 16, 8, 8), Tensor.randn(16, 16, 3, 3)
  -- the transforms: 6x6 tiles of 36 planes, both dims upcast
  local function winograd(t) return schedule_names(t):find("E_1_6_1_6_", 1, true) ~= nil end
  assert(winograd(x:conv2d(w)), "a 16 -> 16 channel 3x3 conv: the transforms")
  assert(not Context({ WINO = 0 }, function() return winograd(x:conv2d(w)) end), "WINO=0: direct")
  assert(not winograd(x:conv2d(w, nil, { stride = 2 })), "stride 2: direct")
  assert(not winograd(x:conv2d(w, nil, { dilation = 2 })), "dilation 2: direct")
  assert(not winograd(x:conv2d(w, nil, { padding = -1 })), "negative padding (a crop): direct")
  assert(not winograd(Tensor.randn(1, 8, 8, 8):conv2d(Tensor.randn(16, 8, 3, 3))), "8 channels in: direct")
  assert(winograd(x:conv2d(Tensor.randn(16, 16, 5, 5))), "a 5x5 window: F(2x2, 5x5)")
  assert(not winograd(Tensor.randn(1, 16, 9, 9):conv2d(Tensor.randn(16, 16, 7, 7))), "a 7x7 window: direct")
  assert(not winograd(x:conv2d(Tensor.randn(16, 16, 3, 5))), "a 3x5 window: direct")
  assert(not winograd(x:cast("float16"):conv2d(w:cast("float16"))), "float16: direct")
  assert(not winograd(Tensor.randn(1, 32, 8, 8):conv2d(Tensor.randn(32, 16, 3, 3), nil, { groups = 2 })),
    "two groups: direct")
  assert(show.setting("WINO") == 1, "WINO is on by default")
end)

H.cpu_test("a stack of six pieces is upcast whole along the stacked dim, values against Lua", function()
  local a = Tensor.randn(5, 16):realize()
  local st = Tensor.stack({ a + 1, a * 2, a - 3, a * a, a / 2, -a }, 0)
  local items = st:schedule()
  local opts = table.concat(items[#items].opts, " ")
  assert(opts:find("UPCAST(0, 6)", 1, true), "the stacked dim upcast whole, got: " .. opts)
  local av, got = a:tolist(), st:tolist()
  local fs = { function(v) return v + 1 end, function(v) return v * 2 end, function(v) return v - 3 end,
    function(v) return v * v end, function(v) return v / 2 end, function(v) return -v end }
  for p = 1, 6 do
    for i = 1, 5 do
      for j = 1, 16 do
        local want = fs[p](av[i][j])
        assert(math.abs(got[p][i][j] - want) <= 1e-6 * (1 + math.abs(want)), ("piece %d at (%d, %d)"):format(p, i, j))
      end
    end
  end
  -- two one-row pieces (F(2x2, 5x5)'s output rows) are upcast too; two long pieces keep their loop
  local two = Tensor.cat({ a:reshape(1, 5, 16), (a * 2):reshape(1, 5, 16) }, 0):schedule()
  assert(table.concat(two[#two].opts, " "):find("UPCAST(0, 2)", 1, true), "a stack of two rows is upcast")
  local long = Tensor.cat({ a, a * 2 }, 0):schedule()
  assert(not table.concat(long[#long].opts, " "):find("UPCAST(0, 10)", 1, true), "a cat of two 5-row pieces is not")
end)

H.cpu_test("the output gradient's transform: each tile's rows from a vector's images loaded as runs, transposed", function()
  -- stored images innermost and read an image plane apart: the copies over a vector of images are
  -- the C renderer's packs (engine/codegen/slp.h), each row of a tile one short vector load an
  -- image, the rows transposed by shuffles (heuristic.cpp, upcast_gathered_lanes); the mask of a
  -- relu's gradient (a comparison and a choice per lane) is part of them
  local lanes = select(2, Device.machine()).float_lanes
  -- 16 images of 3 x 3 tiles: the output gradient is stored in blocks of the same tile of 16 (or
  -- 8) images, read a plane apart (U5's layout)
  local x = Tensor.randn(16, 16, 14, 14):realize()
  local w = Tensor.randn(2 * lanes, 16, 3, 3):realize()
  local function grads(wino, xx, ww)
    return Context({ WINO = wino }, function()
      local xi, wi = xx:detach():requires_grad_(), ww:detach():requires_grad_()
      local gx, gw = table.unpack(xi:conv2d(wi):relu():sum():gradient(xi, wi))
      return gx, gw
    end)
  end
  local gx, gw = grads(1, x, w)
  local masked = 0 -- kernels of transposed runs choosing by a per-lane comparison (the relu's mask)
  for _, it in ipairs(gx:schedule()) do
    local opts = table.concat(it.opts, " ")
    if opts:find((", %d)"):format(lanes), 1, true) and it.src:find("__builtin_shufflevector", 1, true) and
        it.src:find(("&(mg_int%d)"):format(lanes), 1, true) then
      masked = masked + 1
    end
  end
  assert(masked == 1, ("the output gradient's transform as transposed runs with the mask, got %d"):format(masked))
  local wx, ww = grads(0, x:cast("float64"), w:cast("float64"))
  for _, c in ipairs({ { "input", gx, wx }, { "weight", gw, ww } }) do
    local err = max_abs(c[2]:cast("float64") - c[3]) / max_abs(c[3])
    assert(err < 1e-5, ("the %s gradient differs by %.3g of its largest value"):format(c[1], err))
  end
end)

H.cpu_test("a row of 4-6 tiles: the output transform's row loop is vectorized, values as the direct conv", function()
  -- each tile's 4 (or 2) outputs are upcast copies; along the row of tiles its loads are
  -- contiguous and its stores 4 apart, which the copies fill (heuristic.cpp, vectorize_interleaved_store)
  for _, c in ipairs({ { 3, 26, 24 }, { 5, 12, 8 } }) do
    local k, size, out = table.unpack(c)
    local x = Tensor.randn(2, 16, size, size):realize()
    local w = Tensor.randn(16, 16, k, k):realize()
    local y = x:conv2d(w)
    local vectorized = {}
    for _, it in ipairs(y:schedule()) do
      if table.concat(it.opts, " "):find("VECTORIZE", 1, true) then vectorized[#vectorized + 1] = it.name end
    end
    assert(#vectorized == 1 and vectorized[1]:find(("_%d_1_%d$"):format(out // (6 - k + 1), 6 - k + 1)),
      k .. "x" .. k .. ": one kernel vectorized, the output transform; got " .. table.concat(vectorized, " "))
    local want = Context({ WINO = 0 }, function() return x:cast("float64"):conv2d(w:cast("float64")) end)
    local err = max_abs(y:cast("float64") - want) / max_abs(want)
    assert(err < 1e-5, ("%dx%d: differs by %.3g of its largest value"):format(k, k, err))
  end
end)

H.cpu_test("a block of output-gradient tiles (F(2x2, 5x5)) is one loop (MERGE) of whole vectors, values as the direct conv", function()
  -- the block's tiles are stored contiguously, each read from 2 floats apart in rows 16 apart:
  -- its two loops are merged (heuristic.cpp, vectorize_tile_block) and, as the C renderer packs
  -- copies, upcast whole: the block read as 4 whole vectors and each tile's 2 x 2 picked out of
  -- them by shuffles (engine/codegen/slp.h, LoadGroup; VECTORIZE's gathers elsewhere). A factor per
  -- channel (the MNIST CNN's batch norm) keeps the channels a loop of their own (without it, the
  -- channels and the rows of tiles are one loop, 4 vectors long, which the rule leaves alone).
  local x = Tensor.randn(2, 32, 12, 12):realize()
  local w = Tensor.randn(16, 32, 5, 5):realize()
  local gy = Tensor.randn(2, 16, 8, 8):realize()
  local scale = Tensor.randn(1, 16, 1, 1):realize()
  local xi, wi = x:detach():requires_grad_(), w:detach():requires_grad_()
  local gx, gw = table.unpack((xi:conv2d(wi) * scale * gy):sum():gradient(xi, wi))
  local merged = {}
  for _, it in ipairs(gw:schedule()) do
    local opts = table.concat(it.opts, " ")
    if opts:find("MERGE", 1, true) then
      local packed = opts:find("UPCAST(4, " .. select(2, Device.machine()).float_lanes, 1, true) and
          it.src:find("__builtin_shufflevector", 1, true)
      assert(packed, it.name .. ": merged but its block not read as whole vectors: " .. opts)
      merged[#merged + 1] = it.name
    end
  end
  assert(#merged == 1, "one kernel merged, the output gradient's transform; got " .. table.concat(merged, " "))
  Tensor.realize_all { gx, gw }
  local want = conv_and_grads(0, x:cast("float64"), w:cast("float64"), nil, nil, (scale * gy):cast("float64"))
  for i, got in ipairs({ gx, gw }) do
    local err = max_abs(got:cast("float64") - want[i + 1]) / max_abs(want[i + 1])
    assert(err < 1e-5, ("%s differs by %.3g of its largest value"):format(i == 1 and "gx" or "gw", err))
  end
end)

H.cpu_test("a stack of stacks (a 3x3 weight gradient's G^T t G) is upcast along both, and bounded", function()
  -- 3 rows of 6 pieces each way, the first stack left unrealized (both transform passes in one kernel)
  local t = Tensor.randn(6, 6, 8, 16):realize()
  local m = { { 1, 1, 1, 0, 0, 0 }, { 0, 1, -1, 2, 0, 0 }, { 0, 1, 1, 4, 0, 1 } }
  local function along(x, ax)
    local rows = {}
    for r = 1, 3 do
      local acc
      for k = 1, 6 do
        if m[r][k] ~= 0 then
          local sl = { { 0, x.shape[1] }, { 0, x.shape[2] }, { 0, 8 }, { 0, 16 } }
          sl[ax + 1] = { k - 1, k }
          local v = x:shrink(sl) * m[r][k]
          acc = acc and acc + v or v
        end
      end
      rows[r] = acc
    end
    return Tensor.cat(rows, ax)
  end
  local y = along(along(t, 0), 1)
  local items = y:schedule()
  assert(#items == 1, "one kernel, got " .. #items)
  local opts = table.concat(items[1].opts, " ")
  assert(opts:find("UPCAST(1, 3)", 1, true) and opts:find("UPCAST(0, 3)", 1, true), "both stacked dims upcast, got: " .. opts)
  -- each of the 9 copies sheds the other pieces' loads as the lowerer makes it (simplified only
  -- at the end, the lowered stage held 784 loads, and a Winograd transform took a second to lower)
  local loads = {}
  for _, st in ipairs(items[1].stages) do loads[st.name] = select(2, st.text:gsub("LOAD", "")) end
  assert(loads.lowered == loads.simplified and loads.simplified <= 25,
    ("lowered %s loads, simplified %s"):format(loads.lowered, loads.simplified))
  -- copies along the channels with the stacks left as loops would keep every piece's loads in
  -- every copy: refused before lowering (BEAM once ran out of memory on such candidates)
  -- (the channels and the row, unmasked, are one dim of 128)
  local ok, err = pcall(show.try_opts, y, { { "UPCAST", 2, 128 } })
  assert(not ok and tostring(err):find("loads (at most 8192; upcast its stacked dims whole first)", 1, true),
    "refused, got: " .. tostring(err))
  local r = show.try_opts(y, { { "UPCAST", 1, 3 }, { "UPCAST", 0, 3 }, { "UPCAST", 2, 8 } })
  assert(r.seconds > 0, "the same copies with the stacks upcast first are legal")
  -- values against Lua: y[i][j] = sum over k, l of m[i][k] m[j][l] t[k][l]
  local tv, got = t:tolist(), y:tolist()
  for i = 1, 3 do
    for j = 1, 3 do
      for c = 1, 8, 7 do
        for e = 1, 16, 5 do
          local want = 0
          for k = 1, 6 do
            for l = 1, 6 do want = want + m[i][k] * m[j][l] * tv[k][l][c][e] end
          end
          assert(math.abs(got[i][j][c][e] - want) <= 1e-4 * (1 + math.abs(want)), ("(%d, %d, %d, %d)"):format(i, j, c, e))
        end
      end
    end
  end
end)

-- The transforms write a tile to each of their 36 planes at once, stored with padding where the
-- planes would crowd one set of the L1. 16 images of 4x4 tiles make blocks of one image each
-- (blocked_forward): the input's transform stores (16 images, 36, Cin x 16 tiles), each plane's
-- row 1 KiB, 9 in each of 4 sets, which a 12-way L1 (48 KiB) holds and an 8-way one (32 KiB) does
-- not: there each row gets a line (16 floats) more. The output gradient's (realize_blocked) stores
-- (36, blocks, Cout, b), b tiles of one image a block (MG_VECTOR_WIDTH: 8 or 16), a block a line
-- more where it is an even number of lines: with 8, 32 blocks of 128 values (8 lines) stored 144
-- apart, planes of 4608 values, 4.5 KiB: 18 in each of 2 sets, so a line more (4624); with 16, 16
-- blocks of 256 (+16), 4352, 4.25 KiB: 9 in each of 4 sets, a line more on the 8-way L1 only
-- (4368). Each L1 and width in a process of its own (MG_L1D_KB), the buffers' sizes and the
-- gradients against the direct convolution.
H.cpu_test("the transforms' planes are padded apart by the L1's ways, values as the direct conv", function()
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write([[
Tensor.manual_seed(3)
local x, w = Tensor.randn(16, 16, 18, 18):realize(), (Tensor.randn(16, 16, 3, 3) * 0.1):realize()
local gy = Tensor.randn(16, 16, 16, 16):realize()
local function grads(wino)
  return Context({ WINO = wino }, function()
    local xi, wi = x:detach():requires_grad_(), w:detach():requires_grad_()
    local g = (xi:conv2d(wi) * gy):sum():gradient(xi, wi)
    local stored = { "none", "none" } -- the transforms' buffers: their elements, padding included
    for _, it in ipairs(g[2]:schedule()) do
      local at = it.name == "E_16_1_1_6_1_6_16_4_4" and 1 or it.name:find("^E_1_6_1_6_") and 2
      if at then stored[at] = it.bufs[1]:match("(%d+)>$") end
    end
    Tensor.realize_all(g)
    return g, stored
  end)
end
local want = grads(0)
local got, stored = grads(1)
local err = 0
for i = 1, 2 do err = math.max(err, ((got[i] - want[i]):abs():max() / want[i]:abs():max()):item()) end
print(stored[1] .. "," .. stored[2], err)
]])
  f:close()
  for _, c in ipairs({ { 32, 8, 272, 4624 }, { 32, 16, 272, 4368 }, { 48, 16, 256, 4352 } }) do
    local l1, lanes, row, plane = table.unpack(c)
    local p = assert(io.popen(("MG_L1D_KB=%d MG_VECTOR_WIDTH=%d %s %s 2>&1"):format(l1, lanes, H.sh_quote(H.exe),
      H.sh_quote(script))))
    local out = p:read("a")
    p:close()
    local name, err = out:match("(%S+)%s+(%S+)%s*$")
    local want = ("%d,%d"):format(16 * 36 * row, 36 * plane)
    assert(name == want, ("L1 of %d KiB, %d lanes: the transforms stored %s elements, expected %s (%s)"):format(l1,
      lanes, tostring(name), want, out))
    assert(tonumber(err) and tonumber(err) < 1e-5, ("L1 of %d KiB, %d lanes: gradients off by %s of the largest"):format(
      l1, lanes, err))
  end
  os.remove(script)
end)

test("on a GPU device (CL where it runs) each pass of a transform is a kernel, stored plainly; values as the CPU's", function()
  local _, why = Device.names()
  if why.CL then
    print("skipped: CL cannot run here: " .. why.CL)
    return
  end
  Tensor.manual_seed(5)
  local x, w = Tensor.randn(2, 32, 12, 12):realize(), Tensor.randn(16, 32, 5, 5):realize()
  local gy = Tensor.randn(2, 16, 8, 8):realize()
  local function grads(dev)
    local xi, wi = x:to(dev):realize():requires_grad_(), w:to(dev):realize():requires_grad_()
    local g
    local log = show.kernel_log(function()
      g = (xi:conv2d(wi) * gy:to(dev)):sum():gradient(xi, wi)
      Tensor.realize_all(g)
    end)
    local shapes = {}
    for _, k in ipairs(log) do shapes[table.concat(k.shape, "x")] = true end
    return g, shapes
  end
  local want = grads("CPU")
  local got, shapes = grads("CL")
  -- the output gradient's tiles (2 x 2, 16 channels, 2 images of 4 x 4 tiles): A along one dim,
  -- then the other, each stored as (a, .., Cout, N, th, tw) with nothing padded
  assert(shapes["6x2x16x2x4x4"] and shapes["6x6x16x2x4x4"], "the two passes of A g A^T as kernels of their own")
  for i, what in ipairs({ "input gradient", "weight gradient" }) do
    local err = max_abs(got[i]:to("CPU") - want[i]) / max_abs(want[i])
    assert(err < 1e-5, ("%s differs by %.3g of its largest value"):format(what, err))
  end
end)

test("training through it: a 3x3 conv net's loss falls as with the direct convolution", function()
  local function run(wino)
    Tensor.manual_seed(4)
    local w1, w2 = (Tensor.randn(16, 3, 3, 3) * 0.2):realize(), (Tensor.randn(16, 16, 3, 3) * 0.1):realize()
    local x, target = Tensor.randn(4, 3, 8, 8):realize(), Tensor.randn(4, 16, 8, 8):realize()
    local losses = {}
    Context({ WINO = wino }, function()
      for step = 1, 5 do
        w1:requires_grad_(); w2:requires_grad_()
        local y = x:conv2d(w1, nil, { padding = 1 }):relu():conv2d(w2, nil, { padding = 1 })
        local loss = ((y - target) ^ 2):mean()
        local g1, g2 = table.unpack(loss:gradient(w1, w2))
        losses[step] = loss:item()
        w1 = (w1 - g1 * 0.05):detach():realize()
        w2 = (w2 - g2 * 0.05):detach():realize()
      end
    end)
    return losses
  end
  local direct, wino = run(0), run(1)
  assert(wino[5] < wino[1] * 0.95, ("the loss falls: %g -> %g"):format(wino[1], wino[5]))
  for i = 1, 5 do
    assert(math.abs(wino[i] - direct[i]) <= 1e-5 * direct[i], ("step %d: %g vs %g"):format(i, wino[i], direct[i]))
  end
end)

H.done()
