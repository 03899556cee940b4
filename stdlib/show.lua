-- show: what the REPL's colon commands run. Each command is a plain function, so a script
-- can call show.src(x) where the prompt takes ":src x".
-- The C side (interp/bind_show.cpp) provides show.typeof, show.fields, show.clock,
-- show.kernel_log and show.setting; this file builds the commands on them.
local show = show

local function sharded(v) return require("args").is_sharded(v) end
local function is_tensor(v) return show.typeof(v) == "Tensor" or sharded(v) end
local function plural(n, word) return ("%d %s%s"):format(n, word, n == 1 and "" or "s") end

-- The tensors in a value: a Tensor, or a table of them (what a function returned).
local function tensors_in(v, out)
  out = out or {}
  if is_tensor(v) then
    out[#out + 1] = v
  elseif type(v) == "table" then
    for _, x in ipairs(v) do tensors_in(x, out) end
  end
  return out
end

local function need_tensor(v, cmd)
  if not is_tensor(v) then
    error(("%s needs a Tensor, got a %s"):format(cmd, show.typeof(v)), 3)
  end
  return v
end

-- ---------------------------------------------------------------- settings

local function setting(name, label)
  return function(v)
    local now = show.setting(name, v)
    print(("%s=%s"):format(label, tostring(now)))
    return now
  end
end

show.debug = setting("DEBUG", "DEBUG")
show.noopt = setting("NOOPT", "NOOPT")
show.device = setting("DEV", "DEV")
local set_beam = setting("BEAM", "BEAM")
-- :beam N sets the search width (0: the hand-coded opts); :beam alone also shows the cache.
function show.beam(v)
  local n = set_beam(v)
  if v == nil then
    local path, entries, bytes = show.beam_cache()
    print(("cache: %s (%s, %d KiB)"):format(path, entries < 0 and "cannot be read" or plural(entries, "kernel"),
      (bytes + 1023) // 1024))
  end
  return n
end

-- ---------------------------------------------------------------- the schedule and its IR


local function header(i, item)
  return ("--- kernel %d: %s  (%s)\n    why a kernel: %s"):format(i, item.name, table.concat(item.bufs, " "), item.reason)
end

-- The kernels realizing x would run, each with its AST. Returns the schedule.
function show.schedule(x)
  local items = need_tensor(x, "schedule"):schedule()
  print(("%s (buffer 1 of each is its output)"):format(plural(#items, "kernel")))
  for i, item in ipairs(items) do
    print(header(i, item))
    io.write(item.ast)
  end
  return items
end

-- The graph of x at every stage (tensor graph, schedule, each kernel's AST, opts, lowered,
-- simplified with the rewrite rules that fired, linear) in one HTML page; prints and returns its
-- path. Nothing is realized. VIZ=1 does the same for every realize of a run.
function show.viz(x, title)
  need_tensor(x, "viz")
  local path = show.viz_write(sharded(x) and x.pieces or x, title)
  print("VIZ: " .. path .. " (open it in a browser)")
  return path
end

-- "graph" (the lazy tensor graph), then the stages of compiling each kernel, from the compiler's
-- own list (engine/codegen/pipeline.h): adding a stage there adds it here.
show.stages = { "graph" }
for _, s in ipairs(show.kernel_stages()) do show.stages[#show.stages + 1] = s.name end
local stage_help = table.concat(show.stages, ", ")

-- The IR at every stage, or at one: graph (the lazy tensor graph), then for each kernel the
-- stages of show.stages (ast, opts, lowered, simplified, linear, source).
function show.ir(x, stage)
  need_tensor(x, "ir")
  if stage ~= nil then
    local ok = false
    for _, s in ipairs(show.stages) do ok = ok or s == stage end
    if not ok then error(("ir: unknown stage '%s' (stages: %s)"):format(tostring(stage), stage_help), 2) end
  end
  if stage == nil or stage == "graph" then
    print("=== graph (the lazy tensor graph)")
    if sharded(x) then
      for i, p in ipairs(x.pieces) do print(("--- piece %d on %s"):format(i, x.devices[i])); print(p.uop) end
    else
      print(x.uop)
    end
  end
  if stage == "graph" then return end
  local items = x:schedule()
  for i, item in ipairs(items) do
    print(header(i, item))
    for _, st in ipairs(item.stages) do
      if stage == nil or st.name == stage then
        print("=== " .. st.name)
        io.write(st.text)
      end
    end
  end
  if #items == 0 then print("(already realized: no kernels)") end
end

-- The generated source of each kernel x would run (compiled and cached, not run). With a device
-- name, the kernels as that device would build them (it need not be able to run here); with
-- "all", every device side by side: C, LLVM IR, OpenCL C, GLSL with its SPIR-V, CUDA C with its PTX.
local DIALECTS = {
  { "CPU", "C (clang 15, in process)" }, { "LLVM", "LLVM IR (LLVM 15 ORC JIT)", "LLVM IR after O2" },
  { "CL", "OpenCL C" }, { "VULKAN", "GLSL compute -> SPIR-V (glslang)", "SPIR-V (disassembled)" },
  { "CUDA", "CUDA C -> PTX (NVRTC)", "PTX" },
}
function show.src(x, device)
  x = need_tensor(x, "src")
  if device == nil then
    local items = x:schedule()
    for i, item in ipairs(items) do
      print(("// kernel %d of %d: %s"):format(i, #items, item.name))
      io.write(item.src)
    end
    if #items == 0 then print("(already realized: no kernels)") end
    return
  end
  if type(device) ~= "string" then error("show.src: device must be a name or \"all\"", 0) end
  local names, why = Device.names()
  local want = device:upper()
  local shown = 0
  for _, d in ipairs(DIALECTS) do
    local name, lang, compiled = d[1], d[2], d[3]
    local present = false
    for _, n in ipairs(names) do present = present or n == name end
    if present and (want == "ALL" or want == name) then
      shown = shown + 1
      local status = why[name] and ("cannot run here: " .. why[name]) or "runs here"
      print(("==================== %s: %s (%s)"):format(name, lang, status))
      local ks = {}
      for _, p in ipairs(sharded(x) and x.pieces or { x }) do
        local r = show.render(p, name, compiled ~= nil)
        table.move(r, 1, #r, #ks + 1, ks)
      end
      for i, k in ipairs(ks) do
        print(("// kernel %d of %d: %s   launch: %s"):format(i, #ks, k.name, k.launch))
        io.write(k.src)
        if compiled and k.compiled ~= "" then
          print(("---- %s of %s"):format(compiled, k.name))
          io.write(k.compiled)
        end
      end
      if #ks == 0 then print("(already realized: no kernels)") end
    end
  end
  if shown == 0 then
    error(("show.src: unknown device '%s' (known: %s, or all)"):format(device, table.concat(names, ", ")), 0)
  end
end

-- The opts each kernel of x gets (:opts x). With a list of opts ({{"UPCAST", 0, 4},
-- {"UNROLL", 0, 8}}: name, axis, amount), the last kernel is lowered with those instead,
-- compiled, and timed beside the default opts on a schedule that is not kept; the result of
-- that run is returned ({name, opts, seconds, flops, src, kernels}).
function show.opts(x, list)
  local items = need_tensor(x, "opts"):schedule()
  if list == nil then
    for i, item in ipairs(items) do
      print(("--- kernel %d: %s  %s"):format(i, item.name, #item.opts > 0 and table.concat(item.opts, " ") or "(no opts)"))
    end
    if #items == 0 then print("(already realized: no kernels)") end
    return items
  end
  if type(list) ~= "table" then error(("opts: the opts must be a list like {{\"UPCAST\", 0, 4}}, got a %s"):format(type(list)), 2) end
  local default, mine = show.try_opts(x), show.try_opts(x, list)
  local function line(label, r)
    print(("%-8s %-28s %s: %.3f ms, %.2f GFLOPS"):format(label, r.name, #r.opts > 0 and table.concat(r.opts, " ") or "(no opts)",
      r.seconds * 1e3, r.seconds > 0 and r.flops / r.seconds * 1e-9 or 0))
  end
  line("default", default)
  line("yours", mine)
  return mine
end

-- ---------------------------------------------------------------- running

-- Evaluates v: a function is called and its results realized, a Tensor is realized.
local function evaluate(v)
  if type(v) == "function" then
    local res = table.pack(v())
    local ts = tensors_in({ table.unpack(res, 1, res.n) })
    if #ts > 0 then Tensor.realize_all(ts) end
    return table.unpack(res, 1, res.n)
  end
  local ts = tensors_in(v)
  if #ts == 0 then error("expected a Tensor, a list of them, or a function, got a " .. show.typeof(v), 3) end
  Tensor.realize_all(ts)
  return v
end

local function rate(n, s) return s > 0 and n / s * 1e-9 or 0 end

-- Runs (realizes) v and lists every kernel it ran with its time, GFLOPS, GB/s and share of the
-- machine's limit (engine/roofline.h). Returns the list of kernels (show.kernel_log's entries).
function show.kernels(v)
  local log = show.kernel_log(evaluate, v)
  print(("%3s  %-7s %-26s %-14s %10s %9s %9s  %s"):format("#", "device", "kernel", "out shape", "ms", "GFLOPS", "GB/s",
    "of the limit"))
  local total = 0
  for i, k in ipairs(log) do
    total = total + k.seconds
    print(("%3d  %-7s %-26s %-14s %10.3f %9.2f %9.2f  %s"):format(i, k.device, k.name,
      "(" .. table.concat(k.shape, ", ") .. ")", k.seconds * 1e3, rate(k.flops, k.seconds), rate(k.bytes, k.seconds),
      (k.limit or "")))
  end
  print(("%s, %.3f ms in kernels"):format(plural(#log, "kernel"), total * 1e3))
  return log
end

-- ---------------------------------------------------------------- the roofline

local function limits_line(dev, l)
  return ("%s at %s: %.1f GFLOPS peak (vector FMAs), %.1f GB/s memory (a triad); the ridge at %.1f FLOPs per byte")
    :format(dev, plural(l.threads, "thread"), l.flops * 1e-9, l.bytes * 1e-9, l.flops / l.bytes)
end

-- The mark of the i-th kernel on the plot: 1-9, then a-z, then *.
local function mark(i)
  if i <= 9 then return tostring(i) end
  if i <= 35 then return string.char(96 + i - 9) end
  return "*"
end

-- A log-log plot, `width` x `height` characters: the roof min(peak, intensity x bandwidth) and
-- each kernel at (its FLOPs per byte, its FLOP/s). Returns the lines.
local function plot_roofline(l, log, width, height)
  local lx0, lx1 = math.huge, -math.huge
  local ridge = l.flops / l.bytes
  local lo_y = math.huge
  for _, k in ipairs(log) do
    if k.flops > 0 and k.bytes > 0 and k.seconds > 0 then
      local x = k.flops / k.bytes
      lx0, lx1 = math.min(lx0, math.log(x, 10)), math.max(lx1, math.log(x, 10))
      lo_y = math.min(lo_y, k.flops / k.seconds)
    end
  end
  lx0 = math.floor(math.min(lx0, math.log(ridge, 10)) - 0.5)
  lx1 = math.ceil(math.max(lx1, math.log(ridge, 10)) + 0.5)
  local ly1 = math.log(l.flops * 1.2, 10)
  local ly0 = math.floor(math.log(math.min(lo_y, 10 ^ lx0 * l.bytes), 10))
  local grid = {}
  for r = 1, height do grid[r] = {} for c = 1, width do grid[r][c] = " " end end
  local function row_of(y) return height - math.floor((math.log(y, 10) - ly0) / (ly1 - ly0) * height) end
  local function col_of(x) return math.floor((math.log(x, 10) - lx0) / (lx1 - lx0) * width) + 1 end
  for c = 1, width do
    local x = 10 ^ (lx0 + (c - 0.5) / width * (lx1 - lx0))
    local y = math.min(l.flops, x * l.bytes)
    local r = row_of(y)
    if r >= 1 and r <= height then grid[r][c] = y >= l.flops and "=" or "/" end
  end
  for i, k in ipairs(log) do
    if k.flops > 0 and k.bytes > 0 and k.seconds > 0 then
      local r, c = row_of(k.flops / k.seconds), col_of(k.flops / k.bytes)
      r, c = math.max(1, math.min(height, r)), math.max(1, math.min(width, c))
      grid[r][c] = mark(i)
    end
  end
  local lines = { "  GFLOPS" }
  for r = 1, height do
    local label = ""
    if r == 1 or r % 4 == 0 or r == height then
      label = ("%.3g"):format(10 ^ (ly0 + (height - r + 1) / height * (ly1 - ly0)) * 1e-9)
    end
    lines[#lines + 1] = ("%8s |%s"):format(label, table.concat(grid[r]))
  end
  lines[#lines + 1] = ("%8s +%s"):format("", ("-"):rep(width))
  local axis = (" "):rep(width + 10)
  for e = lx0, lx1 do
    local c = math.floor((e - lx0) / (lx1 - lx0) * (width - 1)) + 10
    local t = ("%g"):format(10 ^ e)
    axis = axis:sub(1, c) .. t .. axis:sub(c + #t + 1)
  end
  lines[#lines + 1] = axis:gsub("%s+$", "") .. "  FLOPs per byte"
  return lines
end

-- :roofline EXPR: realizes EXPR and plots its kernels against the machine's two limits, with
-- each kernel's share of the one that binds it. :roofline alone prints the limits.
-- Returns the kernel log.
function show.roofline(v)
  local dev = Device.DEFAULT
  if v == nil then
    local l = show.limits(dev)
    if not l then print(dev .. " has no measured limits (the host CPU devices CPU and LLVM do)") return end
    if l.threads > 1 then print(limits_line(dev, show.limits(dev, 1))) end
    print(limits_line(dev, l))
    print("kept in " .. l.path .. " (delete it to measure again)")
    return
  end
  local log = show.kernel_log(evaluate, v)
  if #log == 0 then print("no kernels ran (already realized?)") return log end
  dev = log[1].device
  local l = show.limits(dev)
  if not l then
    print(dev .. " has no measured limits (the host CPU devices CPU and LLVM do); :kernels lists the kernels")
    return log
  end
  print(limits_line(dev, l))
  for _, line in ipairs(plot_roofline(l, log, 64, 16)) do print(line) end
  print(("%3s  %-26s %9s %9s %8s %9s  %s"):format("", "kernel", "ms", "GFLOPS", "GB/s", "FLOP/B", "of the limit"))
  for i, k in ipairs(log) do
    print(("%3s  %-26s %9.3f %9.2f %8.2f %9.2f  %s%s"):format(mark(i), k.name, k.seconds * 1e3, rate(k.flops, k.seconds),
      rate(k.bytes, k.seconds), k.bytes > 0 and k.flops / k.bytes or 0, (k.limit or ""),
      (k.flops == 0 and " (no FLOPs: not on the plot)" or "") .. (k.cores < l.threads and " (1 core)" or "")))
  end
  return log
end

-- Times v from start to finish: building the graph (when v is a function), scheduling,
-- compiling and running. Returns the seconds and v's results.
function show.time(v)
  local k0, c0, t_k0 = GlobalCounters.kernel_count, GlobalCounters.kernels_compiled, GlobalCounters.time_sum_s
  local t0 = show.clock()
  -- under a kernel log, each kernel is waited for (a GPU's queue), so the kernel times are its own
  local res
  show.kernel_log(function() res = table.pack(evaluate(v)) end)
  local s = show.clock() - t0
  print(("%.3f ms: %s (%d compiled), %.3f ms in kernels"):format(s * 1e3,
    plural(GlobalCounters.kernel_count - k0, "kernel"), GlobalCounters.kernels_compiled - c0,
    (GlobalCounters.time_sum_s - t_k0) * 1e3))
  return s, table.unpack(res, 1, res.n)
end

-- ---------------------------------------------------------------- help

-- "x:name(a, b, {kw=})" from the parameter names the function was declared with, and a line on
-- naming them
local function signature(key)
  local p = require("args").params[key]
  if not p then return "x:" .. key .. "(...)" end
  local static = p[1] ~= "self"
  local pos, kw, after = {}, {}, false
  for i, n in ipairs(p) do
    if n == "..." then pos[#pos + 1] = "..."; after = true
    elseif not (i == 1 and n == "self") then
      if after then kw[#kw + 1] = n .. "=" else pos[#pos + 1] = n end
    end
  end
  if #kw > 0 then pos[#pos + 1] = "{" .. table.concat(kw, ", ") .. "}" end
  local sig = (static and "Tensor." or "x:") .. key .. "(" .. table.concat(pos, ", ") .. ")"
  local named = p[#p] ~= "self" and p[#p] ~= "..." and p[#p]
  if named then sig = sig .. "\n  (any parameter can be named in a trailing table: {" .. named .. "=...})" end
  return sig
end

-- The colon commands, or one command's or Tensor method's signature and doc.
function show.help(name)
  local h = require "help"
  if name == nil or name == "" then
    print("Colon commands (each is sugar for the Lua call on the right, which scripts can use):")
    for _, c in ipairs(h.commands) do print(("  %-18s %s\n  %-18s   = %s"):format(c[2], c[4], "", c[3])) end
    print("Any other line is Lua: an expression prints its value. x.uop, x.st and x:schedule()")
    print("inspect a tensor; TAB completes names; :help NAME documents a method (:help relu).")
    return
  end
  local key = tostring(name):gsub("^:", ""):gsub("^Tensor[.:]", ""):gsub("^x[.:]", "")
  for _, c in ipairs(h.commands) do
    if c[1] == key then
      print(c[2] .. "   (Lua: " .. c[3] .. ")")
      print("  " .. c[4])
      if h.details[key] then print(h.details[key]) end
      return
    end
  end
  local d = h.globals[key] or h.tensor[key] or h.fields[key]
  if not d then
    error(("no help for '%s' (try :help for the commands, or a Tensor method such as :help relu)"):format(
      tostring(name)), 2)
  end
  if type(d) == "string" then d = { signature(key), d } end
  print(d[1])
  print("  " .. d[2])
end

-- :onnx PATH: what an ONNX model holds, before running it.
function show.onnx(path)
  local m = onnx.load(path)
  local opsets = {}
  for domain, v in pairs(m.opset) do opsets[#opsets + 1] = ("%s %d"):format(domain, v) end
  table.sort(opsets)
  print(("%s: made by %s %s, IR version %d, opsets: %s"):format(path, m.producer ~= "" and m.producer or "(unnamed)",
    m.producer_version or "", m.ir_version, table.concat(opsets, ", ")))
  local function io_lines(title, list)
    print(title)
    for _, v in ipairs(list) do
      local dims = {}
      for i, d in ipairs(v.shape or {}) do dims[i] = tostring(d) end
      print(("  %-24s %-8s (%s)"):format(v.name, v.dtype or v.kind or "?", table.concat(dims, ", ")))
    end
  end
  io_lines("inputs:", m.inputs)
  io_lines("outputs:", m.outputs)
  local count, names, key = {}, {}, {}
  for _, n in ipairs(m.graph.nodes) do
    if not count[n.op] then names[#names + 1] = n.op end
    count[n.op] = (count[n.op] or 0) + 1
    key[n.op] = (n.domain == "" or n.domain == "ai.onnx") and n.op or n.domain .. ":" .. n.op
  end
  table.sort(names, function(a, b) return count[a] > count[b] or (count[a] == count[b] and a < b) end)
  local parts = {}
  for _, n in ipairs(names) do
    parts[#parts + 1] = ("%s %d%s"):format(n, count[n], onnx.ops[key[n]] and "" or " (not supported)")
  end
  print(("%d nodes: %s"):format(#m.graph.nodes, table.concat(parts, ", ")))
  -- weights are initializers, or (as exporters such as paddle2onnx write them) Constant nodes
  local weights = {}
  for _, t in pairs(m.graph.initializers) do weights[#weights + 1] = t end
  for _, n in ipairs(m.graph.nodes) do
    if n.op == "Constant" and n.attrs.value and n.attrs.value:numel() > 1 then weights[#weights + 1] = n.attrs.value end
  end
  local params, bytes = 0, 0
  for _, t in ipairs(weights) do
    params = params + t:numel()
    bytes = bytes + t:numel() * (tonumber(t.dtype:match("%d+$")) or 8) // 8 -- bool: one byte
  end
  print(("parameters: %d in %d tensors, %.1f KiB"):format(params, #weights, bytes / 1024))
  return m
end

return show
