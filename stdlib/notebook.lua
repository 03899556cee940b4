-- notebook: what the Jupyter kernel (interp/jupyter_kernel.cpp) asks of Lua. A cell is Lua with
-- colon-command lines (the notebook's magics, translated as the prompt translates them); its last
-- line's value is the cell's result, shown as the prompt shows it and, for a tensor, as a table.
-- :src is highlighted, :viz shows its graphs inline, plot.* draws inline.
local M = {}
local repl = require "repl"
local show = show
local print, tostring, select, type, load, pcall, error = print, tostring, select, type, load, pcall, error

-- ---------------------------------------------------------------- cells

-- The cell as Lua lines. A line starting with ':' in the first column is a colon command; a
-- `local` in the first column (a top-level statement) defines a global instead, as at the prompt:
-- each cell is its own chunk, and the next cell must see the name. Returns the lines and the set
-- of line numbers that were commands.
function M.source(code)
  local lines, commands = {}, {}
  for line in (code .. "\n"):gmatch("(.-)\r?\n") do
    local cmd = line:match("^:") and repl.translate(line)
    if cmd then
      commands[#lines + 1] = true
      line = cmd
    elseif line:match("^local%s") then
      -- `local a, b` alone declares: as globals, `a, b = nil, nil` (they start as nil either way)
      local names, rest = line:match("^local%s+([%a_][%w_]*[%w_%s,]-)%s*(%-%-.*)$")
      if not names then names, rest = line:match("^local%s+([%a_][%w_]*[%w_%s,]-)%s*()$"), "" end
      if names and not names:match("^function%s") then
        local n = select(2, names:gsub(",", ",")) + 1
        line = names .. " = nil" .. (", nil"):rep(n - 1) .. (rest ~= "" and " " .. rest or "")
      else
        line = repl.prepare(line)
      end
    end
    lines[#lines + 1] = line
  end
  return lines, commands
end

-- The cell compiled: a function, or nil, the message and whether the cell is only unfinished
-- (Lua's "<eof>", as the prompt waits for more lines). When the last line is an expression, the
-- function returns its value.
function M.load_cell(code, count)
  local name = ("=[%s]"):format(count or "cell")
  local ok, lines, commands = pcall(M.source, code)
  if not ok then return nil, lines, false end
  local last = #lines
  while last > 0 and lines[last]:match("^%s*$") do last = last - 1 end
  if last > 0 and not commands[last] and not lines[last]:match("^%s") then
    local fn = load(table.concat(lines, "\n", 1, last - 1) .. "\nreturn " .. lines[last], name)
    if fn then return fn end
  end
  local fn, err = load(table.concat(lines, "\n"), name)
  if fn then return fn end
  return nil, err, err:sub(-5) == "<eof>"
end

-- Jupyter's is_complete: "complete", "incomplete" (the frontend adds a line) or "invalid".
function M.is_complete(code)
  if code:match("^%s*$") then return "complete" end
  local fn, _, unfinished = M.load_cell(code)
  if fn then return "complete" end
  return unfinished and "incomplete" or "invalid"
end

-- ---------------------------------------------------------------- values

local function escape(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end
M.escape = escape

local function number_text(v)
  if math.type(v) == "float" then return ("%.6g"):format(v) end
  return tostring(v)
end

-- Tensors with more elements than this are summarized (numpy's threshold and edge items).
M.threshold, M.edge = 1000, 3

-- The indices to show along a dim of n: all, or the first and last `edge` with a gap (false).
local function picks(n, summarize)
  local out = {}
  if not summarize or n <= 2 * M.edge then
    for i = 0, n - 1 do out[#out + 1] = i end
  else
    for i = 0, M.edge - 1 do out[#out + 1] = i end
    out[#out + 1] = false
    for i = n - M.edge, n - 1 do out[#out + 1] = i end
  end
  return out
end

-- The runs of consecutive indices in a list of picks: {first, last + 1} each.
local function runs(p)
  local out, start = {}, nil
  for i, v in ipairs(p) do
    if v and not start then start = i end
    if (not v or i == #p) and start then
      out[#out + 1] = { p[start], v and v + 1 or p[i - 1] + 1 }
      start = nil
    end
  end
  return out
end

-- values[r][c] of a 2-D tensor at the picked rows and columns, read as (at most four)
-- contiguous blocks: a summary reads only what it shows.
local function read_picks(m, row_picks, col_picks)
  local values = {}
  for _, r in ipairs(runs(row_picks)) do
    for _, c in ipairs(runs(col_picks)) do
      for i, row in ipairs(m:shrink({ r, c }):tolist()) do
        values[r[1] + i - 1] = values[r[1] + i - 1] or {}
        for j, v in ipairs(row) do values[r[1] + i - 1][c[1] + j - 1] = v end
      end
    end
  end
  return values
end

-- A tensor as an HTML table: a line with shape, dtype and device, then its values as rows of the
-- last dim (the leading dims' indices label each row); large tensors summarized as numpy does.
function M.tensor_html(t)
  local shape = t.shape
  for _, d in ipairs(shape) do
    if math.type(d) ~= "integer" then return nil end -- a symbolic shape: the text says it all
  end
  local numel = 1
  for _, d in ipairs(shape) do numel = numel * d end
  local cols = #shape > 0 and shape[#shape] or 1
  local rows = cols > 0 and numel // cols or 0
  local summarize = numel > M.threshold
  local row_picks, col_picks = picks(rows, summarize), picks(cols, summarize)
  local values = numel > 0 and read_picks(t:realize():reshape(rows, cols), row_picks, col_picks) or {}
  local shape_text = "(" .. table.concat(shape, ", ") .. (#shape == 1 and ",)" or ")")
  local out = { ('<div class="mg-tensor"><p><b>Tensor</b> shape <code>%s</code> dtype <code>%s</code> device <code>%s</code>%s</p>')
    :format(shape_text, escape(t.dtype), escape(t.device),
      summarize and (" &middot; %d elements, summarized"):format(numel) or "") }
  out[#out + 1] = '<table class="mg-tensor" style="font-family:monospace">'
  local labelled = #shape >= 2
  if #shape >= 1 then
    local head = { labelled and "<th></th>" or "" }
    for _, c in ipairs(col_picks) do head[#head + 1] = "<th>" .. (c and c or "&hellip;") .. "</th>" end
    out[#out + 1] = "<tr>" .. table.concat(head) .. "</tr>"
  end
  -- the index of flat row r along the leading dims: "2, 0"
  local function row_label(r)
    local idx = {}
    for d = #shape - 1, 1, -1 do
      idx[d] = r % shape[d]
      r = r // shape[d]
    end
    return table.concat(idx, ", ")
  end
  for _, r in ipairs(row_picks) do
    local cells = {}
    if labelled then cells[1] = "<th>" .. (r and row_label(r) or "&vellip;") .. "</th>" end
    for _, c in ipairs(col_picks) do
      local v = r and c and values[r][c]
      cells[#cells + 1] = "<td>" .. ((r and c) and escape(number_text(v)) or (r and "&hellip;" or "&vellip;")) .. "</td>"
    end
    out[#out + 1] = "<tr>" .. table.concat(cells) .. "</tr>"
  end
  out[#out + 1] = "</table></div>"
  return table.concat(out, "\n")
end

-- The display bundle of a cell's results: text/plain as the prompt prints them; text/html too
-- for one tensor.
function M.bundle(...)
  local n = select("#", ...)
  local texts = {}
  for i = 1, n do texts[i] = repl.format((select(i, ...))) end
  local b = { ["text/plain"] = table.concat(texts, "\t") }
  if n == 1 and show.typeof((...)) == "Tensor" then
    local ok, html = pcall(M.tensor_html, (...)) -- the text above already shows the value
    if ok then b["text/html"] = html end
  end
  return b
end

-- ---------------------------------------------------------------- :src highlighted

local C_WORDS = {}
for w in ([[if else for while do return break continue switch case default goto sizeof static const
  void int float double char unsigned signed long short bool struct typedef extern inline restrict
  __restrict__ __global __kernel __local kernel global local half size_t int8_t int16_t int32_t
  int64_t uint8_t uint16_t uint32_t uint64_t __attribute__ define declare ret br label i1 i8 i16
  i32 i64 ptr uniform layout buffer in out]]):gmatch("%S+") do C_WORDS[w] = true end

local STYLE = { kw = "color:#0033b3;font-weight:bold", num = "color:#1750eb", str = "color:#067d17",
  com = "color:#8c8c8c;font-style:italic", pre = "color:#9e880d" }
local function span(kind, text) return ('<span style="%s">%s</span>'):format(STYLE[kind], escape(text)) end

-- One line of C (or LLVM IR, GLSL, PTX) as HTML: keywords and types, numbers, strings, comments.
-- ir: the source is LLVM IR, where ';' starts a comment (in C it ends a statement).
local function highlight_line(line, ir)
  if line:match("^%s*#") then return span("pre", line) end
  local out, i = {}, 1
  while i <= #line do
    local s, e = line:find("^//.*", i)
    if not s and ir then s, e = line:find("^;.*", i) end
    if s then out[#out + 1] = span("com", line:sub(s, e)); i = e + 1; goto continue end
    s, e = line:find('^"[^"]*"?', i)
    if s then out[#out + 1] = span("str", line:sub(s, e)); i = e + 1; goto continue end
    s, e = line:find("^[%a_][%w_]*", i)
    if s then
      local w = line:sub(s, e)
      out[#out + 1] = C_WORDS[w] and span("kw", w) or escape(w)
      i = e + 1
      goto continue
    end
    s, e = line:find("^%d[%w%.]*", i)
    if s then out[#out + 1] = span("num", line:sub(s, e)); i = e + 1; goto continue end
    out[#out + 1] = escape(line:sub(i, i))
    i = i + 1
    ::continue::
  end
  return table.concat(out)
end

function M.highlight(src)
  local out = {}
  local ir = src:match("^define ") or src:match("\ndefine ")
  for line in (src .. "\n"):gmatch("(.-)\n") do out[#out + 1] = highlight_line(line, ir) end
  if out[#out] == "" then out[#out] = nil end
  return '<pre class="mg-src">' .. table.concat(out, "\n") .. "</pre>"
end

-- Runs fn, returning what it printed (print and io.write) instead of printing it.
local function captured(fn, ...)
  local buf = {}
  local old_print, old_write = _G.print, io.write
  _G.print = function(...)
    local t = table.pack(...)
    for i = 1, t.n do t[i] = tostring(t[i]) end
    buf[#buf + 1] = table.concat(t, "\t", 1, t.n) .. "\n"
  end
  io.write = function(...)
    for i = 1, select("#", ...) do buf[#buf + 1] = tostring((select(i, ...))) end
    return io.stdout
  end
  local res = table.pack(pcall(fn, ...))
  _G.print, io.write = old_print, old_write
  if not res[1] then error(res[2], 0) end
  return table.concat(buf), table.unpack(res, 2, res.n)
end
M.captured = captured

-- ---------------------------------------------------------------- :viz inline

-- The stage graphs of a VIZ page (engine/viz.cpp): {title, svg} for each stage laid out as a graph.
function M.viz_graphs(page)
  local out = {}
  for section in page:gmatch('<section class="stage".-</section>') do
    local title = section:match('data%-title="([^"]*)"') or "stage"
    local svg = section:match('<div class="graph">%s*(<svg.-</svg>)')
    if svg then out[#out + 1] = { title = title, svg = svg } end
  end
  return out
end

-- ---------------------------------------------------------------- completion and inspection

-- Jupyter's complete: the REPL's completer on the cell's line up to the cursor (a byte offset).
-- Returns the names and the byte offset where the completed word starts.
function M.complete(code, cursor)
  local before = code:sub(1, cursor)
  local line = before:match("[^\n]*$")
  local names, partial = repl.complete(line)
  return names, cursor - #partial
end

-- Jupyter's inspect (Shift-Tab): :help's text for the name at the cursor (a method, a global, a
-- colon command), or nil.
function M.inspect(code, cursor)
  local left = code:sub(1, cursor):match("[%w_%.:]*$")
  local right = code:sub(cursor + 1):match("^[%w_]*")
  local word = left .. right
  -- on a colon command's name (":sched|ule x"): that command
  local before = code:sub(1, cursor):match("[^\n]*$")
  local line = before .. code:sub(cursor + 1):match("^[^\n]*")
  local cmd = before:match("^:%a*$") and line:match("^:(%a+)")
  local name = cmd or word:match("([%w_]+)$")
  if not name or name == "" then return nil end
  local ok, text = pcall(captured, show.help, name)
  if ok then return text end
  return nil
end

-- ---------------------------------------------------------------- set-up

-- Called once by the kernel with its display function (a bundle: mime type -> text). :src, :viz
-- and plot.* show their output inline from then on.
function M.install(display)
  M.display = display
  local src, viz = show.src, show.viz
  function show.src(x, device)
    local text = captured(src, x, device)
    display({ ["text/plain"] = text, ["text/html"] = M.highlight(text) })
  end
  function show.viz(x, title)
    local path = show.viz_write(x, title)
    local f = assert(io.open(path, "rb"))
    local page = f:read("a")
    f:close()
    local parts = { ('<div class="mg-viz"><p>VIZ: %s (the whole page, with the rewrite steps)</p>'):format(escape(path)) }
    -- the tensor graph and the schedule open; each kernel's stages folded (a click opens one)
    for i, g in ipairs(M.viz_graphs(page)) do
      local fmt = i <= 2 and "<h4>%s</h4>\n%s" or "<details><summary><b>%s</b></summary>\n%s\n</details>"
      parts[#parts + 1] = fmt:format(escape(g.title), g.svg)
    end
    parts[#parts + 1] = "</div>"
    display({ ["text/plain"] = "VIZ: " .. path, ["text/html"] = table.concat(parts, "\n") })
    return path
  end
  require("datasets").redraw_progress = true
  require("plot").display = function(svg, title)
    -- from <svg on, as IPython's SVG does: an XML declaration inside a page is an error to some readers
    -- (nbconvert's HTML export)
    -- and as HTML too, which frontends prefer: nbconvert 6.5's HTML export strips the elements of an
    -- image/svg+xml output (its SVG cleaner), leaving a blank box
    svg = svg:match("<svg.*") or svg
    display({ ["image/svg+xml"] = svg, ["text/html"] = '<div class="mg-plot">' .. svg .. "</div>",
      ["text/plain"] = "<plot: " .. (title or "") .. ">" })
  end
end

-- `arg` for a script run as a notebook: arg[0] is the script's path, the rest the words of
-- MG_NOTEBOOK_ARGS (CI runs the notebooks at the scripts' short lengths: "--steps 200").
function M.script_args(path)
  local a = { [0] = path }
  for w in (os.getenv("MG_NOTEBOOK_ARGS") or ""):gmatch("%S+") do a[#a + 1] = w end
  return a
end

return M
