-- Devices: what is compiled in and what runs here, moving tensors between devices, a kernel
-- rendered for every device without running it, and the errors a wrong choice gives.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test, same = H.test, H.same

local names, why = Device.names()
local function runs(d) return why[d] == nil end

test("Device.names lists every backend, and why one cannot run", function()
  for _, d in ipairs({ "CPU", "LLVM", "CL", "VULKAN" }) do
    local found = false
    for _, n in ipairs(names) do found = found or n == d end
    assert(found, d .. " is not compiled in")
  end
  assert(runs("CPU"), "the CPU device must run")
  for n, reason in pairs(why) do assert(type(reason) == "string" and #reason > 10, n .. ": no reason given") end
end)

test("Device.why asks one device: the same answer as Device.names' table, an unknown name an error", function()
  for _, d in ipairs(names) do
    local w = Device.why(d)
    assert(w == why[d], d .. ": " .. tostring(w))
  end
  H.errors(function() Device.why("TPU") end, "TPU", "CPU")
end)

test("Device.machine describes the CPU the opts are sized for", function()
  local line, m = Device.machine()
  assert(type(line) == "string" and line:find(m.isa .. ": " .. m.float_lanes .. " float lanes", 1, true), line)
  assert(m.float_lanes >= 1 and m.vector_registers >= 1 and m.cores >= 1, line)
  assert(m.l1d > 0 and m.l2 > 0 and m.l3 >= 0 and type(m.caches_from_sysfs) == "boolean", line)
end)

test("tensors move between the devices that run here, values intact", function()
  local x = Tensor({ { 1.5, -2 }, { 3, 4.25 } })
  for _, d in ipairs(names) do
    if runs(d) then
      local y = x:to(d)
      assert(y.device == d, ("to(%s) gave a tensor on %s"):format(d, y.device))
      same((y * 2 + 1):to("CPU"):tolist(), { { 4.0, -3.0 }, { 7.0, 9.5 } })
      local z = Tensor({ 1, 2, 3 }, { device = d })
      assert(z.device == d)
      same(z:sum():item(), 6)
      same(Tensor.arange(5, { device = d }):tolist(), { 0, 1, 2, 3, 4 })
    end
  end
end)

test("a kernel reading tensors on two devices is an error naming both", function()
  for _, d in ipairs(names) do
    if d ~= "CPU" and runs(d) then
      H.errors(function() return (Tensor({ 1, 2 }) + Tensor({ 1, 2 }, { device = d })):tolist() end, "CPU", d, ":to(")
    end
  end
end)

test("Device.synchronize waits for the kernels queued on a device (CUDA queues them): a chain realized step by step reads back right", function()
  for _, d in ipairs(names) do
    if runs(d) then
      local x = Tensor.arange(1000, { device = d }):cast("float32")
      for _ = 1, 20 do x = (x * 0.5 + 1):realize() end -- each step reads the last one's buffer
      Device.synchronize(d)
      local want = {}
      for i = 0, 999 do
        local v = i
        for _ = 1, 20 do v = v * 0.5 + 1 end
        want[#want + 1] = v
      end
      same(x:to("CPU"):tolist(), want, 1e-5)
      local log = show.kernel_log(function() (x + 1):realize() end) -- waited for: a real time
      assert(#log == 1 and log[1].seconds > 0, d .. ": a logged kernel has a time")
    end
  end
  Device.synchronize() -- the default device
end)

test("a device that cannot run, or does not exist, is a clear error", function()
  H.errors(function() return Tensor({ 1 }, { device = "NOPE" }) end, "unknown device 'NOPE'", "CPU")
  H.errors(function() Device.synchronize("NOPE") end, "unknown device 'NOPE'")
  for n, reason in pairs(why) do
    H.errors(function() Device.synchronize(n) end, n, "cannot run here")
    H.errors(function() return Tensor({ 1 }, { device = n }) end, n, "cannot run here")
    H.errors(function() Device.DEFAULT = n end, n, "cannot run here")
  end
  assert(Device.DEFAULT == "CPU", "a failed switch changed the default device")
end)

test("show.render builds a kernel for every device without running it", function()
  local x = Tensor.rand(64, 64)
  local e = (x * x):sum(1)
  local markers = {
    CPU = { "void r_", "restrict" }, LLVM = { "define void @", "phi i32" },
    CL = { "__kernel", "get_local_id(0)" }, VULKAN = { "#version 450", "gl_LocalInvocationID" },
    CUDA = { "extern \"C\" __global__", "threadIdx.x" },
  }
  local compiled = { VULKAN = "OpEntryPoint GLCompute", CUDA = ".visible .entry", LLVM = "define" }
  for _, d in ipairs(names) do
    local ks = show.render(e, d)
    assert(#ks == 1, d .. ": expected one kernel")
    for _, m in ipairs(markers[d] or {}) do
      assert(ks[1].src:find(m, 1, true), ("%s source lacks %q:\n%s"):format(d, m, ks[1].src))
    end
    if compiled[d] then
      assert(ks[1].compiled:find(compiled[d], 1, true), ("%s compiled text lacks %q"):format(d, compiled[d]))
    end
  end
end)

test("a GROUP reduce on a GPU device shares partial sums through shared memory", function()
  local x = Tensor.rand(4096)
  for _, d in ipairs({ "CL", "VULKAN", "CUDA" }) do
    local ks = show.render(x:sum(), d, false)
    assert(ks[1].src:find("temp0", 1, true), d .. ": no shared array")
    assert(ks[1].launch:find("local", 1, true), d .. ": " .. ks[1].launch)
  end
end)

test("a kernel's FLOPs count every GPU thread: a matmul's are 2*M*N*K on every device", function()
  local x, y = Tensor.rand(32, 48):realize(), Tensor.rand(48, 16):realize()
  for _, d in ipairs(names) do
    if runs(d) then
      local a, b = x:to(d):realize(), y:to(d):realize()
      local log = show.kernel_log(function() return a:matmul(b):realize() end)
      assert(#log == 1, d .. ": one kernel")
      assert(log[1].flops == 2 * 32 * 48 * 16, ("%s: %s counts %d FLOPs"):format(d, log[1].name, log[1].flops))
    end
  end
end)

test("CUDA: a 16-bit result compared in place is wrapped by an explicit cvt.s16.s32", function()
  local ok = false
  for _, d in ipairs(names) do ok = ok or d == "CUDA" end
  if not ok then return print("  (CUDA is not compiled in)") end
  -- on an H100 a plain (short) cast here let NEG(-32768) != -32768 come out true
  local x, y = Tensor({ -32768, 5 }, "int16"), Tensor({ -32768, -5 }, "int16")
  local k = show.render((-x):ne(y), "CUDA")[1]
  assert(k.src:find("mg_wrap_s16(", 1, true), k.src)
  assert(k.compiled:find("cvt.s16.s32", 1, true), k.compiled)
  for _, d in ipairs(names) do
    if runs(d) then same((-x:to(d)):ne(y:to(d)):tolist(), { false, false }) end
  end
end)

test("an assign runs on its target's device; a value from elsewhere is an error", function()
  for _, d in ipairs(names) do
    if d ~= "CPU" and runs(d) then
      local t = Tensor.zeros(4, { device = d }):contiguous():realize()
      t:assign(Tensor.ones(4)) -- a constant: computed on t's device
      same(t:tolist(), { 1.0, 1.0, 1.0, 1.0 })
      H.errors(function() t:assign(Tensor({ 1.0, 2.0, 3.0, 4.0 })); return t:tolist() end, "assign", d, "CPU")
    end
  end
end)

test("a failed schedule leaves no tensor holding a buffer nothing wrote", function()
  for _, d in ipairs(names) do
    if d ~= "CPU" and runs(d) then
      local x = Tensor({ 1.0, 2.0, 3.0 }, { device = d })
      local s = x * 2
      pcall(function() return (s + Tensor({ 1.0, 1.0, 1.0 })):tolist() end)
      same(s:tolist(), { 2.0, 4.0, 6.0 })
    end
  end
end)

test("half overflow, bfloat16 NaN and odd long dims give the CPU's answers on every device", function()
  local h = Tensor({ 100, 60000 }, "float16")
  local b = Tensor({ 0 / 0, 1.5 }, "bfloat16")
  for _, d in ipairs(names) do
    if runs(d) then
      local hv = (h:to(d) * 2 / 2):tolist()
      assert(hv[1] == 100 and hv[2] == math.huge, d .. ": half 60000*2/2 is " .. tostring(hv[2]))
      local bv = (b:to(d) + 0):tolist()
      assert(bv[1] ~= bv[1] and bv[2] == 1.5, d .. ": bfloat16 NaN came back as " .. tostring(bv[1]))
      same((Tensor.ones(1000, 1001, { device = d }) + 1):sum():item(), 2002000.0)
    end
  end
end)

test("VULKAN: int64 index math gives the CPU's values; a buffer past 2^31 elements is a clear error", function()
  if not runs("VULKAN") then return print("  (VULKAN cannot run here: " .. why.VULKAN .. ")") end
  -- a view of 2^32 elements over 4 that exist: its index math is int64, its indices small
  local function view(t)
    return t:reshape(4, 1):expand(4, 1073741824):permute(1, 0):reshape(4294967296):shrink({ { 5, 13 } }) + 1
  end
  local a = Tensor({ 1, 2, 3, 4 })
  local src = show.render(view(a), "VULKAN", false)[1].src
  assert(src:find("int64_t", 1, true), "the index math should be int64:\n" .. src)
  same(view(a:to("VULKAN")):tolist(), view(a):tolist())
  same(view(a):tolist(), { 3, 4, 5, 2, 3, 4, 5, 2 })
  -- GLSL indexes a buffer with a 32-bit int: reading the end of a buffer of more elements than
  -- that is refused, not truncated (lavapipe hands out the 2 GiB without touching them)
  local big = Tensor.empty(2147483712, { dtype = "uint8", device = "VULKAN" })
  H.errors(function() return (big:shrink({ { 2147483700, 2147483712 } }) + 1):tolist() end,
    "VULKAN: indices past 2^31", "2147483712")
end)

test("gradients flow back through copies between devices", function()
  for _, d in ipairs(names) do
    if runs(d) and d ~= "CPU" then
      -- loss = sum(3 * x^2) computed on d, read back on CPU: d loss / dx = 6x, on x's device
      local x = Tensor({ 1.5, -2, 0.25 })
      x.requires_grad = true
      local y = x:to(d)
      local loss = ((y * y) * 3):to("CPU"):sum()
      loss:backward()
      assert(x.grad.device == "CPU", d .. ": gradient on " .. x.grad.device)
      same(x.grad:tolist(), { 9.0, -12.0, 1.5 }, 1e-5, d)
      -- and the other way: a tensor made on d, used on the CPU
      local z = Tensor({ 2.0, 4.0 }, { device = d })
      z.requires_grad = true
      (z:to("CPU") * Tensor({ 5.0, 7.0 })):sum():backward()
      assert(z.grad.device == d, d .. ": gradient of z on " .. z.grad.device)
      same(z.grad:to("CPU"):tolist(), { 5.0, 7.0 }, 1e-6, d)
    end
  end
end)

H.done()
