-- lesson: small helpers the learning scripts (scripts/NN_*.lua) share. Each script prints what
-- it teaches and asserts it, so it doubles as a test.
local M = {}

function M.section(title)
  print()
  print(("="):rep(72))
  print(title)
  print(("="):rep(72))
end

-- Draws with stdlib/plot.lua: plot.line or plot.image (kind), inline in a notebook, a file whose
-- path is printed at the terminal. Where gnuplot is missing the lesson goes on and says why.
function M.plot(kind, ...)
  local ok, err = pcall(require("plot")[kind], ...)
  if not ok then print("(no plot: " .. tostring(err) .. ")") end
end

-- Compares a (nested) list from tolist() with plain Lua values; floats within tol if given.
function M.same(got, want, tol, path)
  path = path or "value"
  if type(want) == "table" then
    assert(type(got) == "table", path .. ": expected a list, got " .. tostring(got))
    assert(#got == #want, ("%s: expected %d entries, got %d"):format(path, #want, #got))
    for i = 1, #want do M.same(got[i], want[i], tol, path .. "[" .. i .. "]") end
  else
    local ok = tol and math.abs(got - want) <= tol or got == want
    assert(ok, ("%s: expected %s, got %s"):format(path, tostring(want), tostring(got)))
  end
end

-- Runs fn and returns how many kernels it ran, then fn's results.
function M.count_kernels(fn, ...)
  local before = GlobalCounters.kernel_count
  local res = table.pack(fn(...))
  return GlobalCounters.kernel_count - before, table.unpack(res, 1, res.n)
end

-- Asserts that the kernel source src has a line matching the Lua pattern, and prints it
-- with a label: "the ADD:   float alu1 = (val0+val1);".
function M.find_in(src, pattern, what)
  for line in src:gmatch("[^\n]+") do
    if line:find(pattern) then
      print(("  %-22s %s"):format(what .. ":", line:match("^%s*(.-)%s*$")))
      return line
    end
  end
  error(("no line for %s (pattern %q) in the kernel:\n%s"):format(what, pattern, src), 2)
end

-- The kernel names in a schedule: {"E_16", "r_4_4"}.
function M.names(items)
  local out = {}
  for i, it in ipairs(items) do out[i] = it.name end
  return out
end

-- A plain-Lua matrix product of two nested lists, the reference for matmul.
function M.matmul(a, b)
  local out = {}
  for i = 1, #a do
    out[i] = {}
    for j = 1, #b[1] do
      local acc = 0
      for k = 1, #b do acc = acc + a[i][k] * b[k][j] end
      out[i][j] = acc
    end
  end
  return out
end

return M
