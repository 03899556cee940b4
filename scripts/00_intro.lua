-- 00_intro.lua: run this first. moongrad's three big ideas, shown and checked:
--   1. lazy evaluation: tensor expressions build a graph; nothing runs until realize()
--   2. fusion: a chain of elementwise ops becomes ONE kernel
--   3. zero-copy movement: reshape/permute/expand only change a ShapeTracker (metadata)
-- Every claim below is asserted, so this script doubles as a test.
-- Try it again with DEBUG=2 (kernel names and times) or DEBUG=3 (the generated C source).

local function kernels() return GlobalCounters.kernel_count end

local lesson = require "lesson" -- section(), same(): helpers the scripts share
local section, same = lesson.section, lesson.same

print("Welcome to moongrad: tinygrad's ideas, in C++ with Lua in front.")
print("Default device: " .. Device.DEFAULT)

------------------------------------------------------------------------------
section("1. Lazy evaluation: building an expression runs nothing")

local a = Tensor { 1, 2, 3, 4 }
local before = kernels()
local b = (a + 1) * 2
print("a = " .. tostring(a))
print("b = (a + 1) * 2 is built. Kernels run while building: " .. (kernels() - before))
assert(kernels() == before, "building (a+1)*2 must not run a kernel")

print("\nb is only a graph of UOps so far (b.uop):")
print(b.uop)
print("\nThe schedule says what realize() would run, still without running it:")
local sched = b:schedule()
print(("%d kernel(s) planned"):format(#sched))
assert(#sched == 1, "(a+1)*2 should be planned as 1 kernel, got " .. #sched)
assert(kernels() == before, "schedule() must not run anything")

b:realize()
print(("\nb:realize() ran %d kernel: b = %s"):format(kernels() - before, tostring(b)))
assert(kernels() - before == 1, "realizing (a+1)*2 should run exactly 1 kernel")

-- Check the numbers against plain Lua arithmetic.
local want = {}
for i, v in ipairs({ 1, 2, 3, 4 }) do want[i] = (v + 1) * 2 end
same(b:tolist(), want)
print("b:tolist() matches plain Lua: { " .. table.concat(want, ", ") .. " }")

------------------------------------------------------------------------------
section("2. Fusion: three elementwise ops, one kernel")

local xs = { -1.5, 0.0, 0.5, 2.0, 3.25 }
local x = Tensor(xs):realize()

before = kernels()
local fused = ((x * 3) + 1):relu()
fused:realize()
local n_fused = kernels() - before
print(("((x * 3) + 1):relu() realized at the end: %d kernel"):format(n_fused))
assert(n_fused == 1, "a 3-op elementwise chain realized once should be 1 kernel, got " .. n_fused)

before = kernels()
local step1 = (x * 3):realize()
local step2 = (step1 + 1):realize()
local step3 = step2:relu():realize()
local n_eager = kernels() - before
print(("the same chain realized after every op:   %d kernels"):format(n_eager))
assert(n_eager == 3, "realizing after each of 3 ops should be 3 kernels, got " .. n_eager)

want = {}
for i, v in ipairs(xs) do want[i] = math.max(v * 3 + 1, 0.0) end
same(fused:tolist(), want, 1e-6)
same(step3:tolist(), want, 1e-6)
print("both give { " .. table.concat(want, ", ") .. " }, as plain Lua does")
lesson.plot("line", xs, want, { title = "((x * 3) + 1):relu()", xlabel = "x" })
print("Fusion saves memory traffic: the fused kernel reads x once and writes once;")
print("the eager version writes and re-reads two intermediate buffers.")

print("\nThe one fused kernel, as C source (what DEBUG=3 prints):")
local item = (((x * 3) + 1):relu()):schedule()[1]
print(item.src)

-- Elementwise work also fuses into the reduction that consumes it.
before = kernels()
local total = ((x * 3) + 1):relu():sum()
total:realize()
assert(kernels() - before == 1, "elementwise ops feeding a sum should fuse into 1 kernel")
local want_total = 0
for _, v in ipairs(want) do want_total = want_total + v end
same(total:item(), want_total, 1e-5)
print(("relu(x*3+1):sum() = %g in 1 kernel (plain Lua: %g)"):format(total:item(), want_total))

------------------------------------------------------------------------------
section("3. Zero-copy movement: reshape, permute and expand are metadata")

local m = Tensor { { 0, 1, 2, 3 }, { 4, 5, 6, 7 }, { 8, 9, 10, 11 } }:realize()
print("m, shape (3, 4):")
print(m)
print("\nm.st: one View over the buffer, row-major strides (4, 1):")
print(m.st)

before = kernels()
local t = m:permute(1, 0)
print("\nm:permute(1, 0).st: same buffer, strides swapped to (1, 4):")
print(t.st)
local r = m:permute(1, 0):reshape(2, 6)
print("\nm:permute(1, 0):reshape(2, 6).st: no single View can say this, so a second one stacks:")
print(r.st)
local e = m:reshape(1, 3, 4):expand(2, 3, 4)
print("\nm:reshape(1, 3, 4):expand(2, 3, 4).st: broadcasting is stride 0, no copy:")
print(e.st)
assert(kernels() == before, "movement ops must not run kernels while building")
print(("\nKernels run by all that movement: %d"):format(kernels() - before))

local tv = t.st.views[#t.st.views]
same(tv.strides, { 1, 4 }, nil, "permuted strides")
local ev = e.st.views[#e.st.views]
assert(ev.strides[1] == 0, "an expanded dim has stride 0, got " .. ev.strides[1])

-- The values still come out right: element [i][j] of the transpose is m[j][i].
local ml, tl = m:tolist(), t:tolist()
for i = 1, 4 do
  for j = 1, 3 do assert(tl[i][j] == ml[j][i], ("transpose[%d][%d] should be %d"):format(i, j, ml[j][i])) end
end
local want_r = {}
for i = 1, 4 do for j = 1, 3 do want_r[#want_r + 1] = ml[j][i] end end
local flat = {}
for _, row in ipairs(r:tolist()) do
  for _, v in ipairs(row) do flat[#flat + 1] = v end
end
same(flat, want_r, nil, "permute+reshape")
print("The transposed and reshaped values match plain Lua index arithmetic.")

-- Movement composes with compute: x @ w.T reads w through a permuted view.
local w = Tensor { { 1, 0, 2 }, { 0, 1, 1 } }
local xm = Tensor { { 1, 2, 3 }, { 4, 5, 6 } }
local y = xm:matmul(w.T)
local want_y = lesson.matmul(xm:tolist(), { { 1, 0 }, { 0, 1 }, { 2, 1 } }) -- w transposed by hand
same(y:tolist(), want_y, nil, "x @ w.T")
print("x:matmul(w.T) = " .. tostring(y))
print("(matmul is reshape + expand + multiply + sum: no MATMUL op exists)")

print()
print("All checks passed. Next: run with DEBUG=2, then DEBUG=3, and watch the kernels.")
