-- Devices written in Lua (Device.register, Device.bytes, Device.load_kernel): values against the
-- CPU device, and the errors that bad input gives (the process stays alive).
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test, same, errors = H.test, H.same, H.errors

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local compiled = 0
local function so_of(fn, src, flags)
  compiled = compiled + 1
  local base = ("%s/%s_%d"):format(dir, fn, compiled)
  local f = assert(io.open(base .. ".c", "w"))
  f:write(src)
  f:close()
  assert(os.execute(("clang-15 -O1 -fPIC -shared %s -o %s.so %s.c -lm -w"):format(flags or "", base, base)))
  return base .. ".so"
end
local copies = { into = 0, out = 0 }
local spec = {
  alloc = function(n) return Device.bytes(n) end,
  copyin = function(b, s) copies.into = copies.into + 1; b:write(0, s) end,
  copyout = function(b, n) copies.out = copies.out + 1; return b:read(0, n) end,
  compile = function(fn, src) return Device.load_kernel(so_of(fn, src), fn) end,
  run = function(k, bufs, launch)
    local n = launch.global_size[1] or 1
    for i = 0, n - 1 do k(bufs, i, n) end
  end,
}
Device.register("TESTLUA", spec)

test("a Lua device computes what the CPU device does", function()
  local x = Tensor.randn(5, 7)
  local y = Tensor.randn(7, 3)
  local xt, yt = x:to("TESTLUA"), y:to("TESTLUA")
  same((xt + 1):tolist(), (x + 1):tolist(), 1e-6)
  same(xt:matmul(yt):tolist(), x:matmul(y):tolist(), 1e-5)
  same(xt:sum():item(), x:sum():item(), 1e-4)
  same(xt:softmax(-1):tolist(), x:softmax(-1):tolist(), 1e-6)
  same(xt:max(0):tolist(), x:max(0):tolist())
  same(Tensor({ 1, 2, 3 }, { device = "TESTLUA" }):cumsum():tolist(), { 1, 3, 6 })
  assert(copies.into > 0 and copies.out > 0, "copyin and copyout went through Lua")
end)

test("ByteBuffer: read, write, length, and its bounds", function()
  local b = Device.bytes(8)
  assert(#b == 8 and b:read() == string.rep("\0", 8))
  b:write(2, "ab")
  same(b:read(2, 2), "ab")
  errors(function() b:write(7, "xy") end, "outside a ByteBuffer of 8 bytes")
  errors(function() b:read(-1, 2) end, "outside")
  errors(function() Device.bytes(-1) end, "size must be")
  assert(tostring(b):find("ByteBuffer%(8 bytes"))
end)

test("Device.load_kernel: a bad path, a missing function, bad buffers", function()
  errors(function() Device.load_kernel(dir .. "/none.so", "f") end, "cannot load", "none.so")
  local so = so_of("twice", "void twice(void** b, int core, int ncores) { float* x = b[0]; x[core] *= 2; }")
  errors(function() Device.load_kernel(so, "thrice") end, "has no function thrice")
  local k = Device.load_kernel(so, "twice")
  local b = Device.bytes(8)
  b:write(0, string.pack("<ff", 1.5, 4))
  for i = 0, 1 do k({ b }, i, 2) end
  same({ string.unpack("<ff", b:read()) }, { 3.0, 8.0, 9 })
  errors(function() k({ "not a buffer" }, 0, 1) end, "buffer 1 is not a ByteBuffer")
  errors(function() k({ b }, 2, 2) end, "core must be 0 to ncores - 1")
end)

test("Device.register: bad tables and names, and errors inside the device's functions", function()
  errors(function() Device.register("BAD", { alloc = spec.alloc }) end, "needs the functions", "copyin", "run")
  errors(function() Device.register("CPU", spec) end, "CPU is built in")
  errors(function() Device.register("lower", spec) end, "upper-case")
  local broken = {}
  for k, v in pairs(spec) do broken[k] = v end
  broken.compile = function() error("no compiler here") end
  Device.register("BROKEN", broken)
  local t = Tensor({ 1, 2 }, { device = "BROKEN" })
  errors(function() return (t + 1):tolist() end, "BROKEN.compile", "no compiler here")
  broken.alloc = function(n) return Device.bytes(n - 1) end
  Device.register("BROKEN", broken) -- again: replaces its functions
  errors(function() return Tensor({ 1, 2, 3 }, { device = "BROKEN" }):tolist() end, "BROKEN.alloc must return Device.bytes")
  -- the process is fine, the other devices too
  same((Tensor({ 1, 2 }) + 1):tolist(), { 2, 3 })
end)

test("registering a name again replaces the functions and forgets their kernels", function()
  local counts = { 0, 0 }
  local function counted(i)
    local t = {}
    for k, v in pairs(spec) do t[k] = v end
    t.compile = function(fn, src) counts[i] = counts[i] + 1; return spec.compile(fn, src) end
    return t
  end
  Device.register("AGAIN", counted(1))
  local x = Tensor({ 1.5, 2.5 }, { device = "AGAIN" })
  same((x * 3):tolist(), { 4.5, 7.5 })
  Device.register("AGAIN", counted(2))
  same((x * 3):tolist(), { 4.5, 7.5 }) -- the same kernel, compiled by the new functions
  same(counts, { 1, 1 })
end)

test("a device's function may use the device again (a tensor made inside run)", function()
  local t, inside, seen = {}, false, nil
  for k, v in pairs(spec) do t[k] = v end
  t.run = function(k, bufs, launch)
    if not inside then
      inside = true
      seen = Tensor({ 7, 8 }, { device = "REENTER" }):tolist()
      inside = false
    end
    return spec.run(k, bufs, launch)
  end
  Device.register("REENTER", t)
  local a = Tensor({ 1, 2, 3 }, { device = "REENTER" })
  same((a + 1):tolist(), { 2, 3, 4 })
  same(seen, { 7, 8 })
end)

os.execute("rm -rf " .. dir)
H.done()
