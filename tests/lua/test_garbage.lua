-- The REPL survives 1,000 lines of garbage piped into it: random bytes, and random sequences
-- of real tokens (tensor calls, colon commands, operators) that reach the engine's checks.
-- Deterministic: the lines come from a fixed seed.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local exe = H.exe

math.randomseed(20261122)
local R = math.random

local tokens = {
  "Tensor", "Tensor{1,2,3}", "Tensor{{1,2},{3,4}}", "Tensor.ones(2,3)", "Tensor.rand(3)", "Tensor.arange(0,6)",
  "Tensor.eye(2)", "Tensor.zeros(0)", "x", "y", ":", ".", ",", "(", ")", "{", "}", "[", "]", "+", "-", "*", "/",
  "//", "^", "%", "=", "==", "..", "#", "nil", "true", "1", "2", "-1", "0", "0.5", "3", "'float16'", "'int8'",
  "'bool'", "'nope'", "relu", "sum", "max", "reshape", "permute", "expand", "pad", "shrink", "flip", "cast",
  "matmul", "softmax", "argmax", "cumsum", "where", "tolist", "item", "realize", "schedule", "uop", "st", "T",
  "shape", "dtype", "{axis=0}", "{axis=5}", "{keepdim=true}", "{{1,1},{0,2}}", "{{0,1}}", "local", "function",
  "end", "if", "then", "return", "do", "for", "in", "and", "or", "not", "show", "src", "Context", "{DEBUG=0}",
  "Device", "DEFAULT", "dtypes", "float32", "GlobalCounters", "ShapeTracker", "contiguous", "print", "tostring",
}
local commands = { ":debug", ":beam", ":noopt", ":device", ":schedule", ":ir", ":src", ":kernels", ":time", ":help",
  ":", "::", ":nosuch" }

local function token_line()
  local parts = {}
  if R() < 0.25 then parts[1] = commands[R(#commands)] end
  for _ = 1, R(1, 12) do parts[#parts + 1] = tokens[R(#tokens)] end
  return table.concat(parts, R() < 0.5 and " " or "")
end

local function byte_line()
  local b = {}
  for k = 1, R(0, 80) do
    local c = R(1, 255)
    if c == 10 then c = 32 end
    b[k] = string.char(c)
  end
  return table.concat(b)
end

-- well-formed calls with random (often wrong) arguments: these reach the engine's checks
local methods = {}
for name, fn in pairs(Tensor) do
  if type(fn) == "function" and name ~= "manual_seed" then methods[#methods + 1] = name end
end
table.sort(methods)
local receivers = { "x", "y", "Tensor.ones(2, 3)", "Tensor{{1,2},{3,4}}", "Tensor{true,false}", "Tensor.zeros(0, 2)",
  "Tensor.arange(0, 4):cast('float16')", "x.T", "y:reshape(3, 1)" }
local args = { "0", "1", "2", "3", "-1", "-3", "0.5", "nil", "true", "'float16'", "'int8'", "'junk'", "{1, 2}",
  "{{1,1},{0,0}}", "{{0,1}}", "{axis=1}", "{axis=-1, keepdim=true}", "{nope=1}", "x", "y", "Tensor{1,2}", "{}", "7",
  "'uint8'", "function() end" }
local function call_line()
  local a = {}
  for k = 1, R(0, 3) do a[k] = args[R(#args)] end
  local call = ("%s:%s(%s)"):format(receivers[R(#receivers)], methods[R(#methods)], table.concat(a, ", "))
  local wrap = R(1, 6)
  if wrap == 1 then return ":src " .. call end
  if wrap == 2 then return ":kernels " .. call end
  if wrap == 3 then return "(" .. call .. "):tolist()" end
  return call
end

local lines = {}
for k = 1, 1000 do
  local r = R()
  local l = r < 0.4 and call_line() or r < 0.7 and token_line() or byte_line()
  -- long brackets ([[, [=, --[[) would swallow every later line into one string or comment
  l = l:gsub("%[%[", "[ ["):gsub("%[=", "[ =")
  if k % 97 == 0 then l = "x = Tensor.rand(2, 3)" end -- give the token lines something to work on
  if k % 89 == 0 then l = "y = Tensor{1, 2, 3}" end
  lines[#lines + 1] = l
end
-- close whatever block the last lines opened, then prove the prompt still evaluates
for _, l in ipairs({ "end", "end", "end", "until true", ")", "}", "print('survived', (Tensor{1,2,3} * 2):sum():item())" }) do
  lines[#lines + 1] = l
end

local input, err = os.tmpname(), os.tmpname()
local f = assert(io.open(input, "wb"))
f:write(table.concat(lines, "\n"), "\n")
f:close()
local p = assert(io.popen(("env -u DEBUG %s < %s 2> %s"):format(exe, input, err)))
local out = p:read("a")
local _, how, code = p:close()
local errors = assert(io.open(err, "rb")):read("a")
if os.getenv("KEEP") then print(input, err) else os.remove(input) end
if not os.getenv("KEEP") then os.remove(err) end

H.test("the process exits normally, with status 1 for the failed entries", function()
  assert(how == "exit" and code == 1, ("ended by %s %s"):format(how, tostring(code)))
end)
H.test("the last line still ran", function()
  assert(out:find("survived\t12\n", 1, true), "no 'survived' line; stdout ends with:\n" .. out:sub(-500))
end)
H.test("every failure is a reported error, none an engine bug", function()
  local _, n = errors:gsub("error: ", "")
  assert(n > 500, ("only %d errors reported for 1000 garbage lines"):format(n))
  assert(not errors:find("internal error", 1, true), "an internal engine error:\n" ..
    (errors:match("[^\n]*internal error[^\n]*") or ""))
end)
H.done()
