-- my_device.lua: a whole moongrad device in Lua. The engine calls five functions:
--   alloc(nbytes)              -> a buffer           (here: Device.bytes, memory Lua can see)
--   copyin(buf, bytes)            host bytes into a buffer (bytes is a Lua string)
--   copyout(buf, nbytes)       -> the buffer's bytes as a Lua string
--   compile(fn, src)           -> a program          (here: clang turns the C into a .so)
--   run(program, bufs, launch)    run it on the buffers (here: once per global index, from Lua)
-- The engine hands compile() its C renderer's source: a function
--   void fn(void** bufs, int core, int ncores)
-- whose outermost loop is split into ncores shares (as the CPU device splits it over threads).
-- Calling it with ncores = that loop's size runs one index of it per call.
local M = {}

-- The C compiler: clang-15 to a shared object, with the flags the renderer asks for
-- ("//!flag ..." lines at the top of the source). Returns the .so's path.
local function build(dir, fn, src, stats)
  local flags = { "-O2", "-march=native", "-fPIC", "-fno-math-errno", "-shared", "-w" }
  for flag in src:gmatch("//!flag ([^\n]+)") do flags[#flags + 1] = flag end
  stats.compiled = stats.compiled + 1
  local base = ("%s/%s_%d"):format(dir, fn, stats.compiled)
  local f = assert(io.open(base .. ".c", "w"))
  f:write(src)
  f:close()
  local cmd = ("clang-15 %s -o %s.so %s.c -lm 2>%s.log"):format(table.concat(flags, " "), base, base, base)
  if not os.execute(cmd) then
    local log = io.open(base .. ".log")
    error(("clang failed on %s: %s"):format(fn, log and log:read("a") or cmd), 0)
  end
  return base .. ".so"
end

-- A device table for Device.register, and the statistics it keeps ({allocs, bytes, compiled,
-- calls, runs, last = the last run's {program, bufs, n}}). `dir` holds the sources and shared
-- objects.
function M.new(dir)
  local stats = { allocs = 0, bytes = 0, compiled = 0, calls = 0, runs = 0, last = nil }
  local cache = {} -- source -> kernel: the same code is compiled once per run
  local device = {}

  -- the allocator: plain Lua-visible bytes. Device.bytes(n) is zeroed, 64-byte aligned memory
  -- that b:read(offset, len) and b:write(offset, s) reach from Lua.
  function device.alloc(nbytes)
    stats.allocs, stats.bytes = stats.allocs + 1, stats.bytes + nbytes
    return Device.bytes(nbytes)
  end
  function device.copyin(buf, bytes) buf:write(0, bytes) end
  function device.copyout(buf, nbytes) return buf:read(0, nbytes) end

  function device.compile(fn, src)
    local key = fn .. "\0" .. src
    if not cache[key] then cache[key] = { fn = fn, src = src, kernel = Device.load_kernel(build(dir, fn, src, stats), fn) } end
    return cache[key]
  end

  -- The runner: one call per index of the outermost loop (global_size[1]; a kernel without one,
  -- a sum to a scalar, is one call). Single-threaded and deliberately naive: every call crosses
  -- from Lua into C and back.
  function device.run(program, bufs, launch)
    local n = launch.global_size[1] or 1
    local kernel = program.kernel
    for i = 0, n - 1 do kernel(bufs, i, n) end
    stats.calls, stats.runs = stats.calls + n, stats.runs + 1
    stats.last = { program = program, bufs = bufs, n = n }
  end
  return device, stats
end

return M
