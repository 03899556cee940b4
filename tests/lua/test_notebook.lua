-- The Lua half of the Jupyter kernel (stdlib/notebook.lua) and stdlib/plot.lua, without Jupyter:
-- how a cell becomes Lua, its result, is_complete, the tensor table, highlighting, completion,
-- inspection, and plots written to files at the terminal. tests/kernel_test.py drives the kernel.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
local nb = require "notebook"
local plot = require "plot"

local function has(s, frag) return s:find(frag, 1, true) ~= nil end
local function count(s, frag)
  local n, i = 0, 1
  while true do
    local j = s:find(frag, i, true)
    if not j then return n end
    n, i = n + 1, j + #frag
  end
end

test("a cell: colon lines are commands, top-level locals become globals, nested ones stay", function()
  local lines, commands = nb.source(":debug 2\nlocal a = 1\nlocal b, c\nlocal function f() local inner = 2 end\n  :x")
  assert(lines[1] == "show.debug(2)" and commands[1], lines[1])
  assert(lines[2] == "a = 1", lines[2])
  assert(lines[3] == "b, c = nil, nil", lines[3])
  assert(lines[4] == "function f() local inner = 2 end", lines[4])
  assert(lines[5] == "  :x" and not commands[5], "an indented ':' is Lua (a method call continued)")
  assert(not pcall(nb.source, ":nosuch"), "an unknown command is an error")
end)

test("a cell's last line, when an expression, is its result; statements give none", function()
  local fn = assert(nb.load_cell("nbt_x = 20\nnbt_x + 2", 1))
  assert(select("#", fn()) == 1 and nbt_x == 20)
  assert(fn() == 22)
  fn = assert(nb.load_cell("nbt_y = 3", 2))
  assert(select("#", fn()) == 0)
  fn = assert(nb.load_cell(":help relu", 3)) -- a command's return value is not shown
  local ok = pcall(fn)
  assert(ok)
  local f, err, unfinished = nb.load_cell("for i = 1, 2 do", 4)
  assert(f == nil and unfinished and has(err, "<eof>"), tostring(err))
  f, err, unfinished = nb.load_cell("x = = 1", 5)
  assert(f == nil and not unfinished and has(err, "[5]:1:"), tostring(err))
end)

test("is_complete: Lua's <eof> says incomplete", function()
  assert(nb.is_complete("x = 1") == "complete")
  assert(nb.is_complete("") == "complete")
  assert(nb.is_complete("function f()\n  return 1") == "incomplete")
  assert(nb.is_complete("t = {1,") == "incomplete")
  assert(nb.is_complete("x = = 1") == "invalid")
  assert(nb.is_complete(":nosuch") == "invalid")
end)

test("a tensor's table: shape, dtype, device and every value", function()
  local html = nb.tensor_html(Tensor { { 1, 2, 3 }, { 4, 5, 6 } })
  assert(has(html, "shape <code>(2, 3)</code> dtype <code>int32</code> device <code>CPU</code>"), html)
  for v = 1, 6 do assert(has(html, ("<td>%d</td>"):format(v)), v) end
  assert(count(html, "<tr>") == 3, "a header row and two rows")
  html = nb.tensor_html(Tensor { 1.5, -2 })
  assert(has(html, "(2,)") and has(html, "<td>1.5</td>") and has(html, "<td>-2</td>"), html)
  html = nb.tensor_html(Tensor(7))
  assert(has(html, "shape <code>()</code>") and has(html, "<td>7</td>"), html)
end)

test("a large tensor is summarized as numpy does: three first and last along each dim", function()
  local t = Tensor.arange(0, 2 * 30 * 40):reshape(2, 30, 40)
  local html = nb.tensor_html(t)
  assert(has(html, "2400 elements, summarized"), html)
  -- rows: (0,0) (0,1) (0,2) ... (1,27) (1,28) (1,29); columns 0 1 2 ... 37 38 39
  for _, v in ipairs({ 0, 1, 2, 37, 38, 39, 40, 2399, 2398, 2397, 2360 }) do
    assert(has(html, ("<td>%d</td>"):format(v)), v)
  end
  assert(not has(html, "<td>3</td>") and not has(html, "<td>1200</td>"), "middle values are elided")
  assert(has(html, "<th>1, 29</th>") and has(html, "<th>0, 0</th>"), "rows labelled by their leading indices")
  assert(count(html, "&hellip;") >= 1 and count(html, "&vellip;") >= 1)
  assert(count(html, "<tr>") == 8, "a header, 3 rows, a gap, 3 rows")
end)

test("the cell's bundle: text as the prompt prints it, a table for one tensor", function()
  local b = nb.bundle(Tensor { 1, 2 })
  assert(b["text/plain"] == tostring(Tensor { 1, 2 }) and b["text/html"])
  b = nb.bundle(1, "a", { 2 })
  assert(b["text/plain"] == '1\ta\t{2}' and not b["text/html"], b["text/plain"])
end)

test(":src's highlighting keeps the text and marks keywords, numbers and comments", function()
  local src = "// kernel 1\nfloat f(int a) { return a < 3 ? 1.5f : 0; } /* x */\n#define N 4"
  local html = nb.highlight(src)
  assert(has(html, '<span style="color:#8c8c8c;font-style:italic">// kernel 1</span>'))
  assert(has(html, '<span style="color:#0033b3;font-weight:bold">float</span>'))
  assert(has(html, '<span style="color:#0033b3;font-weight:bold">return</span>'))
  assert(has(html, '<span style="color:#1750eb">1.5f</span>'))
  assert(has(html, "a &lt; ") and not has(html, "a < "), "HTML is escaped")
  assert(has(html, '<span style="color:#9e880d">#define N 4</span>'))
  local text = html:gsub("<[^>]+>", ""):gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&amp;", "&"):gsub("&quot;", '"')
  assert(text == src, text)
  -- ';' ends a C statement (the rest of a for loop is code) and starts an LLVM IR comment
  html = nb.highlight("for (int i = 0; i < 4; i++) {")
  assert(not has(html, "font-style:italic"), html)
  html = nb.highlight("define void @k(ptr %0) {\n  ret void ; done\n}")
  assert(has(html, '<span style="color:#8c8c8c;font-style:italic">; done</span>'), html)
end)

test("completion and inspection: the REPL's completer and :help", function()
  nbt_t = Tensor { 1 }
  local code = "y = nbt_t:resh"
  local names, start = nb.complete(code, #code)
  assert(#names == 1 and names[1] == "reshape" and start == #code - 4, table.concat(names, " ") .. " " .. start)
  names = nb.complete("a = 1\n:sch", 10)
  assert(names[1] == "schedule")
  assert(has(nb.inspect("nbt_t:softmax(1)", 9), "softmax"))
  assert(has(nb.inspect(":kernels x", 2), "realize EXPR and list the kernels"))
  assert(nb.inspect("nbt_nothing_here", 3) == nil)
end)

test(":viz's page: the stage graphs it holds", function()
  local path = show.viz_write((Tensor { 1, 2, 3 } * 7 + 1):sum(), "test")
  local page = assert(io.open(path)):read("a")
  os.remove(path)
  local graphs = nb.viz_graphs(page)
  assert(#graphs >= 3, #graphs)
  assert(graphs[1].title == "tensor graph" and graphs[1].svg:match("^<svg") and graphs[1].svg:match("</svg>$"))
end)

test("plots at the terminal: an SVG file, its path printed and returned", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local file = plot.line({ 1, 2, 3 }, { { 1, 4, 9 }, Tensor { 1, 2, 3 } }, { title = "t", labels = { "sq", "n" }, file = dir .. "/a.svg" })
  assert(file == dir .. "/a.svg")
  local svg = assert(io.open(file)):read("a")
  assert(has(svg, "<svg") and has(svg, ">sq<") and has(svg, ">n<"), "both series with their labels")
  file = plot.image(Tensor.rand(1, 5, 4), { file = dir .. "/b.svg" })
  svg = assert(io.open(file)):read("a")
  assert(count(svg, "<path") + count(svg, "<rect") >= 20, "one rectangle per pixel")
  H.errors(function() plot.image(Tensor.rand(2, 3, 4)) end)
  H.errors(function() plot.line({ 1, 2 }, { 1, 2, 3 }) end)
  os.execute("rm -rf " .. dir)
end)

H.done()
