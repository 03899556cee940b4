-- 01_tensor_basics.lua: Project 1 of the guide. Tensors, lazy evaluation and fusion.
--   1. every factory method, with its shape and dtype
--   2. (a + b):relu():sum() is ONE kernel (DEBUG=1 shows the count)
--   3. the ADD, the RELU and the SUM inside that kernel's C source (DEBUG=3 prints it)
--   4. realize() after every op breaks fusion: 3 kernels, more memory traffic, slower
--   5. the schedule before and after a realize()
-- Every claim is asserted. At the prompt the same things are :debug 1, :src EXPR, :schedule EXPR.
local lesson = require "lesson"
local section, same, count_kernels, find_in = lesson.section, lesson.same, lesson.count_kernels, lesson.find_in

------------------------------------------------------------------------------
section("1. Factory methods: shapes and dtypes")

Tensor.manual_seed(1)
local made = {
  { "Tensor{1, 2, 3}", Tensor { 1, 2, 3 }, { 3 }, "int32" },
  { "Tensor{1.5, 2}", Tensor { 1.5, 2 }, { 2 }, "float32" },
  { "Tensor{{true}, {false}}", Tensor { { true }, { false } }, { 2, 1 }, "bool" },
  { "Tensor.zeros(2, 3)", Tensor.zeros(2, 3), { 2, 3 }, "float32" },
  { "Tensor.ones(4, {dtype='int8'})", Tensor.ones(4, { dtype = "int8" }), { 4 }, "int8" },
  { "Tensor.full({2, 2}, 7)", Tensor.full({ 2, 2 }, 7), { 2, 2 }, "int32" },
  { "Tensor.arange(0, 10, 2)", Tensor.arange(0, 10, 2), { 5 }, "int32" },
  { "Tensor.arange(0, 1, 0.25)", Tensor.arange(0, 1, 0.25), { 4 }, "float32" },
  { "Tensor.eye(3)", Tensor.eye(3), { 3, 3 }, "float32" },
  { "Tensor.rand(2, 3)", Tensor.rand(2, 3), { 2, 3 }, "float32" },
  { "Tensor.randn(1000)", Tensor.randn(1000), { 1000 }, "float32" },
  { "Tensor.empty(5, {dtype='float16'})", Tensor.empty(5, { dtype = "float16" }), { 5 }, "float16" },
}
print(("%-36s %-12s %s"):format("expression", "shape", "dtype"))
lesson.plot("image", Tensor.arange(0, 64):reshape(8, 8), { title = "Tensor.arange(0, 64):reshape(8, 8)" })
for _, m in ipairs(made) do
  local expr, t, shape, dtype = m[1], m[2], m[3], m[4]
  print(("%-36s %-12s %s"):format(expr, "(" .. table.concat(t.shape, ", ") .. ")", t.dtype))
  same(t.shape, shape, nil, expr .. " shape")
  assert(t.dtype == dtype, ("%s: dtype %s, expected %s"):format(expr, t.dtype, dtype))
end

-- the values, against what each method promises
same(Tensor.zeros(2, 3):tolist(), { { 0, 0, 0 }, { 0, 0, 0 } })
same(Tensor.full({ 2, 2 }, 7):tolist(), { { 7, 7 }, { 7, 7 } })
same(Tensor.arange(0, 10, 2):tolist(), { 0, 2, 4, 6, 8 })
same(Tensor.arange(0, 1, 0.25):tolist(), { 0, 0.25, 0.5, 0.75 })
local eye = Tensor.eye(3):tolist()
for i = 1, 3 do
  for j = 1, 3 do assert(eye[i][j] == (i == j and 1 or 0), "eye(3) is not the identity") end
end
for _, row in ipairs(Tensor.rand(2, 3):tolist()) do
  for _, v in ipairs(row) do assert(v >= 0 and v < 1, "rand gave " .. v) end
end
local z = Tensor.randn(1000):tolist()
local mean, var = 0, 0
for _, v in ipairs(z) do mean = mean + v / #z end
for _, v in ipairs(z) do var = var + (v - mean) ^ 2 / #z end
print(("randn(1000): mean %.3f, std %.3f (a standard normal: 0 and 1)"):format(mean, math.sqrt(var)))
assert(math.abs(mean) < 0.15 and math.abs(math.sqrt(var) - 1) < 0.15, "randn is not standard normal")
print("\nA tensor prints like numpy (values realized on demand):")
print(Tensor.arange(0, 6):reshape(2, 3))

------------------------------------------------------------------------------
section("2. Lazy evaluation and fusion: (a + b):relu():sum() is ONE kernel")

local n = 1 << 20
local a = Tensor.rand(n):realize()
local b = Tensor.randn(n):realize()
local expr = (a + b):relu():sum()
print("expr = (a + b):relu():sum() is a graph; nothing has run. Its UOps:")
print(expr.uop)
local k, _ = count_kernels(function()
  Context({ DEBUG = 1 }, function() expr:realize() end) -- DEBUG=1 prints the "*** realize" line
end)
print(("realizing it ran %d kernel"):format(k))
assert(k == 1, "add, relu and sum must fuse into 1 kernel, got " .. k)
local al, bl = a:tolist(), b:tolist()
local want = 0
for i = 1, n do want = want + math.max(al[i] + bl[i], 0) end
print(("sum = %.4f; plain Lua gives %.4f"):format(expr:item(), want))
assert(math.abs(expr:item() - want) <= 1e-4 * want, "the fused sum is wrong")

------------------------------------------------------------------------------
section("3. Reading the kernel (DEBUG=3): where are the ADD, the RELU and the SUM?")

local small_a, small_b = Tensor.rand(16):realize(), Tensor.rand(16):realize()
print("First with NOOPT=1 (no hand-coded opts), where the C reads like the math:")
Context({ NOOPT = 1 }, function()
  local plain = (small_a + small_b):relu():sum():schedule()[1]
  print(plain.src)
  find_in(plain.src, "for %(int ridx0 = 0; ridx0 < 16;", "the reduce loop")
  find_in(plain.src, "= %(val%d+%+val%d+%)", "the ADD (a + b)")
  find_in(plain.src, "%(0%.0f<alu%d+%)%?alu%d+:0%.0f", "the RELU (x > 0 ? x : 0)")
  find_in(plain.src, "acc0 = %(acc0%+", "the SUM (accumulate)")
end)
-- A max reduction is unrolled: 8 elements per trip, each into its own accumulator (8 chains
-- the CPU runs side by side, which clang packs into one vector register).
local mx = (small_a + small_b):relu():max():schedule()[1]
print("\nThe default kernel for max (what DEBUG=3 prints) unrolls the reduce loop: 2 trips of 8,")
print("8 accumulators, combined once after the loop:")
print(mx.src)
find_in(mx.src, "for %(int ridx0 = 0; ridx0 < 2;", "2 trips of 8")
local _, accs = mx.src:gsub("float acc%d+ = ", "")
print(("  %d accumulators"):format(accs))
assert(accs == 8, "expected 8 accumulators for the unrolled max")
-- A sum stays one loop, but C adds floats strictly in order, which forbids vectors; the
-- accumulate line allows the additions to be reordered, and clang splits it into vector lanes.
local item = (small_a + small_b):relu():sum():schedule()[1]
print("\nThe default kernel for sum keeps one loop and lets clang reorder the additions:")
print(item.src)
find_in(item.src, "for %(int ridx0 = 0; ridx0 < 16;", "one loop of 16")
find_in(item.src, '_Pragma%("clang fp reassociate%(on%)"%) acc0 = %(acc0%+red0%)', "the reorderable accumulate")

------------------------------------------------------------------------------
section("4. Breaking fusion: realize() after every op")

-- Fresh inputs each time: a graph already realized once is not computed again.
local function inputs() return Tensor.rand(n):realize(), Tensor.randn(n):realize() end
local function fused(x, y) return (x + y):relu():sum():realize() end
local function eager(x, y)
  local s1 = (x + y):realize()
  local s2 = s1:relu():realize()
  return s2:sum():realize()
end
fused(inputs()) -- once each so that compiling is not timed
eager(inputs())
local function timed(fn)
  local x, y = inputs()
  local t0 = show.clock()
  local log, result = show.kernel_log(fn, x, y)
  return show.clock() - t0, log, result, x, y
end
local t_fused, log_fused, r_fused, x1, y1 = timed(fused)
local t_eager, log_eager = timed(eager)
local function bytes(log)
  local s = 0
  for _, r in ipairs(log) do s = s + r.bytes end
  return s
end
print(("fused: %d kernel,  %5.1f MB moved, %7.3f ms"):format(#log_fused, bytes(log_fused) / 1e6, t_fused * 1e3))
print(("eager: %d kernels, %5.1f MB moved, %7.3f ms"):format(#log_eager, bytes(log_eager) / 1e6, t_eager * 1e3))
assert(#log_fused == 1 and #log_eager == 3, "expected 1 fused kernel and 3 eager ones")
assert(bytes(log_eager) > 1.9 * bytes(log_fused), "the eager version should move about twice the bytes")
print("The eager version writes two 4 MB intermediates and reads them back: that is the")
print("memory traffic fusion saves. (Times vary run to run; the byte counts do not.)")
same(eager(x1, y1):item(), r_fused:item(), 1e-3 * want)

------------------------------------------------------------------------------
section("5. The schedule before and after realize()")

local x = Tensor.rand(8, 8):realize()
local h = (x * 2 + 1):exp()
local out = h:sum(1)
local before = out:schedule()
print(("out = ((x*2+1):exp()):sum(1): %d kernel planned, h and out computed together:"):format(#before))
for i, it in ipairs(before) do print(("  [%d] %s  %s"):format(i, it.name, table.concat(it.bufs, " "))) end
assert(#before == 1, "h fuses into the sum")
h:realize()
local after = out:schedule()
print(("after h:realize(): still %d kernel, but it now LOADs h's buffer instead of recomputing:"):format(#after))
for i, it in ipairs(after) do print(("  [%d] %s  %s"):format(i, it.name, table.concat(it.bufs, " "))) end
assert(#after == 1, "one kernel left")
assert(before[1].ast:find("EXP2") and not after[1].ast:find("EXP2"), "after realize the exp is read, not recomputed")
out:realize()
print(("after out:realize(): %d kernels left to run"):format(#out:schedule()))
assert(#out:schedule() == 0)

print("\nAll checks passed. At the prompt: :debug 1, then try :src (a + b):relu():sum()")
