-- The moongrad command line: -e, piped stdin, exit codes and error messages.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test

local exe, sh_quote = H.exe, H.sh_quote

-- Runs a shell command line; returns its output (stdout and stderr) and exit code.
local function run(cmdline)
  local f = assert(io.popen(cmdline .. " 2>&1"))
  local out = f:read("a")
  local _, _, code = f:close()
  return out, code
end

test("-e runs code", function()
  local out, code = run(sh_quote(exe) .. " -e " .. sh_quote("print((Tensor{1,2} * 3):tolist()[2])"))
  assert(code == 0 and out == "6\n", ("got %q, exit %s"):format(out, tostring(code)))
end)

test("an engine error exits 1 with 'moongrad: <msg>'", function()
  local out, code = run(sh_quote(exe) .. " -e " .. sh_quote("local x = Tensor{1,2} + Tensor{1,2,3}"))
  assert(code == 1, "exit code " .. tostring(code))
  assert(out:find("^moongrad: %(command line%):1: Tensor %+: "), "message: " .. out)
  assert(out:find("(2,)", 1, true) and out:find("(3,)", 1, true), "shapes not named: " .. out)
end)

test("a Lua error exits 1", function()
  local out, code = run(sh_quote(exe) .. " -e " .. sh_quote("error('boom')"))
  assert(code == 1 and out:find("moongrad: .*boom"), ("got %q, exit %s"):format(out, tostring(code)))
end)

test("piped stdin is the prompt without decorations; '-' runs it as one chunk", function()
  local src = "local t = Tensor{1,2,3}\nt:sum():item() * 2"
  local out, code = run("printf " .. sh_quote(src) .. " | " .. sh_quote(exe))
  assert(code == 0 and out == "12\n", ("got %q, exit %s"):format(out, tostring(code)))
  out, code = run("printf " .. sh_quote(src) .. " | " .. sh_quote(exe) .. " -")
  assert(code == 1 and out:find("unexpected symbol"), ("got %q, exit %s"):format(out, tostring(code)))
  out, code = run("printf " .. sh_quote("local t = Tensor{1,2,3}\nprint(t:sum():item())") .. " | " .. sh_quote(exe) .. " -")
  assert(code == 0 and out == "6\n", ("got %q, exit %s"):format(out, tostring(code)))
end)

test("an unknown DEV= is an error at start-up naming the known devices", function()
  local out, code = run("DEV=NOPE " .. sh_quote(exe) .. " -e " .. sh_quote("print(1)"))
  assert(code == 1 and out:find("DEV=NOPE") and out:find("known: .*CPU"), ("got %q, exit %s"):format(out, tostring(code)))
  out, code = run("DEV=cpu " .. sh_quote(exe) .. " -e " .. sh_quote("print(Device.DEFAULT)"))
  assert(code == 0 and out == "CPU\n", ("got %q, exit %s"):format(out, tostring(code)))
end)

test("script arguments arrive in arg and ...", function()
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write("local a, b = ...\nprint(#arg, arg[1], arg[2], a, b)\n")
  f:close()
  local out, code = run(sh_quote(exe) .. " " .. sh_quote(path) .. " x y")
  os.remove(path)
  assert(code == 0 and out == "2\tx\ty\tx\ty\n", ("got %q, exit %s"):format(out, tostring(code)))
end)

test("DEBUG=3 prints the C preamble once per process, then only each kernel's own source", function()
  -- three kernels: a sum, and two that call mg_exp2f (the second with the same helper)
  local code = "print((Tensor.rand(4) + 1):sum():item()); print((Tensor.rand(3) * 2):exp():max():item()); " ..
    "print((Tensor.rand(5) * 3):exp():sum():item())"
  local out, rc = run("env -u NOOPT -u BEAM DEBUG=3 DEV=CPU " .. sh_quote(exe) .. " -e " .. sh_quote(code))
  assert(rc == 0, out)
  local function count(s) return select(2, out:gsub(s:gsub("%p", "%%%0"), "")) end
  assert(count("(void** bufs, int core, int ncores)") == 3, "each kernel's function is printed:\n" .. out)
  assert(count("float exp2f(float)") == 1, "the math declarations are printed once:\n" .. out)
  assert(count("#define INFINITY") == 1, "the defines are printed once:\n" .. out)
  assert(count("static inline float mg_exp2f(float x)") == 1, "a helper is printed with its first kernel only:\n" .. out)
  assert(count("// (the preamble printed with an earlier kernel goes here)") == 2, out)
end)

test("--version, --help, unknown options, missing files", function()
  local out, code = run(sh_quote(exe) .. " --version")
  assert(code == 0 and out:find("^moongrad %d"), out)
  out, code = run(sh_quote(exe) .. " --help")
  assert(code == 0 and out:find("usage"), out)
  out, code = run(sh_quote(exe) .. " --no-such-option")
  assert(code == 1 and out:find("unknown option"), out)
  out, code = run(sh_quote(exe) .. " /no/such/file.lua")
  assert(code == 1 and out:find("^moongrad: cannot open"), out)
end)

H.done()
