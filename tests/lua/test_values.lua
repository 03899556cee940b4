-- Values and dtypes from the Lua API, checked against hand-computed plain Lua values.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test, same = H.test, H.same

test("dtype inference follows Lua's integer/float split", function()
  assert(Tensor { 1, 2 }.dtype == "int32", "Tensor{1,2} should be int32")
  assert(Tensor { 1.5 }.dtype == "float32", "Tensor{1.5} should be float32")
  assert(Tensor { 1, 2.0 }.dtype == "float32", "one float makes the tensor float32")
  assert(Tensor { true, false }.dtype == "bool", "booleans give bool")
  assert(Tensor { 1, 2 }.dtype == dtypes.int32 and dtypes.float == "float32" and dtypes.int == "int32")
  assert(Tensor({ 1, 2 }, { dtype = "float32" }).dtype == "float32", "the dtype option wins")
  assert(Tensor({ 1, 2 }, dtypes.float16).dtype == "float16", "a dtype string as 2nd arg")
  assert(Tensor(3).ndim == 0 and Tensor(3):item() == 3, "a number gives a 0-d tensor")
end)

test("nested tables give shapes", function()
  local t = Tensor { { { 1, 2 }, { 3, 4 }, { 5, 6 } } }
  same(t.shape, { 1, 3, 2 })
  assert(t.ndim == 3 and t:numel() == 6)
  same(Tensor({}).shape, { 0 })
end)

test("tolist gives Lua integers, floats and booleans", function()
  same(Tensor { { 1, 2 }, { 3, 4 } }:tolist(), { { 1, 2 }, { 3, 4 } })
  same(Tensor { 0.5, 1.5 }:tolist(), { 0.5, 1.5 })
  same(Tensor { true, false }:tolist(), { true, false })
  same(Tensor { 1, 2, 3 }:sum():item(), 6)
  assert(math.type(Tensor { 1, 2 }:tolist()[1]) == "integer")
end)

test("elementwise arithmetic matches Lua", function()
  local xs = { -2, -1, 0, 3, 7 }
  local x = Tensor(xs)
  local want = {}
  for i, v in ipairs(xs) do want[i] = (v + 1) * 2 - 3 end
  same(((x + 1) * 2 - 3):tolist(), want)
  for i, v in ipairs(xs) do want[i] = 10 - v end
  same((10 - x):tolist(), want, nil, "10 - x")
  for i, v in ipairs(xs) do want[i] = v * v end
  same((x ^ 2):tolist(), want, nil, "x ^ 2")
  same(x:square():tolist(), want, nil, "square")
  -- (only non-negative values here: the engine's int division truncates like C, Lua's floors)
  same((Tensor { 0, 3, 7 } // 2):tolist(), { 0, 1, 3 }, nil, "x // 2")
  for i, v in ipairs(xs) do want[i] = v / 2 end
  same((x / 2):tolist(), want, 1e-6, "x / 2 is true division")
  assert((x / 2).dtype == "float32", "int / int is float")
  for i, v in ipairs(xs) do want[i] = -v end
  same((-x):tolist(), want, nil, "-x")
  for i, v in ipairs(xs) do want[i] = math.max(v, 0) end
  same(x:relu():tolist(), want, nil, "relu")
  for i, v in ipairs(xs) do want[i] = v < 1 end
  same(x:lt(1):tolist(), want, nil, "lt")
  for i, v in ipairs(xs) do want[i] = v < 1 and v or 100 end
  same(x:lt(1):where(x, 100):tolist(), want, nil, "where")
  same((x + 0.5).dtype, "float32")
end)

test("division by a constant is exact in float32, also in copies the optimizer makes", function()
  -- each copy of an upcast stack is simplified as the lowerer makes it; the division must be made
  -- first, or x * (1/41) folds to x * 0.024390243 (41 * (1/41) is 0.99999994 in float32)
  local xs = {}
  for i = 1, 64 do xs[i] = i end
  local x = Tensor(xs, "float32"):reshape(1, 64):realize()
  local st = Tensor.cat({ x, x * 2, x * 3 }, 0) / 41
  local items = st:schedule()
  local opts = table.concat(items[#items].opts, " ")
  local cpu = Device.DEFAULT == "CPU" or Device.DEFAULT == "LLVM" -- a GPU's heuristic differs
  assert(#items == 1 and (not cpu or opts:find("UPCAST(0, 3)", 1, true)), "one kernel, the stack upcast whole, got: " .. opts)
  local got = st:tolist()
  for p = 1, 3 do
    for i = 1, 64 do
      local want = string.unpack("f", string.pack("f", p * i / 41)) -- rounded once to float32
      assert(got[p][i] == want, ("%d / 41: %.9g, want %.9g"):format(p * i, got[p][i], want))
    end
  end
  -- each piece divided before the cat pads it: 1/41 under a pad is masked in the same kernel (it
  -- was a kernel that wrote 0.024390243 into a buffer of its own, and the quotient was inexact)
  local cut = Tensor.cat({ x / 41, x / 7, x / 3 }, 0)
  assert(#cut:schedule() == 1, "one kernel, got " .. #cut:schedule())
  got = cut:tolist()
  for p, d in ipairs({ 41, 7, 3 }) do
    for i = 1, 64 do
      local want = string.unpack("f", string.pack("f", i / d))
      assert(got[p][i] == want, ("%d / %d: %.9g, want %.9g"):format(i, d, got[p][i], want))
    end
  end
end)

test("transcendentals match Lua's math", function()
  local xs = { 0.25, 1.0, 2.0 }
  local x = Tensor(xs)
  local function map(f)
    local r = {}
    for i, v in ipairs(xs) do r[i] = f(v) end
    return r
  end
  same(x:exp():tolist(), map(math.exp), 1e-4)
  same(x:log():tolist(), map(math.log), 1e-5)
  same(x:sqrt():tolist(), map(math.sqrt), 1e-6)
  same(x:sin():tolist(), map(math.sin), 1e-5)
  same(x:sigmoid():tolist(), map(function(v) return 1 / (1 + math.exp(-v)) end), 1e-5)
end)

test("reductions, all call forms", function()
  local a = Tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  same(a:sum():item(), 21)
  same(a:sum(0):tolist(), { 5, 7, 9 })
  same(a:sum(-1):tolist(), { 6, 15 })
  same(a:sum({ 0, 1 }):item(), 21)
  same(a:sum(0, true).shape, { 1, 3 })
  same(a:sum { axis = 1, keepdim = true }:tolist(), { { 6 }, { 15 } })
  same(a:sum(1, { keepdim = true }).shape, { 2, 1 })
  same(a:max(1):tolist(), { 3, 6 })
  same(a:min(0):tolist(), { 1, 2, 3 })
  same(a:mean():item(), 3.5, 1e-6)
  same(a:argmax(1):tolist(), { 2, 2 })
  same(a:cumsum(1):tolist(), { { 1, 3, 6 }, { 4, 9, 15 } })
  local sm = Tensor { 1.0, 2.0, 3.0 }:softmax():tolist()
  local z = math.exp(1) + math.exp(2) + math.exp(3)
  same(sm, { math.exp(1) / z, math.exp(2) / z, math.exp(3) / z }, 1e-5)
end)

test("movement and slicing", function()
  local a = Tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  same(a.T:tolist(), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
  same(a:reshape(3, 2):tolist(), { { 1, 2 }, { 3, 4 }, { 5, 6 } })
  same(a:reshape { -1 }:tolist(), { 1, 2, 3, 4, 5, 6 })
  same(a:permute { 1, 0 }.shape, { 3, 2 })
  same(a:flip(1):tolist(), { { 3, 2, 1 }, { 6, 5, 4 } })
  same(a:pad({ { 0, 0 }, { 1, 0 } }):tolist(), { { 0, 1, 2, 3 }, { 0, 4, 5, 6 } })
  same(a:shrink({ nil, { 1, 3 } }):tolist(), { { 2, 3 }, { 5, 6 } })
  same(a:unsqueeze(0).shape, { 1, 2, 3 })
  same(a:reshape(1, 2, 3):squeeze(0).shape, { 2, 3 })
  same(a:flatten():tolist(), { 1, 2, 3, 4, 5, 6 })
  same(a:reshape(2, 1, 3):expand(2, 2, 3).shape, { 2, 2, 3 })
  same(a[0]:tolist(), { 1, 2, 3 })
  same(a[-1]:tolist(), { 4, 5, 6 })
  same(a[{ 1, 2 }]:item(), 6)
  same(a[{ nil, { nil, nil, 2 } }]:tolist(), { { 1, 3 }, { 4, 6 } })
  same(a[{ { 0, 1 }, { 1, 3 } }]:tolist(), { { 2, 3 } })
  same(a:slice { {}, 0 }:tolist(), { 1, 4 })
end)

test("matmul matches a Lua triple loop", function()
  local A = { { 1, 2, 3 }, { 4, 5, 6 } }
  local B = { { 7, 8 }, { 9, 10 }, { 11, 12 } }
  local want = {}
  for i = 1, 2 do
    want[i] = {}
    for j = 1, 2 do
      local s = 0
      for k = 1, 3 do s = s + A[i][k] * B[k][j] end
      want[i][j] = s
    end
  end
  same(Tensor(A):matmul(Tensor(B)):tolist(), want)
  same(Tensor(A):dot(B):tolist(), want, nil, "a nested table is converted")
end)

test("creation helpers", function()
  same(Tensor.zeros(2, 3).shape, { 2, 3 })
  same(Tensor.zeros { 2, 3 }.shape, { 2, 3 })
  assert(Tensor.ones(2, { dtype = "int32" }).dtype == "int32")
  assert(Tensor.zeros({ 2 }, "float16").dtype == "float16")
  same(Tensor.ones(2):tolist(), { 1.0, 1.0 })
  same(Tensor.full({ 2 }, 7):tolist(), { 7, 7 })
  same(Tensor.arange(4):tolist(), { 0, 1, 2, 3 })
  same(Tensor.arange(1, 7, 2):tolist(), { 1, 3, 5 })
  same(Tensor.arange(0, 1, 0.25):tolist(), { 0.0, 0.25, 0.5, 0.75 }, 1e-7)
  same(Tensor.eye(2):tolist(), { { 1.0, 0.0 }, { 0.0, 1.0 } })
  Tensor.manual_seed(42)
  local r1 = Tensor.rand(4):tolist()
  Tensor.manual_seed(42)
  same(Tensor.rand(4):tolist(), r1, nil, "manual_seed makes rand repeatable")
  for _, v in ipairs(r1) do assert(v >= 0 and v < 1, "rand in [0, 1)") end
  same(Tensor.randn(2, 3).shape, { 2, 3 })
end)

H.cpu_test("float32 exp2 (the renderer's own, vectorizable) is exact on integers and within 2 ulp elsewhere", function()
  local xs = {}
  for i = -149, 127 do xs[#xs + 1] = i end
  for i = 0, 3000 do xs[#xs + 1] = -120 + i * 0.0811 end
  local got = Tensor(xs, "float32"):exp2():tolist()
  local xf = Tensor(xs, "float32"):tolist() -- the float32 inputs
  for i, x in ipairs(xf) do
    local want = 2.0 ^ x
    if math.type(xs[i]) == "integer" then
      assert(got[i] == want, ("exp2(%d) = %.9g, expected %.9g"):format(xs[i], got[i], want))
    elseif want > 1e-37 then
      assert(math.abs(got[i] - want) <= 2.4e-7 * want, ("exp2(%.9g) = %.9g, expected %.9g"):format(x, got[i], want))
    end
  end
  local special = Tensor({ 1 / 0, -1 / 0, 0 / 0, 128, -200 }, "float32"):exp2():tolist()
  assert(special[1] == 1 / 0 and special[2] == 0 and special[3] ~= special[3] and special[4] == 1 / 0 and special[5] == 0)
  -- at the bottom of the subnormals: 2^-149.5 rounds to 2^-149, 2^-150 (a tie) and below to 0,
  -- which comes from a select that skips the product (no subnormal arithmetic for masked lanes)
  local edge = Tensor({ -149.5, -150, -150.25, -151, -1e30 }, "float32"):exp2():tolist()
  assert(edge[1] == 2.0 ^ -149, ("exp2(-149.5) = %.9g, expected 2^-149"):format(edge[1]))
  for i = 2, 5 do assert(edge[i] == 0, ("exp2 of input %d = %.9g, expected 0"):format(i, edge[i])) end
end)

H.cpu_test("float32 log2 (the renderer's own, vectorizable) is exact on powers of two and within 2 ulp elsewhere", function()
  local xs = {}
  for i = -149, 127 do xs[#xs + 1] = 2.0 ^ i end
  for i = 0, 3000 do xs[#xs + 1] = 1.37 ^ (i * 0.1 - 150) end -- subnormals up to 1e20
  for i = 0, 400 do xs[#xs + 1] = 0.9 + i * 0.0005 end -- around 1, where log2 is near 0
  local got = Tensor(xs, "float32"):log2():tolist()
  local xf = Tensor(xs, "float32"):tolist()
  for i, x in ipairs(xf) do
    local want = math.log(x, 2)
    if i <= 277 then
      assert(got[i] == want, ("log2(%.9g) = %.9g, expected %.9g"):format(x, got[i], want))
    else
      -- 2 ulp of the result, or of 1e-7 absolute near x = 1 (float32's own error of x itself)
      local tol = math.max(2.4e-7 * math.abs(want), 1.8e-7)
      assert(math.abs(got[i] - want) <= tol, ("log2(%.9g) = %.9g, expected %.9g"):format(x, got[i], want))
    end
  end
  local special = Tensor({ 1 / 0, 0, -0.0, -1, 0 / 0, -1 / 0 }, "float32"):log2():tolist()
  assert(special[1] == 1 / 0 and special[2] == -1 / 0 and special[3] == -1 / 0)
  for k = 4, 6 do assert(special[k] ~= special[k], "log2 of a negative or NaN is NaN") end
end)

-- The hand-coded opts (engine/codegen/heuristic.cpp) on the shapes their rules were measured on:
-- each kernel gets the opt its rule names, and its values match plain Lua loops.
local function opts_of(t) return table.concat(t:schedule()[#t:schedule()].opts, " ") end
local function rows(t) return t:tolist() end

H.cpu_test("hand-coded opts: a window copy gets a tile over channels, values as a Lua loop", function()
  local x = Tensor.rand(2, 16, 5, 5):realize()
  local cols = x:_pool({ 3, 3 }, { 1, 1 }, { 1, 1 }):permute(0, 2, 3, 1, 4, 5):contiguous()
  assert(opts_of(cols):find("UPCAST%(3, 4%)"), "window copy opts: " .. opts_of(cols))
  local xv, got = rows(x), rows(cols)
  for b = 1, 2 do for oy = 1, 3 do for ox = 1, 3 do for c = 1, 16 do for ky = 1, 3 do for kx = 1, 3 do
    local want = xv[b][c][oy + ky - 1][ox + kx - 1]
    if got[b][oy][ox][c][ky][kx] ~= want then
      error(("cols[%d][%d][%d][%d][%d][%d] = %s, want %s"):format(b, oy, ox, c, ky, kx, got[b][oy][ox][c][ky][kx], want))
    end
  end end end end end end
end)

local function dot_check(a, b, c, picks)
  local av, bv, cv = rows(a), rows(b), rows(c)
  for _, p in ipairs(picks) do
    local i, j, want = p[1], p[2], 0
    for k = 1, #bv do want = want + av[i][k] * bv[k][j] end
    same(cv[i][j], want, 1e-5 * #bv, ("c[%d][%d]"):format(i, j))
  end
end

H.cpu_test("hand-coded opts: a row as wide as two vectors, and a tall matmul in blocks", function()
  local a, b = Tensor.rand(16, 40):realize(), Tensor.rand(40, 26):realize()
  local c = a:matmul(b)
  -- whole: it fits two AVX-512 vectors, and on AVX2 no whole vector divides it (up to 32 floats)
  assert(opts_of(c):find("UPCAST%(1, 26%)"), "26-wide row: " .. opts_of(c))
  local picks = {}
  for i = 1, 16 do for j = 1, 26 do picks[#picks + 1] = { i, j } end end
  dot_check(a, b, c:realize(), picks)
  -- the 65536x64 operand outgrows the cache and every row block of the output reads it: the
  -- reduce runs in blocks, each over all the outputs
  a, b = Tensor.rand(16, 65536):realize(), Tensor.rand(65536, 64):realize()
  c = a:matmul(b)
  assert(opts_of(c):find("BLOCK%(0, "), "tall matmul: " .. opts_of(c))
  dot_check(a, b, c:realize(), { { 1, 1 }, { 16, 64 }, { 7, 33 }, { 9, 2 } })
  -- with a relu after the reduce the output cannot hold partial sums: the loop that re-reads
  -- the 4 MiB operand (which fits the cache) goes outside instead
  local r = a:matmul(b):relu()
  assert(opts_of(r):find("SWAP%(0, 1%)"), "tall matmul + relu: " .. opts_of(r))
  local rv = rows(r)
  same(rv[3][5], math.max(0, rows(c)[3][5]), 1e-5 * 65536)
end)

H.cpu_test("hand-coded opts: a batched matmul stored batch-inside runs batch by batch, values as Lua", function()
  -- out[o][p][t] = sum over i of a[p][o][i] * b[p][i][t]: the 36 x 32 x 2304 operand (10.6 MiB,
  -- past L2) does not depend on o, so the loop over o goes inside the loop over the batch
  local a, b = Tensor.rand(36, 64, 32):realize(), Tensor.rand(36, 32, 2304):realize()
  local c = a:permute(1, 0, 2):reshape(64, 36, 1, 32):matmul(b)
  assert(opts_of(c):find("SWAP%(0, 1%)"), "batch loop first: " .. opts_of(c))
  local got = c:realize():reshape(64, 36, 2304)
  for _, pick in ipairs({ { 1, 1, 1 }, { 64, 36, 2304 }, { 9, 17, 1000 }, { 33, 2, 77 } }) do
    local o, p, t = table.unpack(pick)
    local av = a:shrink({ { p - 1, p }, { o - 1, o }, { 0, 32 } }):reshape(32):tolist()
    local bv = b:shrink({ { p - 1, p }, { 0, 32 }, { t - 1, t } }):reshape(32):tolist()
    local want = 0
    for i = 1, 32 do want = want + av[i] * bv[i] end
    same(got:shrink({ { o - 1, o }, { p - 1, p }, { t - 1, t } }):item(), want, 1e-5 * 32,
      ("c[%d][%d][%d]"):format(o, p, t))
  end
end)

-- Printing floats as numpy does: the shortest digits that read back as the same value of the
-- dtype (at most 8 after the point), one format for all the values shown. The expected bodies
-- were made by numpy 1.24 (Debian's /usr/bin/python3) with
--   np.array2string(a, separator=', ', prefix='Tensor(', max_line_width=10**6)
-- for the `a` named in each comment; moongrad's framing around them (shape, dtype, device) is its own.
test("float tensors print their values as numpy does", function()
  local nan, inf = 0 / 0, math.huge
  local ones = {}
  for i = 1, 2000 do ones[i] = i == 1001 and 0.5 or 1.0 end
  local cases = {
    -- np.array([0.99999994, 1, 1], np.float32)
    { Tensor({ 0.99999994, 1.0, 1.0 }, "float32"), "[0.99999994, 1.        , 1.        ]" },
    -- np.array([1/3, 2/3, 1])
    { Tensor({ 1 / 3, 2 / 3, 1.0 }, "float64"), "[0.33333333, 0.66666667, 1.        ]" },
    -- np.array([1e-5, 1.5e-5], np.float32)
    { Tensor({ 1e-5, 1.5e-5 }, "float32"), "[1.0e-05, 1.5e-05]" },
    -- np.array([1e8, 1], np.float32)
    { Tensor({ 1e8, 1.0 }, "float32"), "[1.e+08, 1.e+00]" },
    -- np.array([1e100, 1])
    { Tensor({ 1e100, 1.0 }, "float64"), "[1.e+100, 1.e+000]" },
    -- np.array([1e7, 1.5])
    { Tensor({ 1e7, 1.5 }, "float64"), "[1.0e+07, 1.5e+00]" },
    -- np.array([-1.5, np.nan, np.inf, -np.inf], np.float32)
    { Tensor({ -1.5, nan, inf, -inf }, "float32"), "[-1.5,  nan,  inf, -inf]" },
    -- np.array([np.nan, 1.0], np.float32)
    { Tensor({ nan, 1.0 }, "float32"), "[nan,  1.]" },
    -- np.array([1.5, -2], np.float32)
    { Tensor({ 1.5, -2.0 }, "float32"), "[ 1.5, -2. ]" },
    -- np.arange(6, dtype=np.float32).reshape(2, 3) / np.float32(7)
    { Tensor({ { 0 / 7, 1 / 7, 2 / 7 }, { 3 / 7, 4 / 7, 5 / 7 } }, "float32"),
      "[[0.        , 0.14285715, 0.2857143 ],\n        [0.42857143, 0.5714286 , 0.71428573]]" },
    -- np.array([0.1, 0.2, 0.3], np.float16)
    { Tensor({ 0.1, 0.2, 0.3 }, "float16"), "[0.1, 0.2, 0.3]" },
    -- np.array([0.1, 0.2, 0.3], np.float32)
    { Tensor({ 0.1, 0.2, 0.3 }, "float32"), "[0.1, 0.2, 0.3]" },
    -- np.array([-0.0, 1.0])
    { Tensor({ -0.0, 1.0 }, "float64"), "[-0.,  1.]" },
    -- np.array([123456.789012345])
    { Tensor({ 123456.789012345 }, "float64"), "[123456.78901235]" },
    -- np.array(0.99999994, np.float32)
    { Tensor(0.99999994, "float32"), "0.99999994" },
    -- np.array([0.012345679], np.float32)
    { Tensor({ 0.012345679 }, "float32"), "[0.01234568]" },
    -- np.array([[1e-3, 2.5], [100, -7]], np.float32)
    { Tensor({ { 1e-3, 2.5 }, { 100.0, -7.0 } }, "float32"), "[[ 1.0e-03,  2.5e+00],\n        [ 1.0e+02, -7.0e+00]]" },
    -- np.array([[1e-5, -2.5e-7], [3e12, 0]])
    { Tensor({ { 1e-5, -2.5e-7 }, { 3e12, 0.0 } }, "float64"), "[[ 1.0e-05, -2.5e-07],\n        [ 3.0e+12,  0.0e+00]]" },
    -- np.array([10416, 20], np.float16): 10420 would read back too, but numpy prints integer digits exactly
    { Tensor({ 10416.0, 20.0 }, "float16"), "[10416.,    20.]" },
    -- np.array([1.3040001e-06, 9.470810e-07], np.float32): padded with the exact value's digits, not zeros
    { Tensor({ 1.3040001e-06, 9.470810e-07 }, "float32"), "[1.3040001e-06, 9.4708099e-07]" },
    -- np.array([1] * 1000 + [0.5] + [1] * 999, np.float32): the format comes from the values shown
    { Tensor(ones, "float32"), "[1., 1., 1., ..., 1., 1., 1.]" },
    -- no numpy bfloat16; by hand: bf16(0.1) = 0.10009765625 reads back from "0.1"; bf16(1/3) =
    -- 0.333984375, its neighbours 1/512 away, so 0.333 and 0.33 do not read back and 0.334 does
    { Tensor({ 0.1, 1 / 3 }, "bfloat16"), "[0.1  , 0.334]" },
  }
  for i, c in ipairs(cases) do
    local s = tostring(c[1])
    local body = s:match("^Tensor%((.*), shape=")
    assert(body == c[2], ("case %d: printed\n%s\nnumpy prints\n%s"):format(i, tostring(body), c[2]))
  end
  -- the framing stays moongrad's
  assert(tostring(Tensor({ 0.5 }, "float32")) == "Tensor([0.5], shape=(1,), dtype=float32, device=" .. Device.DEFAULT .. ")")
end)

test("64-bit integers stay exact from Lua to the device and back (a double holds 53 bits)", function()
  local big, low = math.maxinteger, math.mininteger -- Lua's own 64-bit integers are the reference
  local t = Tensor({ big, low, 9007199254740993 }, "int64")
  local l = t:tolist()
  assert(l[1] == big and l[2] == low and l[3] == 9007199254740993, ("read back %d %d %d"):format(l[1], l[2], l[3]))
  assert(math.type(l[1]) == "integer")
  assert((t - 1):tolist()[1] == big - 1 and t:max():item() == big and t[{ 2 }]:item() == 9007199254740993)
  assert((t + 1):tolist()[1] == low, "int64 arithmetic wraps")
  assert(tostring(t):match("^Tensor%(%[ 9223372036854775807, %-9223372036854775808,     9007199254740993%]"), tostring(t))
  -- uint64 past 2^63: printed exactly; in Lua (no such integer) a float of the right size
  local u = Tensor({ 0 }, "uint64") - 1
  assert(tostring(u):match("^Tensor%(%[18446744073709551615%]"), tostring(u))
  assert(u:item() == 2.0 ^ 64, tostring(u:item()))
end)

test("a padded conv copies its padded input once (not a depthwise one), with the same values", function()
  -- 32 output channels read each input element 32 x 9 times: conv2d writes the padded input out
  -- once (a contiguous copy), so the conv's loads need no bounds checks
  Tensor.manual_seed(7)
  local x, w = Tensor.randn(1, 3, 5, 6):realize(), Tensor.randn(32, 3, 3, 3):realize()
  local y = x:conv2d(w, nil, { padding = 1 })
  local items = y:schedule()
  assert(#items == 2 and items[1].reason == "contiguous", "a copy, then the conv: " .. items[1].reason)
  local X, W, Y = x:tolist(), w:tolist(), y:tolist()
  for o = 1, 32, 7 do
    for i = 1, 5 do
      for j = 1, 6 do
        local want = 0
        for c = 1, 3 do
          for a = 1, 3 do
            for b = 1, 3 do
              local r, q = i + a - 2, j + b - 2
              if r >= 1 and r <= 5 and q >= 1 and q <= 6 then want = want + X[1][c][r][q] * W[o][c][a][b] end
            end
          end
        end
        assert(math.abs(Y[1][o][i][j] - want) < 1e-4, ("y[%d][%d][%d]: %g, want %g"):format(o, i, j, Y[1][o][i][j], want))
      end
    end
  end
  -- a depthwise conv reads each element only 9 times: no copy where the device reads tested
  -- loads as vectors (a GPU, AVX-512); on a CPU without AVX-512 the copy (tensor_conv.lua)
  -- (a new input: x's padded copy is realized already)
  local xd, dw = Tensor.randn(1, 3, 5, 6):realize(), Tensor.randn(3, 1, 3, 3):realize()
  local cpu = (xd.device:match("^CPU") or xd.device:match("^LLVM")) and select(2, Device.machine()).float_lanes < 16
  local yd = xd:conv2d(dw, nil, { padding = 1, groups = 3 })
  assert(#yd:schedule() == (cpu and 2 or 1), "depthwise: " .. #yd:schedule() .. " kernels")
  local XD, D, YD = xd:tolist(), dw:tolist(), yd:tolist()
  for c = 1, 3 do
    for i = 1, 5 do
      for j = 1, 6 do
        local want = 0
        for a = 1, 3 do
          for b = 1, 3 do
            local r, q = i + a - 2, j + b - 2
            if r >= 1 and r <= 5 and q >= 1 and q <= 6 then want = want + XD[1][c][r][q] * D[c][1][a][b] end
          end
        end
        assert(math.abs(YD[1][c][i][j] - want) < 1e-4, ("depthwise y[%d][%d][%d]"):format(c, i, j))
      end
    end
  end
end)

H.cpu_test("a 2x2 max-pool's gradient: split by the pool's 2 and vectorized, values as a Lua loop", function()
  -- each gradient value is read by two neighbouring columns (index x / 2): the kernel is split into
  -- those 2 copies, its loop then reads contiguously and is vectorized (heuristic.cpp,
  -- upcast_repeated_row and vectorize_interleaved_store)
  local x = Tensor.randn(2, 3, 8, 16):realize():requires_grad_()
  local g = Tensor.randn(2, 3, 4, 8):realize()
  ;(x:max_pool2d(2) * g):sum():backward()
  local found = false
  for _, it in ipairs(x.grad:schedule()) do
    local o = table.concat(it.opts, " ")
    found = found or (o:find("UPCAST(3, 2)", 1, true) and o:find("VECTORIZE(3, 0)", 1, true)) ~= nil
  end
  assert(found, "a kernel split by 2 and vectorized")
  local xl, gl, dl = x:tolist(), g:tolist(), x.grad:tolist()
  for n = 1, 2 do
    for c = 1, 3 do
      for i = 1, 8 do
        for j = 1, 16 do
          local pi, pj = (i - 1) // 2, (j - 1) // 2
          local m = -math.huge
          for a = 0, 1 do
            for b = 0, 1 do m = math.max(m, xl[n][c][2 * pi + 1 + a][2 * pj + 1 + b]) end
          end
          local want = xl[n][c][i][j] == m and gl[n][c][pi + 1][pj + 1] or 0
          assert(math.abs(dl[n][c][i][j] - want) < 1e-6, ("(%d,%d,%d,%d): %g, want %g"):format(n, c, i, j, dl[n][c][i][j], want))
        end
      end
    end
  end
end)

H.cpu_test("a concatenation with a transposed piece: split into its pieces, values as a Lua loop", function()
  -- 3 equal pieces along the last dim (the GPT's q, k and v gradients joined): split into the
  -- pieces, upcast, a loop along each (heuristic.cpp, split_joined_pieces); unequal pieces keep
  -- one loop whose transposed piece reads whole lines (upcast_transposed_line)
  for _, widths in ipairs({ { 32, 32, 32 }, { 32, 16, 48 } }) do
    local a = Tensor.randn(2, 24, widths[1]):realize()
    local b = Tensor.randn(2, 4, 24, widths[2] // 4):realize() -- heads merged back
    local c = Tensor.randn(2, widths[3], 24):realize() -- transposed
    local y = Tensor.cat({ a, b:permute(0, 2, 1, 3):reshape(2, 24, widths[2]), c:transpose(1, 2) }, 2)
    local opts = table.concat(y:schedule()[1].opts, " ")
    if widths[1] == widths[3] then
      assert(opts:find("LOCAL(2, 32) UPCAST(2, 3)", 1, true), "equal pieces split: " .. opts)
    end
    local al, bl, cl, yl = a:tolist(), b:tolist(), c:tolist(), y:tolist()
    for n = 1, 2 do
      for t = 1, 24 do
        for j = 1, widths[1] + widths[2] + widths[3] do
          local want
          if j <= widths[1] then
            want = al[n][t][j]
          elseif j <= widths[1] + widths[2] then
            local k = j - widths[1] - 1
            local hd = widths[2] // 4
            want = bl[n][k // hd + 1][t][k % hd + 1]
          else
            want = cl[n][j - widths[1] - widths[2]][t]
          end
          assert(yl[n][t][j] == want, ("%s (%d,%d,%d): %g, want %g"):format(opts, n, t, j, yl[n][t][j], want))
        end
      end
    end
  end
end)


test("a loop whose loads stride far along it is not vectorized (gathers), and its values stay", function()
  -- linearize.cpp's gather_loops: 12 transposes of 32x16, the inner loop reading 16 floats apart
  for _, dev in ipairs({ "CPU", "LLVM" }) do
    local x = Tensor.randn(3, 4, 32, 16, { device = dev }):realize()
    local y = x:permute(0, 1, 3, 2):contiguous()
    local src = y:schedule()[1].src
    local mark = dev == "CPU" and "#pragma clang loop vectorize(disable)" or '!{!"llvm.loop.vectorize.enable", i1 false}'
    assert(src:find(mark, 1, true), dev .. ": the strided loop is marked\n" .. src)
    local xl, yl = x:tolist(), y:tolist()
    for a = 1, 3 do
      for b = 1, 4 do
        for i = 1, 16 do
          for j = 1, 32 do assert(yl[a][b][i][j] == xl[a][b][j][i], ("%s (%d,%d,%d,%d)"):format(dev, a, b, i, j)) end
        end
      end
    end
    -- a contiguous loop is left to the vectorizer
    local z = (x * 2):contiguous()
    assert(not z:schedule()[1].src:find("vectorize.enable\", i1 false", 1, true), dev)
    assert(not z:schedule()[1].src:find("vectorize(disable)", 1, true), dev)
  end
end)

test("clone is a copy in a new buffer: assigning to the original afterwards leaves it, gradients pass", function()
  local a = Tensor({ 1, 2, 3 }, { dtype = "int32" }):realize()
  local b = a:clone():realize()
  a:assign(Tensor({ 7, 8, 9 }, { dtype = "int32" })):realize()
  same(b:tolist(), { 1, 2, 3 })
  same(a:tolist(), { 7, 8, 9 })
  assert(b.dtype == "int32", b.dtype)
  local x = Tensor({ 1.5, -2, 3 }):requires_grad_()
  ;(x:clone() * x):sum():backward()
  same(x.grad:tolist(), { 3.0, -4.0, 6.0 }) -- d(x*x)/dx through the clone
  local z = Tensor.arange(12):reshape(3, 4)
  same(z.T:clone():tolist(), z.T:tolist())
end)

H.done()
