-- plot: line plots and pictures of tensors, drawn by gnuplot (Debian's gnuplot-nox) as SVG. In the
-- notebook kernel a plot shows inline (stdlib/notebook.lua sets plot.display); elsewhere it is
-- written to a file whose path is printed and returned.
--   plot.line(xs, ys, {title=, xlabel=, ylabel=, labels=, file=, logy=, xtics=})   ys: a list, a
--       Tensor, or a list of them (several series, named by labels); xs may be nil (1, 2, 3, ...);
--       xtics: a name for each x = 1, 2, ... (categories)
--   plot.image(t, {title=, file=})   a 2-D tensor (or 1xHxW) as a grey picture: a digit, a feature map
local M = {}

M.display = nil -- function(svg, title), set by the notebook kernel
M.dir = (os.getenv("TMPDIR") or "/tmp") .. "/moongrad-plots" -- where plots go outside a notebook

-- A Tensor or a list as a flat Lua list of numbers.
local function numbers(v, what)
  if show.typeof(v) == "Tensor" then return v:flatten():tolist() end
  if type(v) ~= "table" then error(("plot: %s must be a list or a Tensor, got a %s"):format(what, type(v)), 3) end
  return v
end

local function quote(s) return '"' .. tostring(s):gsub('[\\"]', "\\%0") .. '"' end
-- a path for the shell (Lua's %q is a Lua literal: a $ or ` in TMPDIR would reach the shell)
local function sh(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Runs gnuplot on the script, which writes SVG to `out`; returns the SVG text.
local function gnuplot(script, out)
  local gp = out .. ".gp"
  local f = assert(io.open(gp, "w"))
  f:write("set terminal svg size 640,400 fixed enhanced font 'DejaVu Sans,11' background '#ffffff'\n")
  f:write("set output " .. quote(out) .. "\n", script)
  f:close()
  local p = io.popen("gnuplot " .. sh(gp) .. " 2>&1", "r")
  local log = p and p:read("a") or ""
  local ok = p and p:close()
  os.remove(gp)
  if not ok then
    if log:match("not found") or log == "" then
      error("plot needs gnuplot (Debian: apt install gnuplot-nox): " .. log, 3)
    end
    error("plot: gnuplot failed: " .. log, 3)
  end
  local g = assert(io.open(out, "rb"))
  local svg = g:read("a")
  g:close()
  return svg
end

local count = 0
-- Draws the gnuplot script: inline in a notebook, else into a file (printed and returned).
local function finish(script, opts, name)
  count = count + 1
  local file = opts.file
  if not file then
    os.execute("mkdir -p " .. sh(M.dir))
    local slug = (opts.title or name):gsub("[^%w]+", "_"):sub(1, 40)
    file = ("%s/%s_%d.svg"):format(M.dir, slug, count)
  end
  local svg = gnuplot(script, file)
  if M.display then
    if not opts.file then os.remove(file) end
    M.display(svg, opts.title)
    return -- no value: a cell ending in a plot shows the plot alone
  end
  print("plot: " .. file)
  return file
end

local function header(opts)
  local s = {}
  if opts.title then s[#s + 1] = "set title " .. quote(opts.title) end
  if opts.xlabel then s[#s + 1] = "set xlabel " .. quote(opts.xlabel) end
  if opts.ylabel then s[#s + 1] = "set ylabel " .. quote(opts.ylabel) end
  if opts.logy then s[#s + 1] = "set logscale y" end
  if opts.xtics then -- names for x = 1, 2, ...: a category on each
    local t = {}
    for i, name in ipairs(opts.xtics) do t[i] = ("%s %d"):format(quote(name), i) end
    s[#s + 1] = "set xtics (" .. table.concat(t, ", ") .. ")\nset xrange [0.5:" .. (#opts.xtics + 0.5) .. "]"
  end
  return table.concat(s, "\n") .. "\n"
end

function M.line(xs, ys, opts)
  opts = opts or {}
  local series = ys
  if type(ys) ~= "table" or type(ys[1]) == "number" or show.typeof(ys) == "Tensor" then series = { ys } end
  if #series == 0 then error("plot.line: no values to plot", 2) end
  local x = xs and numbers(xs, "xs")
  local data, plots = {}, {}
  for k, s in ipairs(series) do
    local y = numbers(s, "ys")
    if x and #x ~= #y then
      error(("plot.line: %d xs but %d values in series %d"):format(#x, #y, k), 2)
    end
    data[#data + 1] = ("$s%d << EOD"):format(k)
    for i, v in ipairs(y) do data[#data + 1] = ("%.9g %.9g"):format(x and x[i] or i, v) end
    data[#data + 1] = "EOD"
    local label = opts.labels and opts.labels[k]
    plots[#plots + 1] = ("$s%d using 1:2 with %s lw 2 %s"):format(k, opts.xtics and "linespoints pt 7" or "lines",
      label and ("title " .. quote(label)) or "notitle")
  end
  local script = table.concat(data, "\n") .. "\n" .. header(opts) .. "set grid\nplot " .. table.concat(plots, ", ") .. "\n"
  return finish(script, opts, "line")
end

function M.image(t, opts)
  opts = opts or {}
  if show.typeof(t) ~= "Tensor" then error("plot.image: expects a Tensor, got a " .. show.typeof(t), 2) end
  local shape = t.shape
  if #shape == 3 and shape[1] == 1 then t, shape = t:reshape(shape[2], shape[3]), { shape[2], shape[3] } end
  if #shape ~= 2 then
    error(("plot.image: expects a 2-D tensor (or 1xHxW), got shape (%s)"):format(table.concat(shape, ", ")), 2)
  end
  local rows = t:cast("float32"):tolist()
  local data = { "$img << EOD" }
  for _, row in ipairs(rows) do
    local r = {}
    for j, v in ipairs(row) do r[j] = ("%.6g"):format(v) end
    data[#data + 1] = table.concat(r, " ")
  end
  data[#data + 1] = "EOD"
  local h, w = shape[1], shape[2]
  local script = table.concat(data, "\n") .. "\n" .. header(opts) ..
      ("set size ratio %g\nset xrange [-0.5:%g]\nset yrange [%g:-0.5]\nset palette grey\nunset key\nplot $img matrix with image%s\n")
      -- pixels: one rectangle each, sharp when scaled (a browser smooths the embedded bitmap)
      :format(h / w, w - 0.5, h - 0.5, h * w <= 128 * 128 and " pixels" or "")
  return finish(script, opts, "image")
end

return M
