-- The REPL driven through a pipe: every colon command, value printing, completion and help.
-- Each expectation comes from the engine's own Lua API (x:schedule(), item.src, ...) or from
-- the values themselves, not from a copy of the command's output.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
local repl = require "repl"
local help = require "help"

local exe = H.exe

local sh_quote = H.sh_quote

-- Pipes `lines` into a fresh moongrad; returns stdout, stderr and the exit code.
local function session(lines)
  local input, err = os.tmpname(), os.tmpname()
  local f = assert(io.open(input, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  local p = assert(io.popen(("env -u DEBUG -u NOOPT -u BEAM %s < %s 2> %s"):format(sh_quote(exe), input, err)))
  local out = p:read("a")
  local _, _, code = p:close()
  local e = assert(io.open(err)):read("a")
  os.remove(input)
  os.remove(err)
  return out, e, code
end

local function has(s, frag) return s:find(frag, 1, true) ~= nil end
local function check(s, ...)
  for _, frag in ipairs({ ... }) do assert(has(s, frag), ("output lacks %q:\n%s"):format(frag, s)) end
end

-- ---------------------------------------------------------------- colon commands

test(":schedule prints one AST per kernel the expression needs", function()
  local x = (Tensor.ones(4, 4) + 1):contiguous()
  local y = x:sum(0) + x:max()
  local items = y:schedule()
  local out, err, code = session({ "x = (Tensor.ones(4, 4) + 1):contiguous()", ":schedule x:sum(0) + x:max()" })
  assert(code == 0, err)
  check(out, ("%d kernels"):format(#items))
  for k, it in ipairs(items) do check(out, ("--- kernel %d: %s"):format(k, it.name)) end
  local _, sinks = out:gsub("\nSINK", "")
  assert(sinks == #items, ("%d ASTs printed for %d kernels"):format(sinks, #items))
end)

test(":src prints the source of each kernel", function()
  local items = (Tensor.ones(3, 5):sum(1) * 2):schedule()
  local out, err, code = session({ ":src Tensor.ones(3, 5):sum(1) * 2" })
  assert(code == 0, err)
  for _, it in ipairs(items) do check(out, it.src) end
end)

test(":opts lists each kernel's opts; show.opts with a list lowers the last kernel with it", function()
  local a, b = Tensor.rand(32, 48):realize(), Tensor.rand(48, 40):realize()
  local items = a:matmul(b):schedule()
  local out, err, code = session({ "a, b = Tensor.rand(32, 48), Tensor.rand(48, 40)", ":opts a:matmul(b)",
    'r = show.opts(a:matmul(b), {{"UPCAST", 1, 8}, {"UNROLL", 0, 4}})', 'print(r.name, table.concat(r.opts, " "))',
    'show.opts(a:matmul(b), {{"UPCAST", 1, 7}})', "print('alive')" })
  assert(code == 1, "the illegal opt should make the piped session exit 1")
  check(out, ("--- kernel 1: %s  %s"):format(items[1].name, table.concat(items[1].opts, " ")))
  check(out, "r_32_5_8_12_4\tUPCAST(1, 8) UNROLL(0, 4)", "default ", "yours ", "alive")
  check(err, "UPCAST(1, 7): the dim has 40 iterations, not a multiple of 7")
  -- the kernel the list describes, and the values of the default one
  local r = show.try_opts(a:matmul(b), { { "UPCAST", 1, 8 }, { "UNROLL", 0, 4 } })
  assert(r.name == "r_32_5_8_12_4" and #r.opts == 2 and r.kernels == 1, r.name)
  assert(r.src:find("r_32_5_8_12_4", 1, true) and r.seconds > 0 and r.flops > 0)
end)

test(":ir shows every stage, or the one asked for", function()
  local out, err, code = session({ "x = Tensor{1,2,3}", ":ir x * 2 + 1" })
  assert(code == 0, err)
  for _, st in ipairs(show.stages) do check(out, "=== " .. st) end
  local item = (Tensor{1,2,3} * 2 + 1):schedule()[1]
  check(out, item.stages[#item.stages].text)
  out, err, code = session({ "x = Tensor{1,2,3}", ":ir x * 2 + 1 linear" })
  assert(code == 0, err)
  check(out, "=== linear", "RANGE", "STORE")
  assert(not has(out, "=== lowered"), out)
  out, err, code = session({ ":ir Tensor{1,2} graph" })
  check(out, "=== graph", "BUFFER")
  out, err, code = session({ ":ir Tensor{1,2} + 1 nosuchstage" }) -- not a stage: part of the expression
  assert(code == 1 and has(err, "nosuchstage"), err)
end)

test(":kernels runs the expression and lists its kernels with rates", function()
  local out, err, code = session({ "a = Tensor.rand(64, 64)", ":kernels (a * 2):sum(1):relu()", "print(GlobalCounters.kernel_count)" })
  assert(code == 0, err)
  local n = #(Tensor.rand(64, 64) * 2):sum(1):relu():schedule()
  check(out, "GFLOPS", "GB/s", ("%d kernel"):format(n))
  assert(out:match("\n(%d+)\n$") == tostring(n), "the kernels did not run:\n" .. out)
  -- show.kernels returns the runs, so scripts can use them
  local log = show.kernels((Tensor.ones(8) * 3):contiguous())
  assert(#log == 1 and log[1].name:match("^E_") and log[1].shape[1] == 8 and log[1].bytes == 32, log[1].name)
end)

test(":time realizes and prints the wall time", function()
  local out, err, code = session({ ":time Tensor.ones(1000):sum()", "print('after')" })
  assert(code == 0, err)
  assert(out:match("^[%d.]+ ms: 1 kernel %(%d compiled%), [%d.]+ ms in kernels\nafter\n$"), out)
  local s, v = show.time(function() return Tensor{1, 2} * 2 end)
  assert(type(s) == "number" and s >= 0 and v:tolist()[2] == 4)
end)

test(":debug, :beam, :noopt, :device change the live settings", function()
  local out, err, code = session({
    ":debug 2", "Tensor{1,2,3} + 7", ":debug", ":debug 0", "Tensor{1,2,3} + 8",
    ":noopt 1", ":kernels Tensor.ones(4, 4):contiguous()", ":noopt 0", ":kernels Tensor.ones(4, 4):contiguous()",
    ":beam 2", ":device cpu", "print(Device.DEFAULT)" })
  assert(code == 0, err)
  check(out, "DEBUG=2", "*** CPU", "DEBUG=0", "NOOPT=1", "E_4_4", "NOOPT=0", "E_16", "BEAM=2", "DEV=CPU\nCPU")
  local _, n = out:gsub("%*%*%* CPU", "")
  assert(n == 1, "DEBUG=2 output should appear for one realize only:\n" .. out)
  out, err, code = session({ ":device NOSUCH", ":debug x" })
  assert(code == 1, "bad settings must fail")
  check(err, "NOSUCH", "CPU", ":debug takes a whole number")
end)

test(":help lists the commands and documents methods", function()
  local out, err, code = session({ ":help", ":help relu", ":help Tensor.zeros", ":help :src", ":help shape" })
  assert(code == 0, err)
  for _, c in ipairs(help.commands) do check(out, c[2], c[3]) end
  check(out, "x:relu()\n  max(x, 0)", "Tensor.zeros(..., {dtype=, device=, requires_grad=})", ":src EXPR   (Lua: show.src(x))", "x.shape")
  out, err, code = session({ ":help nosuchthing" })
  assert(code == 1 and has(err, "no help for 'nosuchthing'"), err)
end)

test("unknown and malformed commands are errors that name the command", function()
  local out, err, code = session({ ":frobnicate", ":src", ":src 1 +", "print('alive')" })
  assert(code == 1, "exit code")
  check(err, "unknown command ':frobnicate'", ":src needs an expression")
  check(out, "alive")
end)

-- ---------------------------------------------------------------- printing and evaluation

test("expressions print their values; tables print as Lua", function()
  local out, err, code = session({
    "x = Tensor{{1,2},{3,4}}", "x", "x.shape", "{a = 1, 'two', {3}}", "1, 'a', nil", "local y = 41", "y + 1",
    "local function f(v) return v * 2 end", "f(4)", "for k = 1, 2 do", "print(k)", "end" })
  assert(code == 0, err)
  local want = table.concat({
    "Tensor([[1, 2],\n        [3, 4]], shape=(2, 2), dtype=int32, device=CPU)",
    "{2, 2}", '{"two", {3}, a = 1}', "1\ta\tnil", "42", "8", "1", "2" }, "\n") .. "\n"
  assert(out == want, ("got\n%s\nwant\n%s"):format(out, want))
end)

test("tensor printing: numpy layout, elision, dtypes", function()
  local out = session({ "Tensor.arange(0, 12):reshape(2, 2, 3)", "Tensor.arange(0, 5000)", "Tensor{1.5, -2}",
    "Tensor{true, false}", "Tensor.ones(2, 3, {dtype='float16'})" })
  check(out, "Tensor([[[ 0,  1,  2],\n         [ 3,  4,  5]],\n\n        [[ 6,  7,  8],",
    "Tensor([   0,    1,    2, ..., 4997, 4998, 4999], shape=(5000,)", "[ 1.5, -2. ], shape=(2,), dtype=float32",
    "[ true, false]", "dtype=float16")
  local big = Tensor.arange(0, 40 * 40):reshape(40, 40)
  local s = tostring(big)
  local _, rows = s:gsub("\n", "")
  assert(rows == 6, "a 40x40 tensor prints 3 + 3 rows and an ellipsis row:\n" .. s)
end)

test("inspection values: x.uop, x:schedule(), x.st", function()
  local out, err, code = session({ "x = Tensor{1,2,3,4}", "y = x:reshape(2, 2).T", "(y + 1).uop.op", "y.st",
    "#(y + 1):schedule()", "(y + 1):schedule()[1]", "y.st.views[1].strides" })
  assert(code == 0, err)
  check(out, "ADD\n", "ShapeTracker(views=(View(shape=(2, 2), strides=(1, 2)", "\n1\n", "ScheduleItem(2 buffers",
    "SINK", "{1, 2}")
end)

test("errors print one line and the prompt goes on; exit status 1 when piped", function()
  local out, err, code = session({ "error('boom')", "Tensor{1,2} + Tensor{1,2,3}", "x = = 1", "nosuch.field",
    "print('still here')" })
  assert(code == 1, "exit code")
  check(err, "boom", "(2,)", "(3,)", "unexpected symbol", "attempt to index a nil value")
  check(out, "still here")
  local _, lines = err:gsub("\n", "")
  assert(lines == 4, "one line per error:\n" .. err)
  out, err, code = session({ "function f() error('deep') end", "function g() f() end", "g()" })
  check(err, "deep", "traceback:", "in function 'f'", "in function 'g'")
end)

-- ---------------------------------------------------------------- completion (what TAB offers)

test("completion of globals, table fields and tensor members", function()
  x_for_completion = Tensor{1, 2}
  local c, part = repl.complete("x_for_completion:re")
  assert(part == "re")
  H.same(c, { "read_image", "realize", "realize_all", "rearrange", "reciprocal", "relu", "relu6", "repeat", "repeat_", "repeat_interleave",
    "replace", "requires_grad_", "reshape" })
  c = repl.complete("x_for_completion.sh") -- '.' offers properties and methods
  H.same(c, { "shape", "shard", "shard_", "shrink" })
  c = repl.complete("x_for_completion:sh") -- ':' offers methods only
  H.same(c, { "shard", "shard_", "shrink" })
  c = repl.complete("y = Tensor.ze")
  H.same(c, { "zeros", "zeros_like" })
  c = repl.complete("x_for_completion.uop.s")
  H.same(c, { "shape", "src" })
  c = repl.complete("print(sho")
  H.same(c, { "show" })
  c = repl.complete("show.sr")
  H.same(c, { "src" })
  c = repl.complete("whi")
  H.same(c, { "while" })
  c, part = repl.complete(":sc")
  H.same(c, { "schedule" })
  H.same(repl.complete("nosuch.thing"), {})
  H.same(repl.complete("x_for_completion:relu():s"), {}) -- no calls are made to complete
  H.same(repl.complete("12.3"), {})
  x_for_completion = nil
end)

test("every field completion offers resolves, and every Tensor function has help", function()
  local x = Tensor{1, 2, 3}:reshape(3, 1)
  local values = { x, x.uop, x.st, (x + 1):schedule()[1] }
  for _, v in ipairs(values) do
    for _, f in ipairs(show.fields(v)) do
      local ok, r = pcall(function() return v[f] end)
      assert(ok and (r ~= nil or f == "grad"), ("%s.%s does not resolve: %s"):format(show.typeof(v), f, tostring(r)))
    end
  end
  for k, f in pairs(Tensor) do
    if type(f) == "function" and not k:match("^_") then assert(help.tensor[k], "no :help entry for Tensor." .. k) end
  end
  for k in pairs(help.tensor) do assert(Tensor[k], ":help documents Tensor." .. k .. ", which does not exist") end
  for _, f in ipairs(show.fields(x)) do assert(help.fields[f], "no :help entry for x." .. f) end
end)

test("translate: colon lines to Lua calls", function()
  assert(repl.translate(":ir x + 1 linear") == 'show.ir(x + 1, "linear")')
  assert(repl.translate(":ir x + b") == "show.ir(x + b)")
  assert(repl.translate(":time f(x)") == "show.time(function() return f(x) end)")
  assert(repl.translate(":device cl") == 'show.device("CL")')
  assert(repl.translate("::label::") == nil)
  assert(repl.translate("x = 1") == nil)
  H.errors(function() repl.translate(":debug 1.5") end, ":debug takes a whole number")
  H.errors(function() repl.translate(":device a b") end, ":device takes a device name")
end)

test("prepare keeps top-level locals alive across entries", function()
  assert(repl.prepare("local x = 1") == "x = 1")
  assert(repl.prepare("local a, b = 1, 2") == "a, b = 1, 2")
  assert(repl.prepare("local function f() end") == "function f() end")
  assert(repl.prepare("local x <const> = 1") == "local x <const> = 1")
  assert(repl.prepare("x = 1") == "x = 1")
end)

test('require "moongrad" gives the globals as a table', function()
  local mg = require "moongrad"
  assert(mg.Tensor == Tensor and mg.show == show and mg.Context == Context and mg.dtypes == dtypes)
  H.same((mg.Tensor{1, 2} * 2):tolist(), { 2, 4 })
end)

test("replacing require, print or show at the prompt does not break it", function()
  local out, err, code = session({ "require = nil", "print = nil", "{1, 2}", "show = nil", ":src Tensor{1}", "1 + 1" })
  assert(code == 1, "the :src line should fail")
  check(out, "{1, 2}", "2\n")
  check(err, "global 'show'")
end)

H.done()
