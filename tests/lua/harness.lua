-- Tiny test harness shared by tests/lua/*.lua: load with dofile(arg[0]:match("^(.*/)") .. "harness.lua").
local H = { failed = 0, passed = 0 }

-- The interpreter running the test: the lowest negative index of arg (arg[0] is the script), for
-- tests that start moongrad again; and a value quoted for the shell.
H.exe = (function()
  local i = -1
  while arg[i - 1] do i = i - 1 end
  return arg[i]
end)()
function H.sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- MG_TEST_ONLY and MG_TEST_SKIP, plain-text parts of test names separated by "|": the tests a run
-- takes (CMakeLists.txt splits a long file into CTest runs that go in parallel).
local function any_part(list, name)
  for part in list:gmatch("[^|]+") do
    if name:find(part, 1, true) then return true end
  end
  return false
end
local only, skip = os.getenv("MG_TEST_ONLY"), os.getenv("MG_TEST_SKIP")

-- Runs one named test; a failing assert is reported and counted, the other tests still run.
function H.test(name, fn)
  if (only and not any_part(only, name)) or (skip and any_part(skip, name)) then return end
  local ok, err = pcall(fn)
  if ok then
    H.passed = H.passed + 1
  else
    H.failed = H.failed + 1
    io.stderr:write(("FAIL %s: %s\n"):format(name, tostring(err)))
  end
end

-- Runs a test that checks what only the CPU device does (its C source, its hand-coded opts); on
-- another default device it is reported as skipped.
function H.cpu_test(name, fn)
  if Device.DEFAULT ~= "CPU" then
    print(("skipped on %s (checks the CPU device's own output): %s"):format(Device.DEFAULT, name))
    return
  end
  H.test(name, fn)
end

-- Asserts fn errors and that the message contains each of the plain-text fragments.
function H.errors(fn, ...)
  local ok, msg = pcall(fn)
  assert(not ok, "expected an error, but the call succeeded")
  msg = tostring(msg)
  for _, frag in ipairs({ ... }) do
    assert(msg:find(frag, 1, true), ("error message %q does not mention %q"):format(msg, frag))
  end
  return msg
end

-- Deep comparison of nested lists; floats within tol when tol is given.
function H.same(got, want, tol, path)
  path = path or "value"
  if type(want) == "table" then
    assert(type(got) == "table", path .. ": expected a list, got " .. tostring(got))
    assert(#got == #want, ("%s: expected %d entries, got %d"):format(path, #want, #got))
    for i = 1, #want do H.same(got[i], want[i], tol, path .. "[" .. i .. "]") end
  elseif tol and type(want) == "number" then
    assert(type(got) == "number" and math.abs(got - want) <= tol,
      ("%s: expected %s (+-%g), got %s"):format(path, tostring(want), tol, tostring(got)))
  else
    assert(got == want and math.type(got) == math.type(want),
      ("%s: expected %s (%s), got %s (%s)"):format(path, tostring(want), math.type(want) or type(want),
        tostring(got), math.type(got) or type(got)))
  end
end

-- Ends the script: non-zero exit (through an error) when any test failed.
function H.done()
  print(("%d passed, %d failed"):format(H.passed, H.failed))
  if only and H.passed + H.failed == 0 then error("MG_TEST_ONLY=" .. only .. " names no test here", 0) end
  if H.failed > 0 then error(("%d test(s) failed"):format(H.failed), 0) end
end

-- The number of elements of a shape (a Lua list).
function H.numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- A flat list and a shape -> a nested Lua table (the single value for a 0-d shape).
function H.nest(flat, shape)
  if #shape == 0 then return flat[1] end
  local pos = 0
  local function build(d)
    local t = {}
    for i = 1, shape[d] do
      if d == #shape then
        pos = pos + 1
        t[i] = flat[pos]
      else
        t[i] = build(d + 1)
      end
    end
    return t
  end
  return build(1)
end

return H
