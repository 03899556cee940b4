-- Packing a matmul's streamed operand into panels (engine/pack.h): where the rule fires, the
-- schedule gains a pack kernel, and the products are those of a hand-written triple loop. CTest
-- runs this file under the machine's own vector profile and under MG_VECTOR_WIDTH=8 and 16, whose
-- panels are 16 and 32 wide, each with MG_L2_KB=128: a B with contiguous rows is packed only
-- where it outgrows a quarter of L2, and these are kept small for the Lua reference.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
Tensor.manual_seed(5)

local PACK = "copied into panels"
local ROWS = "read across its rows"

-- C = A @ B for nested lists (batched when A's rows are lists of lists)
local function matmul(a, b)
  if type(a[1][1]) == "table" then
    local c = {}
    for i = 1, #a do c[i] = matmul(a[i], b[i]) end
    return c
  end
  local c = {}
  for i = 1, #a do
    local row, ai = {}, a[i]
    for j = 1, #b[1] do row[j] = 0 end
    for k = 1, #b do
      local aik, bk = ai[k], b[k]
      for j = 1, #bk do row[j] = row[j] + aik * bk[j] end
    end
    c[i] = row
  end
  return c
end

local function transpose(m)
  local t = {}
  for j = 1, #m[1] do
    t[j] = {}
    for i = 1, #m do t[j][i] = m[i][j] end
  end
  return t
end


local function reasons(t, text)
  local n = 0
  for _, it in ipairs(t:schedule()) do
    if it.reason:find(text, 1, true) then n = n + 1 end
  end
  return n
end
local function packs(t) return reasons(t, PACK) end

local lanes = select(2, Device.machine()).float_lanes
-- B of 256 x 256 float32 with contiguous rows is packed only where it outgrows a quarter of L2
local l2 = select(2, Device.machine()).l2
local rows_packed = 4 * 256 * 256 * 4 > l2 and 1 or 0

test("A @ B: B packed once, the product that of a triple loop", function()
  local a, b = Tensor.randn(128, 256):realize(), Tensor.randn(256, 256):realize()
  local c = a:matmul(b)
  assert(packs(c) == rows_packed, "one pack kernel")
  H.same(c:tolist(), matmul(a:tolist(), b:tolist()), 1e-3)
end)

test("A @ B with B at most a quarter of L2: left as it is", function()
  local k = 16
  while 4 * k * 128 * 4 <= l2 and k < 512 do k = 2 * k end -- the longest reduce that fits
  k = k // 2
  local a, b = Tensor.randn((1 << 22) // (k * 128), k):realize(), Tensor.randn(k, 128):realize()
  local c = a:matmul(b)
  assert(packs(c) == 0, "no pack kernel")
  H.same(c:tolist(), matmul(a:tolist(), b:tolist()), 1e-3)
end)

test("x @ W.T: the transposed weight packed (its rows were the reduce)", function()
  local x, w = Tensor.randn(96, 128):realize(), Tensor.randn(384, 128):realize()
  local y = x:matmul(w:transpose())
  assert(packs(y) == 1, "one pack kernel")
  H.same(y:tolist(), matmul(x:tolist(), transpose(w:tolist())), 1e-3)
end)

test("a batched matmul: each batch's B in panels of its own", function()
  local a, b = Tensor.randn(2, 128, 128):realize(), Tensor.randn(2, 128, 256):realize()
  local c = a:matmul(b)
  assert(packs(c) == rows_packed, "one pack kernel")
  H.same(c:tolist(), matmul(a:tolist(), b:tolist()), 1e-3)
end)

test("gradients through packed matmuls: dA = G @ B.T, dB = A.T @ G", function()
  local a = Tensor.randn(128, 256):realize():requires_grad_()
  local b = Tensor.randn(256, 256):realize():requires_grad_()
  local g = Tensor.randn(128, 256):realize()
  local c = a:matmul(b)
  assert(packs(c) == rows_packed, "the forward packs")
  ;(c * g):sum():backward()
  Tensor.realize_all { a.grad, b.grad }
  H.same(a.grad:tolist(), matmul(g:tolist(), transpose(b:tolist())), 1e-3, "dA")
  H.same(b.grad:tolist(), matmul(transpose(a:tolist()), g:tolist()), 1e-3, "dB")
end)


test("operands that are not one plain view: each computed once, then the packed product", function()
  -- attention's heads merged back: (B, H, T, D) -> (B, T, H*D), a reshape of a transpose
  local y, w = Tensor.randn(4, 4, 32, 16):realize(), Tensor.randn(512, 64):realize()
  local x = y:transpose(1, 2):reshape(4, 32, 64)
  local out = x:matmul(w:transpose())
  assert(packs(out) == 1 and reasons(out, "computed once") == 1, "the merged heads copied out once")
  local want = matmul(x:contiguous():tolist(), { transpose(w:tolist()), transpose(w:tolist()),
    transpose(w:tolist()), transpose(w:tolist()) })
  H.same(out:tolist(), want, 1e-3)
  -- a concatenation (masked loads) as the broadcast operand
  local p, q = Tensor.randn(128, 100):realize(), Tensor.randn(128, 156):realize()
  local b = Tensor.randn(256, 256):realize()
  local c = Tensor.cat({ p, q }, 1):matmul(b)
  assert(reasons(c, "computed once") == 1, "the concatenation computed once")
  H.same(c:tolist(), matmul(Tensor.cat({ p, q }, 1):tolist(), b:tolist()), 1e-3)
end)

test("a weight gradient reduces over batch and tokens: both reduce dims go into the panels", function()
  local x = Tensor.randn(4, 64, 64):realize()
  local g = Tensor.randn(4, 64, 256):realize()
  -- dW[j][c] = sum over b, t of g[b][t][j] * x[b][t][c], as autograd builds it for x @ W.T
  local dw = (g:reshape(4, 64, 256, 1) * x:reshape(4, 64, 1, 64)):sum({ 0, 1 })
  assert(packs(dw) == 1, "one pack kernel")
  -- g is read across its rows (dW's rows are g's columns): copied once, batch and tokens innermost
  assert(reasons(dw, ROWS) == 1, "g copied with its rows streamed")
  local gl, xl = g:reshape(256, 256):tolist(), x:reshape(256, 64):tolist()
  H.same(dw:tolist(), matmul(transpose(gl), xl), 1e-3)
end)

test("an operand read across its rows is copied only where 64 columns or more read each element", function()
  -- A.T @ B over 32 columns (Winograd's dU is such a product): the copy would cost as much as it saves
  local a, b = Tensor.randn(512, 256):realize(), Tensor.randn(512, 32):realize()
  local c = a:transpose():matmul(b)
  assert(reasons(c, ROWS) == 0, "no copy for 32 columns")
  H.same(c:tolist(), matmul(transpose(a:tolist()), b:tolist()), 1e-3)
  local d = Tensor.randn(512, 64):realize()
  local e = a:transpose():matmul(d)
  assert(reasons(e, ROWS) == 1, "a copy for 64")
  H.same(e:tolist(), matmul(transpose(a:tolist()), d:tolist()), 1e-3)
end)

test("a width no panel divides, and a small matmul: no pack, the same products", function()
  local n = lanes * 12 + lanes // 2 -- a multiple of neither a vector nor two
  local a, b = Tensor.randn(128, 256):realize(), Tensor.randn(256, n):realize()
  local c = a:matmul(b)
  assert(packs(c) == 0, "no pack for width " .. n)
  H.same(c:tolist(), matmul(a:tolist(), b:tolist()), 1e-3)
  local s, t = Tensor.randn(16, 32):realize(), Tensor.randn(32, 64):realize()
  assert(packs(s:matmul(t)) == 0, "a 16x32x64 matmul is too small to repay a pack")
  H.same(s:matmul(t):tolist(), matmul(s:tolist(), t:tolist()), 1e-4)
end)

test("NOOPT leaves the schedule as written", function()
  local a, b = Tensor.randn(128, 256):realize(), Tensor.randn(256, 256):realize()
  Context({ NOOPT = 1 }, function()
    assert(packs(a:matmul(b)) == 0, "NOOPT packs nothing")
  end)
  assert(packs(a:matmul(b)) == rows_packed)
end)

test("the tile's accumulators as vectors (engine/codegen/slp.h): the products those of a triple loop", function()
  -- rows of the profile's lanes: each row of the tile one vector of mg_float<lanes>; then with a
  -- bias and a scale after it (a kernel of their own), and a row no vector fills (scalars as before)
  local a, b = Tensor.randn(96, 128):realize(), Tensor.randn(128, 64):realize()
  local bias = Tensor.randn(64):realize()
  local vec = "mg_float" .. lanes .. " acc"
  local src = show.try_opts(a:matmul(b)).src -- before the product is realized (a graph is realized once)
  if a.device == "CPU" then assert(src:find(vec, 1, true), "the tile's rows as " .. vec .. ":\n" .. src) end
  for _, case in ipairs({
    { a:matmul(b), matmul(a:tolist(), b:tolist()) },
    { (a:matmul(b) + bias) * 0.5, nil },
  }) do
    local y, want = case[1], case[2]
    if not want then
      want = matmul(a:tolist(), b:tolist())
      local bl = bias:tolist()
      for i = 1, #want do
        for j = 1, #want[1] do want[i][j] = (want[i][j] + bl[j]) * 0.5 end
      end
    end
    H.same(y:tolist(), want, 1e-3)
  end
  local c, d = Tensor.randn(24, 40):realize(), Tensor.randn(40, 26):realize()
  src = show.try_opts(c:matmul(d)).src
  assert(not src:find("mg_float", 1, true), "a 26-wide row stays scalar")
  H.same(c:matmul(d):tolist(), matmul(c:tolist(), d:tolist()), 1e-4)
end)

test("a transpose: a vector's rows by 4 columns a step, each row's 4 floats one load, moved by shuffles", function()
  -- the store's rows upcast by a line and the rows read by 4 (heuristic.cpp, upcast_transposed_line):
  -- the copies are packs (engine/codegen/slp.h), each read row's run of 4 a LoadGroup
  local x = Tensor.randn(96, 768):realize()
  local y = x:transpose():contiguous()
  local it = y:schedule()[1]
  if x.device == "CPU" then
    assert(it.src:find("__builtin_shufflevector", 1, true), "transposed runs:\n" .. it.src)
    assert(table.concat(it.opts, " "):find("UPCAST(0, 4)", 1, true), "4 columns a step: " .. table.concat(it.opts, " "))
  end
  local xl, yl = x:tolist(), y:tolist()
  for i = 1, 96 do
    for j = 1, 768 do
      if yl[j][i] ~= xl[i][j] then error(("y[%d][%d] = %g, x[%d][%d] = %g"):format(j, i, yl[j][i], i, j, xl[i][j])) end
    end
  end
end)

H.done()
