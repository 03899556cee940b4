-- 02_op_types.lua: Project 2 of the guide. The three kinds of ops and what each generates.
--   1. elementwise ops (relu, * 2, exp): one loop, one line of math each
--   2. reduce ops (sum, max over an axis): a loop with an accumulator
--   3. movement ops (reshape, permute, expand): 0 kernels, only the ShapeTracker changes
--   4. a mixed expression: predict the kernel count, then check it
--   5. matmul by hand (reshape + expand + multiply + sum) equals matmul
-- Every claim is asserted. At the prompt: :src x:relu(), :kernels EXPR, x.st.
local lesson = require "lesson"
local section, same, count_kernels, find_in = lesson.section, lesson.same, lesson.count_kernels, lesson.find_in

local function src_of(t) -- the one kernel t needs, as NOOPT=1 renders it (plain loops, easy to read)
  return Context({ NOOPT = 1 }, function()
    local items = t:schedule()
    assert(#items == 1, ("expected one kernel, got %d"):format(#items))
    return items[1].src, items[1].name -- rendered while NOOPT is on
  end)
end

Tensor.manual_seed(2)
local x = Tensor.randn(4, 4):realize()
local xl = x:tolist()

------------------------------------------------------------------------------
section("1. Elementwise ops: one output element per input element")

local elementwise = {
  { "x:relu()", x:relu(), "%(0%.0f<val0%)%?val0:0%.0f", "relu as a select", function(v) return math.max(v, 0) end },
  { "x * 2", x * 2, "%(val0%*2%.0f%)", "the multiply", function(v) return v * 2 end },
  { "x:exp()", x:exp(), "exp2f%(%(val0%*1%.442695", "exp as exp2(x * log2(e))", math.exp },
}
for _, e in ipairs(elementwise) do
  local expr, t, pattern, what, ref = e[1], e[2], e[3], e[4], e[5]
  local src, name = src_of(t)
  print(("%s -> kernel %s:"):format(expr, name))
  print(src)
  assert(name:match("^E_"), "an elementwise kernel's name starts with E_")
  find_in(src, pattern, what)
  local want = {}
  for i = 1, 4 do
    want[i] = {}
    for j = 1, 4 do want[i][j] = ref(xl[i][j]) end
  end
  same(t:tolist(), want, 1e-5, expr)
  print()
end
print("exp is not a primitive: tinygrad's op set has EXP2, so exp(x) = exp2(x * 1/ln 2).")
local grid = Tensor.linspace(-3, 3, 61)
lesson.plot("line", grid, { grid:relu(), grid:sigmoid(), grid:tanh() }, { title = "elementwise ops on [-3, 3]",
  labels = { "relu", "sigmoid", "tanh" }, xlabel = "x" })

------------------------------------------------------------------------------
section("2. Reduce ops: a loop with an accumulator")

local src, name = src_of(x:sum())
print("x:sum() -> kernel " .. name .. ":")
print(src)
assert(name:match("^r_"), "a reducing kernel's name starts with r_")
find_in(src, "float acc0 = 0%.0f;", "accumulator starts at 0")
find_in(src, "for %(int ridx0 = 0; ridx0 < 4;", "reduce loop, axis 0")
find_in(src, "for %(int ridx1 = 0; ridx1 < 4;", "reduce loop, axis 1")
find_in(src, "acc0 = %(acc0%+val0%);", "accumulate")
print("(NOOPT keeps one loop per axis; by default adjacent axes merge into one loop of 16.)")

src, name = src_of(x:max(0))
print("\nx:max(0) -> kernel " .. name .. ": an output loop (gidx) around a reduce loop (ridx):")
print(src)
find_in(src, "for %(int gidx1 = 0; gidx1 < 4;", "one output per column")
find_in(src, "float acc0 = %(%-INFINITY%);", "max starts at -inf")
find_in(src, "for %(int ridx0 = 0; ridx0 < 4;", "reduce down the column")
find_in(src, "data1%[%(%(ridx0%*4%)%+gidx1%)%]", "stride 4 between rows")
-- a float max is a select that keeps a NaN (engine/codegen/semantics.h decides it for every backend)
find_in(src, "acc0 = %(%(%(val0<acc0%)|%(acc0!=acc0%)%)%?acc0:val0%)", "keep the larger (NaN wins)")

local want_sum, want_max = 0, {}
for j = 1, 4 do
  want_max[j] = -math.huge
  for i = 1, 4 do
    want_sum = want_sum + xl[i][j]
    want_max[j] = math.max(want_max[j], xl[i][j])
  end
end
same(x:sum():item(), want_sum, 1e-5, "sum")
same(x:max(0):tolist(), want_max, 0, "max(0)")

------------------------------------------------------------------------------
section("3. Movement ops: 0 kernels, the ShapeTracker changes")

local moved = {
  { "x:reshape(2, 8)", x:reshape(2, 8) },
  { "x:permute(1, 0)", x:permute(1, 0) },
  { "x:reshape(1, 4, 4):expand(3, 4, 4)", x:reshape(1, 4, 4):expand(3, 4, 4) },
  { "x:permute(1, 0):reshape(16)", x:permute(1, 0):reshape(16) },
}
for _, m in ipairs(moved) do
  local expr, t = m[1], m[2]
  local k = count_kernels(function() Context({ DEBUG = 2 }, function() t:realize() end) end)
  print(("%-36s %d kernels   %s"):format(expr, k, tostring(t.st)))
  assert(k == 0, expr .. " ran a kernel")
end
local p = x:permute(1, 0)
local pv = p.st.views[#p.st.views]
same(pv.strides, { 1, 4 }, nil, "permuted strides")
local e = x:reshape(1, 4, 4):expand(3, 4, 4)
same(e.st.views[1].strides, { 0, 4, 1 }, nil, "expanded strides")
print("\nA view costs nothing until something reads it; then the index math is fused into")
print("that kernel. (x:permute(1, 0) + 1) reads x with swapped strides:")
src = src_of(p + 1)
print(src)
find_in(src, "data1%[%(gidx0%+%(gidx1%*4%)%)%]", "the transposed read")
local tl = (p + 1):tolist()
for i = 1, 4 do
  for j = 1, 4 do same(tl[i][j], xl[j][i] + 1, 1e-6, "transpose + 1") end
end

------------------------------------------------------------------------------
section("4. Mixed: predict the kernel count of (x:permute(1,0) @ y:reshape(4,4)):sum(1)")

local y = Tensor.randn(16):realize()
local mixed = x:permute(1, 0):matmul(y:reshape(4, 4)):sum(1)
print("Prediction: permute and reshape are views (0 kernels). matmul is a reduce (1 kernel).")
print("sum(1) reduces the matmul's output: a second reduce over a reduce, so a second kernel.")
local predicted = 2
local items = mixed:schedule()
print(("The schedule has %d kernels: %s"):format(#items, table.concat(lesson.names(items), ", ")))
assert(#items == predicted, ("predicted %d kernels, the schedule has %d"):format(predicted, #items))
local k = count_kernels(function() Context({ DEBUG = 1 }, function() mixed:realize() end) end)
assert(k == predicted, ("predicted %d kernels, %d ran"):format(predicted, k))
local xt = {}
for i = 1, 4 do
  xt[i] = {}
  for j = 1, 4 do xt[i][j] = xl[j][i] end
end
local yl = y:tolist()
local ym = {}
for i = 1, 4 do ym[i] = { yl[4 * i - 3], yl[4 * i - 2], yl[4 * i - 1], yl[4 * i] } end
local prod = lesson.matmul(xt, ym)
local want = {}
for i = 1, 4 do want[i] = prod[i][1] + prod[i][2] + prod[i][3] + prod[i][4] end
same(mixed:tolist(), want, 1e-4, "mixed")
print("Values match a plain-Lua transpose, matrix product and row sum.")

------------------------------------------------------------------------------
section("5. matmul by hand: reshape + expand + multiply + sum")

local a = Tensor.randn(3, 5):realize()
local b = Tensor.randn(5, 2):realize()
-- (3,5) -> (3,5,1) -> (3,5,2)  times  (5,2) -> (1,5,2) -> (3,5,2), then sum over the 5
local by_hand = (a:reshape(3, 5, 1):expand(3, 5, 2) * b:reshape(1, 5, 2):expand(3, 5, 2)):sum(1)
local kb = #by_hand:schedule()
print(("%d kernel: the expands are stride-0 views, the multiply fuses into the sum"):format(kb))
assert(kb == 1)
print("a:reshape(3,5,1):expand(3,5,2) * b:reshape(1,5,2):expand(3,5,2), summed over axis 1:")
print(by_hand)
same(by_hand:tolist(), a:matmul(b):tolist(), 1e-5, "by hand vs matmul")
same(by_hand:tolist(), lesson.matmul(a:tolist(), b:tolist()), 1e-5, "by hand vs plain Lua")
print("It equals a:matmul(b) and a plain-Lua triple loop.")
local ops = {}
for _, u in ipairs(a:matmul(b).uop:toposort()) do ops[u.op] = true end
for _, op in ipairs({ "RESHAPE", "EXPAND", "MUL", "REDUCE_AXIS" }) do
  assert(ops[op], "a:matmul(b).uop has no " .. op)
end
assert(not ops.MATMUL, "there is no MATMUL op")
print("a:matmul(b).uop is the same kind of graph: RESHAPE, EXPAND, MUL, REDUCE_AXIS; no MATMUL op.")

print("\nAll checks passed.")
