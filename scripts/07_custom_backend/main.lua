-- 07_custom_backend: Project 7 of the guide, the capstone. A device written in Lua, registered
-- as MY, that runs every kernel the engine gives it.
--   1. the device: an allocator of Lua-visible bytes, a compiler (clang, from Lua), a runner
--   2. Tensor({1,2,3}, {device="MY"}) + Tensor({4,5,6}, {device="MY"}): the kernel, the bytes
--   3. more ops on MY against the CPU device
--   4. a 256x256 matmul on MY, CPU, LLVM, CL and VULKAN: GFLOPS, and MY's runtime overhead
-- The device itself is my_device.lua beside this file; the engine hooks it uses are
-- Device.register, Device.bytes and Device.load_kernel (interp/bind_device.cpp).
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local lesson = require "lesson"
local my_device = require "my_device"
local section, same = lesson.section, lesson.same
Tensor.manual_seed(7)

------------------------------------------------------------------------------
section("1. The device: five Lua functions")

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local device, stats = my_device.new(dir)
Device.register("MY", device)
local names = Device.names()
print("devices now: " .. table.concat(names, ", "))
local listed = false
for _, n in ipairs(names) do listed = listed or n == "MY" end
assert(listed, "MY is a device like the others")

------------------------------------------------------------------------------
section('2. Tensor({1,2,3}, {device="MY"}) + Tensor({4,5,6}, {device="MY"})')

local a, b = Tensor({ 1, 2, 3 }, { device = "MY" }), Tensor({ 4, 5, 6 }, { device = "MY" })
local c = a + b
print("the kernel the engine renders and MY compiles:")
io.write(c:schedule()[1].src:match("(void E_.*)"))
same(c:tolist(), { 5, 7, 9 })
print(("c = {%s} on %s"):format(table.concat(c:tolist(), ", "), c.device))
-- the output's bytes are in a ByteBuffer that Lua can read: three little-endian int32s (a
-- tensor of Lua integers is int32, as in tinygrad)
local out = stats.last.bufs[1]
print(("its output buffer: %s, bytes %q"):format(tostring(out), out:read(0, 12)))
print(("read back with string.unpack: %d %d %d"):format(string.unpack("<i4i4i4", out:read(0, 12))))
same({ string.unpack("<i4i4i4", out:read(0, 12)) }, { 5, 7, 9, 13 }) -- 13: where unpack stopped
print(("so far: %d buffers (%d bytes), %d kernel compiled, %d calls of it"):format(stats.allocs, stats.bytes,
  stats.compiled, stats.calls))

------------------------------------------------------------------------------
section("3. More ops on MY, against the CPU device")

local x = Tensor.randn(16, 32)
local w = Tensor.randn(32, 8)
local xm, wm = x:to("MY"), w:to("MY")
local checks = {
  { "matmul", function(p, q) return p:matmul(q) end },
  { "softmax", function(p, q) return p:matmul(q):softmax(-1) end },
  { "sum", function(p) return p:sum() end },
  { "relu, max over axis 0", function(p) return p:relu():max(0) end },
}
for _, chk in ipairs(checks) do
  local mine, ref = chk[2](xm, wm):tolist(), chk[2](x, w):tolist()
  same(mine, ref, 1e-4)
  print(("%-24s matches the CPU device"):format(chk[1]))
end

------------------------------------------------------------------------------
section("4. A 256x256 matmul on every device: GFLOPS, and MY's overhead")

local N = 256
local A, B = Tensor.rand(N, N), Tensor.rand(N, N)
Tensor.realize_all(A, B)
local flops = 2 * N * N * N
local function best_ms(dev)
  local p, q = A:to(dev), B:to(dev)
  Tensor.realize_all(p, q)
  p:matmul(q):realize() -- compile
  local best = math.huge
  for _ = 1, 5 do
    local t0 = GlobalCounters.time_sum_s
    p:matmul(q):realize()
    best = math.min(best, (GlobalCounters.time_sum_s - t0) * 1e3)
  end
  same(p:matmul(q):to("CPU"):tolist(), A:matmul(B):tolist(), 1e-3)
  return best
end
local _, why = Device.names()
local rows = {}
print(("%-8s %10s %10s   %s"):format("device", "ms", "GFLOPS", "how"))
for _, dev in ipairs({ "MY", "CPU", "LLVM", "CL", "VULKAN" }) do
  if why[dev] then
    print(("%-8s %10s %10s   cannot run here: %s"):format(dev, "-", "-", why[dev]))
  else
    local ms = best_ms(dev)
    rows[dev] = ms
    local how = dev == "MY" and ("Lua runner, %d calls per matmul"):format(stats.last.n)
      or dev == "CPU" and "C via clang in process, all cores" or dev == "LLVM" and "LLVM IR, ORC JIT, all cores"
      or dev == "CL" and "OpenCL on PoCL" or "GLSL -> SPIR-V on lavapipe"
    print(("%-8s %10.3f %10.1f   %s"):format(dev, ms, flops / ms * 1e-6, how))
  end
end
local ran, gflops = {}, {}
for _, dev in ipairs({ "MY", "CPU", "LLVM", "CL", "VULKAN" }) do
  if rows[dev] then ran[#ran + 1], gflops[#gflops + 1] = dev, flops / rows[dev] * 1e-6 end
end
lesson.plot("line", nil, gflops, { title = "256x256 matmul: GFLOPS by device", xtics = ran, logy = true, ylabel = "GFLOPS" })
assert(rows.MY and rows.CPU, "MY and CPU run everywhere")

-- MY's runtime overhead: the same compiled kernel, once through the Lua runner (one call per
-- index) and once as a single call that runs every index (ncores = 1). The difference is the
-- price of crossing from Lua into C per index. The matmul's outer loop is short (its rows come in
-- tiles of 8), so the crossing hardly shows; an elementwise add of 2^20 floats has many more
-- indices, each with little work.
local function overhead(what, runner_ms)
  local last = stats.last
  local one = math.huge
  for _ = 1, 5 do
    local t0 = show.clock()
    last.program.kernel(last.bufs, 0, 1)
    one = math.min(one, (show.clock() - t0) * 1e3)
  end
  print(("%-22s %8d calls  %9.3f ms through the runner, %9.3f ms in one call: overhead %.2fx"):format(what,
    last.n, runner_ms, one, runner_ms / one))
  return runner_ms / one, last.n
end
print()
local mm_ratio = overhead("matmul 256x256", rows.MY)
local X1, X2 = Tensor.rand(1 << 20):to("MY"), Tensor.rand(1 << 20):to("MY")
Tensor.realize_all(X1, X2)
;(X1 + X2):realize()
local add_ms = math.huge
for _ = 1, 5 do
  local t0 = GlobalCounters.time_sum_s
  ;(X1 + X2):realize()
  add_ms = math.min(add_ms, (GlobalCounters.time_sum_s - t0) * 1e3)
end
local add_ratio, add_calls = overhead("add of 2^20 floats", add_ms)
print(("per call, the runner costs about %.2f us"):format((add_ms - add_ms / add_ratio) * 1e3 / add_calls))
print(("MY against CPU on the matmul: %.2fx the time (CPU may split the loop over its threads; MY runs"):format(
  rows.MY / rows.CPU))
print("one index at a time)")
assert(mm_ratio < 10 and add_ratio > 10, "the runner adds a cost per call, small against a matmul's tile")
os.execute("rm -rf " .. dir)
