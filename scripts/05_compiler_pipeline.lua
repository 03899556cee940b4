-- 05_compiler_pipeline.lua: Project 5 of the guide. From a tensor expression to the kernel the
-- machine runs, one stage at a time.
--   1. the schedule of a small network: which ops fuse, and why each kernel is a kernel
--   2. every reason the scheduler gives, each on the smallest graph that shows it
--   3. the IR of a small matmul at each stage: AST, loops, folded, linear
--   4. algebraic rewrites: x * 1 + 0 under NOOPT=1 and by default
--   5. BEAM search on a 1024x1024 matmul: the time against the hand-coded opts, and the tile it chose
--   6. VIZ: the same matmul as graphs at every stage, in the browser
-- At the prompt the same views are :schedule EXPR, :ir EXPR [stage], :src EXPR, :opts EXPR
-- and :viz EXPR (the graph at every stage, in the browser). Every claim is asserted.
local lesson = require "lesson"
local section = lesson.section
Tensor.manual_seed(5)

local function reasons(items)
  local out = {}
  for i, it in ipairs(items) do out[i] = it.reason end
  return out
end

-- How many times a Lua pattern matches in `text`.
local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

------------------------------------------------------------------------------
section("1. The schedule of a small network: softmax(relu(x W + b))")

-- Nine ops: matmul (a multiply and a reduce), add, relu, then softmax's max, subtract, exp, sum
-- and divide. Elementwise ops fuse into whatever kernel reads them; only a reduce whose finished
-- value something else needs ends a kernel.
local x, W, b = Tensor.randn(8, 16), Tensor.randn(16, 4), Tensor.randn(4)
Tensor.realize_all(x, W, b)
local out = (x:matmul(W) + b):relu():softmax(-1)
local items = show.schedule(out)
print()
for i, it in ipairs(items) do print(("kernel %d  %-16s why: %s"):format(i, it.name, it.reason)) end
assert(#items == 4, "matmul, max, sum, and the output: 4 kernels")
lesson.same(reasons(items), {
  "a reduce feeds a reduce over other axes",            -- the matmul's sum over k, then max over the row
  "a reduce's result is broadcast (expanded) before its use", -- x - max(x): every element needs the finished max
  "a reduce's result is broadcast (expanded) before its use", -- e / sum(e)
  "the graph's output",
})
print("The add and the relu never get a kernel: they are recomputed inside each kernel that reads them,")
print("which costs a few instructions and saves writing and reading a whole buffer.")

-- the values, against plain Lua
local xs, ws, bs, got = x:tolist(), W:tolist(), b:tolist(), out:tolist()
local h = lesson.matmul(xs, ws)
for i = 1, 8 do
  local m, s = -math.huge, 0
  for j = 1, 4 do h[i][j] = math.max(h[i][j] + bs[j], 0); m = math.max(m, h[i][j]) end
  for j = 1, 4 do h[i][j] = math.exp(h[i][j] - m); s = s + h[i][j] end
  for j = 1, 4 do h[i][j] = h[i][j] / s end
end
lesson.same(got, h, 1e-5)
print("values match a plain-Lua softmax(relu(x W + b)) within 1e-5")

------------------------------------------------------------------------------
section("2. Every kernel boundary, on the smallest graph that shows it")

local a = Tensor.randn(4, 5)
local c = Tensor.randn(5, 4)
Tensor.realize_all(a, c)
local cases = {
  { "a + 1", function() return (a + 1):schedule() end, { "the graph's output" } },
  { "(a + 1):contiguous() * 2", function() return ((a + 1):contiguous() * 2):schedule() end,
    { "contiguous", "the graph's output" } },
  { "a:sum(1):max()", function() return a:sum(1):max():schedule() end,
    { "a reduce feeds a reduce over other axes", "the graph's output" } },
  { "a - a:max(1, true)", function() return (a - a:max(1, true)):schedule() end,
    { "a reduce's result is broadcast (expanded) before its use", "the graph's output" } },
  { "a:sum(1) + c:sum(0)", function() return (a:sum(1) + c:sum(0)):schedule() end,
    { "a second reduce of another shape in the consumer", "the graph's output" } },
  -- exp(0) is 1, so the pad's zeros cannot go through it: its result is masked instead, in one kernel
  { "a:exp():pad({{0,0},{1,0}})", function() return a:exp():pad({ { 0, 0 }, { 1, 0 } }):schedule() end,
    { "the graph's output" } },
}
for _, case in ipairs(cases) do
  local got_reasons = reasons(case[2]())
  print(("%-28s %s"):format(case[1], table.concat(got_reasons, "; ")))
  lesson.same(got_reasons, case[3])
end

-- Two outputs that share a reduce: the sum is computed once, in a kernel of its own.
local s = a:sum(1)
local p, q = s + 1, s * 2
local n, log = lesson.count_kernels(show.kernel_log, function() Tensor.realize_all(p, q) end)
print(("%-28s %s"):format("realize_all(s + 1, s * 2)", table.concat(reasons(log), "; ")))
lesson.same(reasons(log), { "used by two consumers that cannot share a loop", "explicit realize", "explicit realize" })
assert(n == 3)

-- An in-place update. Where the kernel reads each old value only at the place it writes the new
-- one, it writes the tensor directly; where it reads the old values elsewhere (a flip), the new
-- value is computed apart, then copied in after every reader of the old one.
local t = Tensor({ 1, 2, 3 })
t:realize()
t:assign(t * 10)
local assign_reasons = reasons(t:schedule())
print(("%-28s %s"):format("t:assign(t * 10)", table.concat(assign_reasons, "; ")))
lesson.same(assign_reasons, { "assign target, written in place (its kernel reads the old value only where it writes, and no later kernel reads it)" })
lesson.same(t:tolist(), { 10, 20, 30 })
t:assign(t:flip(0) + 1)
assign_reasons = reasons(t:schedule())
print(("%-28s %s"):format("t:assign(t:flip(0) + 1)", table.concat(assign_reasons, "; ")))
lesson.same(assign_reasons, { "assign target", "assign target: copied in after every reader of the old value" })
lesson.same(t:tolist(), { 31, 21, 11 })

------------------------------------------------------------------------------
section("3. The IR of a 4x4 matmul at each stage (NOOPT=1: one output per loop iteration)")

-- ast:        the kernel as the scheduler made it: LOADs through views, a REDUCE_AXIS, a STORE
-- opts:       the same AST with dims merged and opts applied (none under NOOPT)
-- lowered:    loops: each dim is a RANGE (or a launch index), each view is index arithmetic
-- simplified: the symbolic rules fold constants (x*1, +0, 0*4) and simplify the index math
-- linear:     the graph put in order, loops opened and closed: what the renderer turns into C
local A, B = Tensor.randn(4, 4), Tensor.randn(4, 4)
Tensor.realize_all(A, B)
local stages = Context({ NOOPT = 1 }, function()
  show.ir(A:matmul(B))
  return A:matmul(B):schedule()[1].stages
end)
local text = {}
for _, st in ipairs(stages) do text[st.name] = st.text end
assert(text.ast:find("REDUCE_AXIS"), "the AST reduces")
assert(count(text.lowered, "RANGE") >= 1 and text.linear:find("ENDRANGE"), "lowering makes loops; linear closes them")
local lowered_nodes, simplified_nodes = count(text.lowered, "\n"), count(text.simplified, "\n")
print(("\nlowered %d lines, simplified %d lines: the folding removed %d"):format(lowered_nodes, simplified_nodes,
  lowered_nodes - simplified_nodes))
assert(simplified_nodes < lowered_nodes, "the symbolic rules shrink the lowered IR")

------------------------------------------------------------------------------
section("4. Algebraic rewrites: x * 1 + 0")

-- NOOPT=1 turns off the opts (no dims merged, no upcasts): one loop per dim, one element per
-- iteration. It keeps the algebra: x * 1 -> x and x + 0 -> x are rules of the simplifier, which
-- the lowering needs for its own index math. The lowered IR still has the MUL and the ADD; the
-- simplified IR does not, in both kernels.
local X = Tensor.randn(16, 32)
X:realize()
local function kernel(f)
  return f(function()
    local it = (X * 1 + 0):schedule()[1]
    local st = {}
    for _, s in ipairs(it.stages) do st[s.name] = s.text end
    return it.src, st
  end)
end
local src_noopt, st_noopt = kernel(function(g) return Context({ NOOPT = 1 }, g) end)
local src_default, st_default = kernel(function(g) return g() end)
local function body(src) return src:match("(void E_.*)") end
print("NOOPT=1:")
io.write(body(src_noopt))
print("default:")
io.write(body(src_default))
for _, st in ipairs({ st_noopt, st_default }) do
  assert(st.lowered:find("MUL float32") and st.lowered:find("CONST float32 1"), "lowered: x * 1 is there")
  assert(not st.simplified:find("MUL float32") and not st.simplified:find("ADD float32"),
    "simplified: no float MUL or ADD left")
end
assert(count(src_noopt, "for %(") == 2, "NOOPT: a loop per dim")
assert(count(src_default, "for %(") == 1, "default: the two dims merged into one loop")
print("Both kernels copy X: the multiply and the add are gone. NOOPT keeps a loop for each dim of")
print("the (16, 32) shape; the default merges the two dims into one loop of 512 (the views allow it),")
print("one index instead of a multiply and an add per element.")

------------------------------------------------------------------------------
section("5. BEAM search: a 1024x1024 matmul, hand-coded opts against BEAM=4")

-- Each run builds a fresh graph (a realized one would not run again); the kernel time is
-- GlobalCounters.time_sum_s around the realize, the best of a few runs.
local N = 1024
local M1, M2 = Tensor.rand(N, N), Tensor.rand(N, N)
Tensor.realize_all(M1, M2)
local function best_ms(runs)
  M1:matmul(M2):realize() -- compiles (and, under BEAM, searches) once
  local best = math.huge
  for _ = 1, runs do
    -- a graph equal to a realized one that something still holds (opts_of's unrealized tensor,
    -- until Lua collects it) is one node, whose cached value would be copied, not computed
    collectgarbage()
    local t0 = GlobalCounters.time_sum_s
    M1:matmul(M2):realize()
    best = math.min(best, (GlobalCounters.time_sum_s - t0) * 1e3)
  end
  return best
end
-- What the opts mean for a matmul: axis 0 over outputs is the rows, axis 1 the columns (with B
-- packed into blocks of columns, axis 1 is the block and axis 2 the column within it), and the
-- reduce axis 0 is k.
local OUT_AXES, RED_AXES = { [0] = "rows", [1] = "columns", [2] = "columns" }, { [0] = "k" }
local function in_words(opts)
  local words, tile = {}, { rows = 1, columns = 1 }
  for _, o in ipairs(opts) do
    local op, axis, amount = o:match("^(%u+)%((%d+), (%d+)%)$")
    axis, amount = tonumber(axis), tonumber(amount)
    if op == "UPCAST" and OUT_AXES[axis] then
      tile[OUT_AXES[axis]] = tile[OUT_AXES[axis]] * amount
      words[#words + 1] = ("%s: %d %s per iteration"):format(o, amount, OUT_AXES[axis])
    elseif op == "UNROLL" and RED_AXES[axis] then
      words[#words + 1] = ("%s: the %s loop unrolled %d times"):format(o, RED_AXES[axis], amount)
    else
      words[#words + 1] = o
    end
  end
  return table.concat(words, "; "), ("a %d x %d tile of outputs per iteration"):format(tile.rows, tile.columns)
end
-- the matmul is the last kernel (a large B is packed by a copy kernel first)
local function opts_of()
  local s = M1:matmul(M2):schedule()
  return s[#s].opts
end

local hand_ms = Context({ BEAM = 0 }, function() return best_ms(3) end)
local hand_opts = Context({ BEAM = 0 }, opts_of)
local beam_ms = Context({ BEAM = 4 }, function() return best_ms(3) end)
local beam_opts = Context({ BEAM = 4 }, opts_of)
local flops = 2 * N * N * N
for _, row in ipairs({ { "BEAM=0", hand_ms, hand_opts }, { "BEAM=4", beam_ms, beam_opts } }) do
  local words, tile = in_words(row[3])
  print(("%-7s %8.2f ms  %7.1f GFLOPS  %s"):format(row[1], row[2], flops / row[2] * 1e-6, tile))
  print(("        %s"):format(words))
end
print(("BEAM=4 / BEAM=0 time: %.2f (the search keeps the hand-coded opts when nothing beats them)"):format(
  beam_ms / hand_ms))
-- the search times every candidate on this machine, and the hand-coded list competes too: it
-- loses only to noise. The times are shown, never asserted: on a shared machine (CI runs two
-- tests at once) BEAM's pick once timed 2.1x slower here, from a duel another test disturbed.
-- the two results, each realized into its own buffer (M1 + 0 is another graph than M1, so the
-- reference is computed again, not read from the BEAM result)
local C = Context({ BEAM = 4 }, function() return M1:matmul(M2):realize() end)
local ref = Context({ BEAM = 0 }, function() return (M1 + 0):matmul(M2):realize() end)
local diff = (C - ref):abs():max():item()
print(("largest difference between the two results: %.3g"):format(diff))
assert(diff < 1e-3, "BEAM changes the loop structure, not the values")

------------------------------------------------------------------------------
section("6. VIZ: the matmul's graphs at every stage, in the browser")

-- show.viz (:viz at the prompt; VIZ=1 for every realize of a run) writes one HTML page: the
-- tensor graph, the schedule, then each kernel's ast, opts, lowered, simplified (with each
-- rewrite rule that fired) and linear graphs. Step with the arrow keys. Colours: orange reduces,
-- green loads/stores/indexing, purple loops (RANGE), white elementwise math.
local path = Context({ NOOPT = 1 }, function() return show.viz(A:matmul(B), "4x4 matmul, NOOPT=1") end)
local f = assert(io.open(path))
local page = f:read("a")
f:close()
local found = {}
for _, kind in ipairs({ "REDUCE_AXIS", "REDUCE", "RANGE", "MUL", "LOAD", "STORE" }) do
  local n = count(page, ">" .. kind .. " [%w]+</text>")
  found[#found + 1] = ("%s %d"):format(kind, n)
  assert(n > 0, "the page has no " .. kind .. " node")
end
print("nodes on the page: " .. table.concat(found, ", "))
local rules = count(page, "<td>#%d+ [^<]*</td>")
print(("rewrite steps listed with the rule that fired: %d (e.g. MUL(x, 1), ADD(x, 0) folding the index math)"):format(rules))
assert(rules > 0, "the page names the rules that fired")
print("open it to step through the stages yourself")
