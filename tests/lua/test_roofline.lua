-- The roofline at the prompt: show.limits, each kernel's share of the limit that binds it
-- (show.kernel_log, :kernels, DEBUG=2), :roofline's plot, and the limits kept across processes.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test

local exe, sh_quote = H.exe, H.sh_quote
local function run(env, code)
  local p = assert(io.popen(("env -u DEBUG %s %s -e %s 2>&1"):format(env, sh_quote(exe), sh_quote(code))))
  local out = p:read("a")
  local _, _, rc = p:close()
  return out, rc
end

-- The lines print writes while fn runs.
local function printed(fn, ...)
  local lines, old = {}, print
  print = function(...) lines[#lines + 1] = table.concat(table.pack(...), "\t") end
  local ok, res = pcall(fn, ...)
  print = old
  assert(ok, res)
  return lines, res
end

local a, b = Tensor.rand(256, 256), Tensor.rand(256, 256)
a:realize(); b:realize()
local x, y = Tensor.rand(1 << 20), Tensor.rand(1 << 20)
x:realize(); y:realize()

test("show.limits: the CPU's peak and bandwidth, nothing for an unknown device or zero threads", function()
  local l = show.limits("CPU", 1)
  assert(l and l.flops > 1e9 and l.bytes > 1e8 and l.threads == 1, "limits")
  assert(l.path:match("roofline%.txt$"), l.path)
  local l2 = show.limits("CPU", 2)
  assert(l2.threads == 2 and l2.flops > 1e9, "two threads' limits")
  H.errors(function() show.limits("NOPE") end, "NOPE")
  H.errors(function() show.limits("CPU", 0) end, "threads")
end)

H.cpu_test("each kernel's share is its rate over the roof at its intensity, for the cores it ran on", function()
  local log = show.kernel_log(function() return Tensor.realize_all({ a:matmul(b), (x + y):exp() }) end)
  assert(#log >= 2, "kernels: " .. #log)
  local bounds = {}
  for _, k in ipairs(log) do
    local l = show.limits(k.device, k.cores)
    local flops, bytes = k.flops / k.seconds, k.bytes / k.seconds
    -- the roof: min(peak, intensity x bandwidth); the share is taken of it
    local intensity = k.bytes > 0 and k.flops / k.bytes or 0
    local memory = k.flops == 0 or intensity * l.bytes < l.flops
    local want = memory and bytes / l.bytes or flops / l.flops
    assert(k.bound == (memory and "memory" or "compute"), k.name .. " bound " .. tostring(k.bound))
    assert(math.abs(k.share - want) <= 1e-9 * want, ("%s: share %g, want %g"):format(k.name, k.share, want))
    bounds[k.name:sub(1, 1)] = k.bound
  end
  assert(bounds.r == "compute", "the matmul is not compute-bound") -- 256 FLOPs per byte
  assert(bounds.E == "memory", "the exp of a sum is not memory-bound")
end)

H.cpu_test(":kernels has a column for the share", function()
  local lines = printed(show.kernels, (x * 2):contiguous())
  assert(lines[1]:find("of the limit", 1, true), lines[1])
  assert(lines[2]:find("%d+%% of memory"), lines[2])
end)

H.cpu_test(":roofline plots the roof and puts a matmul right of the ridge, an add left of it", function()
  local lines, log = printed(show.roofline, function() return a:matmul(b), (x + y) * 3 end)
  local mm, add
  for j, k in ipairs(log) do
    if k.name:match("^r_") then mm = j elseif k.name:match("^E_") and k.flops > 0 then add = j end
  end
  assert(mm and add, "kernels")
  assert(lines[1]:find("GFLOPS peak", 1, true) and lines[1]:find("GB/s memory", 1, true), lines[1])
  -- the plot: rows "<label> |<64 columns>"; the ridge is the first column of the flat roof '='
  local ridge, cols = math.huge, {}
  for _, line in ipairs(lines) do
    local body = line:match("^%s*[%d.e+]* |(.*)$")
    if body then
      local r = body:find("=", 1, true)
      if r then ridge = math.min(ridge, r) end
      for c = 1, #body do
        local ch = body:sub(c, c)
        if ch:match("%w") then cols[ch] = c end
      end
    end
  end
  assert(ridge < math.huge, "no roof drawn:\n" .. table.concat(lines, "\n"))
  assert(cols[tostring(mm)] and cols[tostring(mm)] > ridge, "the matmul is not right of the ridge:\n" .. table.concat(lines, "\n"))
  assert(cols[tostring(add)] and cols[tostring(add)] < ridge, "the add is not left of the ridge:\n" .. table.concat(lines, "\n"))
  local legend = table.concat(lines, "\n")
  assert(legend:find("%d+%% of compute"), legend)
  -- :roofline alone prints the limits
  lines = printed(show.roofline)
  assert(lines[#lines]:find("roofline.txt", 1, true), lines[#lines])
end)

H.cpu_test("the limits are measured once and kept: a second process reads them, a damaged file is measured again", function()
  local dir = os.tmpname()
  os.remove(dir)
  local env = "XDG_CACHE_HOME=" .. sh_quote(dir) .. " DEBUG=1 MG_THREADS=1"
  local code = 'local l = show.limits("CPU"); print(("%.17g %.17g"):format(l.flops, l.bytes))'
  local out1, rc1 = run(env, code)
  assert(rc1 == 0 and out1:find("*** roofline of CPU", 1, true), out1)
  local out2, rc2 = run(env, code)
  assert(rc2 == 0 and not out2:find("roofline of", 1, true), "measured again:\n" .. out2)
  local v1, v2 = out1:match("\n([%d.e+]+ [%d.e+]+)\n$"), out2:match("^([%d.e+]+ [%d.e+]+)\n$")
  assert(v1 and v2, out1 .. out2)
  local f1, b1 = v1:match("(%S+) (%S+)")
  local f2, b2 = v2:match("(%S+) (%S+)")
  assert(math.abs(f1 - f2) <= 1e-5 * f1 and math.abs(b1 - b2) <= 1e-5 * b1, v1 .. " vs " .. v2)
  local path = dir .. "/moongrad/roofline.txt"
  local f = assert(io.open(path, "w"))
  f:write("not a roofline\n\0\0\n")
  f:close()
  local out3, rc3 = run(env, code)
  assert(rc3 == 0 and out3:find("*** roofline of CPU", 1, true), out3)
  os.execute("rm -rf " .. sh_quote(dir))
end)

H.cpu_test("DEBUG=2 prints each kernel's share of its limit", function()
  local out, rc = run("DEBUG=2", "(Tensor.rand(64, 64):matmul(Tensor.rand(64, 64))):realize()")
  assert(rc == 0, out)
  assert(out:find("GB/s +%d+%% of %a+ "), out)
end)

H.done()
