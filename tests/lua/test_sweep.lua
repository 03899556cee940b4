-- The crash sweep: every public Tensor name, called on awkward tensors with awkward arguments,
-- gives a result or a clear Lua error, and never crashes, hangs or reports an internal error.
--
-- What is swept (the list is built the same way in every process, so an index names a call):
--   * every function in the global Tensor table (found at run time, so new methods are swept
--     automatically; names starting with '_' are private and skipped), called
--       - as a method on each receiver with no argument and with each single argument,
--       - as a method on four receivers with each pair of a smaller argument set,
--       - without a receiver (factories: Tensor.zeros(x), Tensor.cat(x, y), ...) with each
--         argument and each pair,
--       - with 24 seeded-random (receiver, a, b, c) triples;
--   * the Tensor constructor, the operators (+ - * / // ^ % unary- # .. < <= == indexing,
--     index assignment), tostring, and the properties (shape, dtype, T, uop, st, grad, ...).
-- Receivers: 0-d float, 0-d int, 0-size (0,3), 1-element (1,), int (2,3), bool (2,3), and
-- non-contiguous floats (permuted, expanded, padded, flipped), and a 4-d float (2,3,5,5).
-- Arguments: 0, -1, 1, 5, -7, nil, "x", NaN, 2^40, 1<<40, -2^40, inf, 1.5, true, {}, {0,1},
-- tensors of the receiver's shape (float and int) and of another shape, {axis=0}, {bogus=1},
-- "float16".
-- Every call runs under pcall; a tensor result is checked (numel agrees with its shape),
-- realized, and read back (tolist, tostring) when small, so kernels are compiled and run.
--
-- Outcomes. A result or a Lua error is fine. A failure is: a crash (signal), a hang (the child
-- is killed by `timeout`), an "internal error" from the engine, a C++ library exception leaking
-- out as the message (std::bad_alloc, vector::_M_range_check, ...), or a tensor whose numel
-- disagrees with its shape (a size that overflowed).
--
-- How crashes are caught: the parent runs children (`moongrad test_sweep.lua --child ...`), two
-- at a time, each over an interleaved shard of the calls. A child writes "B <i>" to its log and
-- flushes before call i and "E <i> <outcome>" after it. When a child dies by a signal or the
-- timeout, the call that was begun but not ended is recorded as the crash and a new child
-- resumes the shard after it. A child stops by itself after CHUNK_S seconds so that a slow but
-- healthy shard never reaches the per-child timeout; the timeout only catches a hung call.
-- Children run with MG_THREADS=1 and, where the binary allows it, an address-space limit, so
-- an argument like 2^40 can never make one really allocate.
--
-- Knobs (for debugging): SWEEP_ONLY=name (sweep the names containing it), SWEEP_SHARDS=n,
-- SWEEP_VERBOSE=1 (print each failing call as it is found), KEEP=1 (keep the logs).
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local CHUNK_S = 20          -- a child stops after this many seconds of calls
local CHILD_TIMEOUT_S = 90  -- ... and is killed (a hang) after this many
local SLOW_S = 5            -- a call that takes more CPU seconds than this is reported (kernel compiles
                            -- run in clang processes and do not count)
local MEM_LIMIT_KB = 4 * 1024 * 1024 -- ulimit -v for children (skipped where the binary cannot run under it)
local SMALL = 256           -- results with at most this many elements are read back

-- ---------------------------------------------------------------- receivers and arguments

local function floats(n, scale)
  local t = {}
  for i = 1, n do t[i] = ((i * 37) % 11 - 5) * (scale or 0.5) end
  return t
end
local nest = H.nest

local RECV = {
  { "0-d float", function() return Tensor(2.5) end },
  { "0-d int", function() return Tensor(3) end },
  { "0-size (0,3)", function() return Tensor.zeros(0, 3) end },
  { "1-element (1,)", function() return Tensor { 1.5 } end },
  { "int (2,3)", function() return Tensor { { 1, -2, 3 }, { 4, 0, 6 } } end },
  { "bool (2,3)", function() return Tensor { { true, false, true }, { false, true, false } } end },
  { "float (4,3,2):permute(2,1,0)", function() return Tensor(nest(floats(24), { 4, 3, 2 })):permute(2, 1, 0) end },
  { "float (3,1):expand(3,4)", function() return Tensor { { 1.5 }, { -2 }, { 0.25 } }:expand(3, 4) end },
  { "float (2,2):pad{{1,1},{0,2}}", function() return Tensor { { 1.5, 2 }, { 3, -4 } }:pad { { 1, 1 }, { 0, 2 } } end },
  { "float (2,3):flip(1)", function() return Tensor(nest(floats(6), { 2, 3 })):flip(1) end },
  { "float (2,3,5,5)", function() return Tensor(nest(floats(150, 0.1), { 2, 3, 5, 5 })) end },
}
-- receivers used for the argument pairs (the full product would be too slow)
local PAIR_RECV = { 1, 5, 7, 11 }

local function shape_of(r) return r and r.shape or { 2, 3 } end
local ARGS = {
  { "0", function() return 0 end },
  { "-1", function() return -1 end },
  { "1", function() return 1 end },
  { "5", function() return 5 end },
  { "-7", function() return -7 end },
  { "nil", function() return nil end },
  { '"x"', function() return "x" end },
  { "0/0", function() return 0 / 0 end },
  { "2^40", function() return 2 ^ 40 end },
  { "1<<40", function() return 1 << 40 end },
  { "-2^40", function() return -2 ^ 40 end },
  { "math.huge", function() return math.huge end },
  { "1.5", function() return 1.5 end },
  { "true", function() return true end },
  { "{}", function() return {} end },
  { "{0,1}", function() return { 0, 1 } end },
  { "T(same shape)", function(r) return Tensor.ones(table.unpack(shape_of(r))) * 0.5 end },
  { "T(same shape, int)", function(r) return Tensor.ones(table.unpack(shape_of(r))):cast("int32") end },
  { "T(5,)", function() return Tensor { 1.5, -1, 0, 2, 3 } end },
  { "{axis=0}", function() return { axis = 0 } end },
  { "{bogus=1}", function() return { bogus = 1 } end },
  { '"float16"', function() return "float16" end },
}
local ARG_INDEX = {}
for i, a in ipairs(ARGS) do ARG_INDEX[a[1]] = i end
-- the smaller set whose pairs are swept
local PAIR_ARGS = {}
for _, n in ipairs({ "0", "-1", "5", "nil", '"x"', "2^40", "{0,1}", "T(same shape)", "{axis=0}" }) do
  PAIR_ARGS[#PAIR_ARGS + 1] = assert(ARG_INDEX[n], n)
end

-- ---------------------------------------------------------------- the calls

-- Operators and properties, as functions of (receiver, arg).
local OPS = {
  { "+", function(r, a) return r + a end }, { "+ (reversed)", function(r, a) return a + r end },
  { "-", function(r, a) return r - a end }, { "*", function(r, a) return r * a end },
  { "/", function(r, a) return r / a end }, { "//", function(r, a) return r // a end },
  { "^", function(r, a) return r ^ a end }, { "^ (reversed)", function(r, a) return a ^ r end },
  { "%", function(r, a) return r % a end }, { "..", function(r, a) return r .. a end },
  { "<", function(r, a) return r < a end }, { "<=", function(r, a) return r <= a end },
  { "==", function(r, a) return r == a end }, { "[]", function(r, a) return r[a] end },
  { "[] = 1", function(r, a) r[a] = 1; return r end },
  { "[] = T(same shape)", function(r, a) r[a] = Tensor.ones(table.unpack(r.shape)); return r end },
  { ".grad =", function(r, a) r.grad = a; return r.grad end },
  { ".requires_grad =", function(r, a) r.requires_grad = a; return r end },
  { "Tensor(...)", function(_, a) return Tensor(a) end },
}
local UNARY = {
  { "unary -", function(r) return -r end }, { "#", function(r) return #r end },
  { "tostring", function(r) return tostring(r) end }, { "Tensor(r)", function(r) return Tensor(r) end },
}
for _, p in ipairs({ "shape", "dtype", "device", "ndim", "T", "uop", "st", "grad", "requires_grad", "nosuch" }) do
  UNARY[#UNARY + 1] = { "." .. p, function(r) return r[p] end }
end

local ONLY = os.getenv("SWEEP_ONLY")
local function names()
  local out = {}
  for k, v in pairs(Tensor) do
    if type(k) == "string" and type(v) == "function" and k:sub(1, 1) ~= "_" and (not ONLY or k:find(ONLY, 1, true)) then
      out[#out + 1] = k
    end
  end
  table.sort(out)
  return out
end

-- xorshift64, the same sequence on every run
local function Rng(seed)
  local s = (seed * 0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D) | 1
  return function(n)
    s = s ~ (s << 13)
    s = s ~ (s >> 7)
    s = s ~ (s << 17)
    return 1 + ((s >> 11) % n)
  end
end

-- Each call: {kind, name, recv (index or nil), args (list of ARGS indices)}.
local function build_calls()
  local calls = {}
  local family
  local function add(kind, name, r, args)
    calls[#calls + 1] = { kind = kind, name = name, r = r, args = args, family = family }
  end
  local ns = names()
  for _, n in ipairs(ns) do
    family = "method, 0-1 args"
    for r = 1, #RECV do
      add("method", n, r, {})
      for a = 1, #ARGS do add("method", n, r, { a }) end
    end
    family = "method, 2 args"
    for _, r in ipairs(PAIR_RECV) do
      for _, a in ipairs(PAIR_ARGS) do
        for _, b in ipairs(PAIR_ARGS) do add("method", n, r, { a, b }) end
      end
    end
    family = "static"
    add("static", n, nil, {})
    for a = 1, #ARGS do add("static", n, nil, { a }) end
    for _, a in ipairs(PAIR_ARGS) do
      for _, b in ipairs(PAIR_ARGS) do add("static", n, nil, { a, b }) end
    end
    family = "method, 3 random args"
    local R = Rng(#calls + #n)
    for _ = 1, 24 do add("method", n, R(#RECV), { R(#ARGS), R(#ARGS), R(#ARGS) }) end
  end
  if not ONLY then
    family = "operators"
    for o = 1, #OPS do
      for r = 1, #RECV do
        for a = 1, #ARGS do add("op", o, r, { a }) end
      end
    end
    for u = 1, #UNARY do
      for r = 1, #RECV do add("unary", u, r, {}) end
    end
  end
  return calls
end

local function describe(c)
  local parts = {}
  for _, a in ipairs(c.args) do parts[#parts + 1] = ARGS[a][1] end
  local recv = c.r and ("<" .. RECV[c.r][1] .. ">") or nil
  if c.kind == "method" then
    return ("Tensor.%s(%s)"):format(c.name, table.concat({ recv, table.unpack(parts) }, ", "))
  elseif c.kind == "static" then
    return ("Tensor.%s(%s)"):format(c.name, table.concat(parts, ", "))
  elseif c.kind == "op" then
    return ("%s  %s  %s"):format(recv, OPS[c.name][1], parts[1])
  else
    return ("%s  %s"):format(UNARY[c.name][1], recv)
  end
end

-- ---------------------------------------------------------------- the child: make the calls

local function is_tensor(v)
  if type(v) ~= "userdata" then return false end
  local ok, m = pcall(function() return v.realize end)
  return ok and m == Tensor.realize
end

-- What a failed call's message says about it: "err" (a clear error) or a failure kind.
local function classify(msg)
  msg = tostring(msg)
  if msg:find("internal error", 1, true) then return "internal" end
  if msg:find("kernel compile failed", 1, true) then return "compile" end -- the engine rendered bad C
  -- Lua ran out of memory under the children's address-space limit: on these tiny inputs that is
  -- a loop or an allocation sized by an argument like 2^40 that nothing checked
  if msg:find("not enough memory", 1, true) then return "oom" end
  for _, pat in ipairs({ "std::", "bad_alloc", "vector::", "basic_string", "_M_", "stoi", "stol", "stod",
    "map::at", "bad_optional", "bad_variant", "bad_function_call", "bad_array_new_length" }) do
    if msg:find(pat, 1, true) then return "cxx" end
  end
  return "err"
end

-- A result's kernels are compiled and run only when its graph is new to this child: the ops,
-- dtypes, shapes and arguments of its UOps, with each constant reduced to its class (so x + 5 and
-- x - 7 compile once, while x + NaN, x + inf and x + 2^40 each still compile). Without this a
-- cold kernel cache costs thousands of clang runs.
local SEEN = {}
local function const_class(a)
  if math.type(a) == "float" then
    if a ~= a then return "nan" end
    if a == math.huge or a == -math.huge then return "inf" end
    if math.abs(a) >= 2 ^ 31 then return "big" end
    return a == math.floor(a) and "int" or "frac"
  elseif math.type(a) == "integer" then
    return math.abs(a) >= 2 ^ 31 and "big" or "int"
  end
  return tostring(a)
end
local function signature(t)
  local parts = {}
  for k, u in ipairs(t.uop:toposort()) do
    local a = u.arg
    if u.op == "CONST" then
      a = const_class(a)
    elseif u.op == "BUFFER" then
      a = ""
    else
      a = tostring(a)
    end
    parts[k] = ("%s %s %s (%s)"):format(u.op, u.dtype, a, table.concat(u.shape, ","))
  end
  return table.concat(parts, ";")
end

-- And, to bound a cold run to a few thousand clang runs, a method call compiles kernels only for
-- the first new graph of each (name, receiver); the operators only dedupe by graph.
local REALIZED = {}

local function check_tensor_result(t, key)
  local shape = t.shape
  local prod = 1.0
  for _, d in ipairs(shape) do
    if math.type(d) ~= "integer" or d < 0 then error("SHAPE: bad dimension " .. tostring(d), 0) end
    prod = prod * d
  end
  local n = t:numel()
  if n ~= prod then
    error(("SHAPE: numel() is %s but the shape (%s) has %.17g elements"):format(tostring(n),
      table.concat(shape, ","), prod), 0)
  end
  if n == 0 then -- nothing to compute, but reading back must stay bounded (a (2^40, 0) shape)
    t:realize()
    t:tolist()
    tostring(t)
    return
  end
  local sig = signature(t)
  if SEEN[sig] or (key and REALIZED[key]) then return end
  SEEN[sig] = true
  if key then REALIZED[key] = true end
  t:realize()
  if n <= SMALL then
    t:tolist()
    tostring(t)
  end
end

local function check_result(v, key)
  if is_tensor(v) then
    check_tensor_result(v, key)
  elseif type(v) == "table" then
    for _, x in pairs(v) do
      if is_tensor(x) then check_tensor_result(x, key) end
    end
  end
end

local function run_call(c)
  Tensor.manual_seed(0)
  local recv = c.r and RECV[c.r][2]() or nil
  local n, args = #c.args, {}
  for i, a in ipairs(c.args) do args[i] = ARGS[a][2](recv) end
  local res
  if c.kind == "method" then
    res = table.pack(Tensor[c.name](recv, table.unpack(args, 1, n)))
  elseif c.kind == "static" then
    res = table.pack(Tensor[c.name](table.unpack(args, 1, n)))
  elseif c.kind == "op" then
    res = table.pack(OPS[c.name][2](recv, args[1]))
  else
    res = table.pack(UNARY[c.name][2](recv))
  end
  local key -- see REALIZED
  if c.kind == "method" then
    key = ("%s %d"):format(c.name, c.r)
  elseif c.kind == "static" then
    key = ("%s static %d"):format(c.name, #c.args)
  end
  for i = 1, res.n do check_result(res[i], key) end
  if recv then check_result(recv) end -- a method may have changed it in place (assign, [] =)
end

local function child(shards, shard, start, logpath, ncalls)
  local log = assert(io.open(logpath, "w"))
  local calls = build_calls()
  if #calls ~= ncalls then -- another binary (rebuilt meanwhile?) with other Tensor names
    log:write("MISMATCH ", #calls, "\n")
    log:close()
    return
  end
  local t0 = os.time()
  local i = start
  while i <= #calls do
    if (i - 1) % shards == shard then
      if os.time() - t0 >= CHUNK_S then
        log:write("MORE ", i, "\n")
        log:close()
        return
      end
      log:write("B ", i, "\n")
      log:flush()
      local c0, t1 = GlobalCounters.kernels_compiled, os.clock()
      local ok, err = pcall(run_call, calls[i])
      local compiled = GlobalCounters.kernels_compiled - c0
      local ms = math.floor((os.clock() - t1) * 1000 + 0.5)
      local kind = "ok"
      if not ok then
        err = tostring(err)
        kind = err:find("^SHAPE: ") and "shape" or classify(err)
      end
      if kind == "ok" or kind == "err" then
        log:write("E ", i, " ", compiled, " ", ms, " ", kind, "\n")
      else
        log:write("E ", i, " ", compiled, " ", ms, " ", kind, " ", (err:gsub("%s+", " "):sub(1, 400)), "\n")
      end
    end
    i = i + 1
  end
  log:write("DONE\n")
  log:close()
end

if arg[1] == "--child" then
  child(tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4]), arg[5], tonumber(arg[6]))
  return
end

-- ---------------------------------------------------------------- the parent: run the children

local exe, sh_quote = H.exe, H.sh_quote

local calls = build_calls()
local SHARDS = tonumber(os.getenv("SWEEP_SHARDS") or "") or 2
local VERBOSE = os.getenv("SWEEP_VERBOSE")

-- An address-space limit where the binary runs under one (ASan's shadow memory does not).
local limit = ("ulimit -v %d 2>/dev/null; "):format(MEM_LIMIT_KB)
do
  local p = io.popen(limit .. sh_quote(exe) .. " -e 'print(Tensor{1,2}:sum():item())' 2>/dev/null")
  local out = p:read("a")
  p:close()
  if out ~= "3\n" then limit = "" end
end

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. sh_quote(dir)))

local failures = {} -- {kind, call index, message}
local counts = { ok = 0, err = 0 }
local made, children = 0, 0
local stats = {} -- kernels compiled and CPU ms, by call family and by name

local function record(kind, idx, msg)
  failures[#failures + 1] = { kind = kind, idx = idx, msg = msg }
  if VERBOSE then io.stderr:write(("%s: %s: %s\n"):format(kind, idx and describe(calls[idx]) or "-", msg or "")) end
end

-- Reads a child's log; returns where its shard resumes (nil when the shard is finished).
local function collect(shard, logpath, how, code, errpath)
  local f = io.open(logpath, "r")
  local begun, resume, done, last = nil, nil, false, nil
  if f then
    for line in f:lines() do
      local tag, rest = line:match("^(%S+)%s*(.*)$")
      if tag == "B" then
        begun = tonumber(rest)
        made = made + 1
      elseif tag == "E" then
        local idx, compiled, ms, kind, msg = rest:match("^(%d+) (%d+) (%d+) (%S+) ?(.*)$")
        idx = tonumber(idx)
        if tonumber(ms) > SLOW_S * 1000 then
          record("slow", idx, ("%.1f s of CPU (ended: %s%s)"):format(ms / 1000, kind, msg ~= "" and (", " .. msg) or ""))
        end
        local fam = calls[idx].family
        local nm = calls[idx].kind .. " " .. tostring(calls[idx].name)
        for _, k in ipairs({ fam, nm }) do
          local st = stats[k] or { 0, 0 }
          stats[k] = st
          st[1], st[2] = st[1] + tonumber(compiled), st[2] + tonumber(ms)
        end
        counts[kind] = (counts[kind] or 0) + 1
        if kind ~= "ok" and kind ~= "err" then record(kind, idx, msg) end
        begun, last = nil, idx
      elseif tag == "MORE" then
        resume = tonumber(rest)
      elseif tag == "DONE" then
        done = true
      elseif tag == "MISMATCH" then
        error(("a child built %s calls, the parent %d: was %s rebuilt during the sweep?"):format(rest, #calls, exe), 0)
      end
    end
    f:close()
  end
  local clean = how == "exit" and code == 0
  if clean and done then return nil end
  if clean and resume then return resume end
  -- the child died (or exited early): the begun call is the culprit
  local e = io.open(errpath, "r")
  local stderr = e and e:read("a") or ""
  if e then e:close() end
  -- a sanitizer's one-line verdict when there is one, else the end of what the child printed
  stderr = stderr:match("SUMMARY: [^\n]*") or stderr:gsub("%s+$", ""):sub(-300)
  local what = (how == "exit" and code == 124 or code == 137) and "hang (killed by timeout)"
      or (how == "signal" and ("signal " .. code))
      or (how == "exit" and code > 128 and ("signal " .. (code - 128)))
      or ("exit " .. tostring(code))
  if begun then
    record("crash", begun, what .. (stderr ~= "" and (" | " .. stderr) or ""))
    return begun + 1
  end
  -- no call open: it died between calls (a finalizer, start-up) after `last`
  record("crash", nil, ("%s outside a call (shard %d, after call %s)%s"):format(what, shard,
    tostring(last), stderr ~= "" and (" | " .. stderr) or ""))
  if not last then return nil end -- it never started: give up on the shard rather than loop
  return last + 1
end

local t0 = os.time()
local pending = {}
for s = 0, SHARDS - 1 do pending[s] = 1 end
while next(pending) do
  local running = {}
  for s, start in pairs(pending) do
    local logpath = ("%s/shard%d.%d.log"):format(dir, s, children)
    local errpath = logpath .. ".err"
    local cmd = ("%senv -u DEBUG MG_THREADS=1 timeout -k 5 %d %s %s --child %d %d %d %s %d > /dev/null 2> %s"):format(
      limit, CHILD_TIMEOUT_S, sh_quote(exe), sh_quote(arg[0]), SHARDS, s, start, sh_quote(logpath), #calls,
      sh_quote(errpath))
    children = children + 1
    running[#running + 1] = { s = s, p = assert(io.popen(cmd, "r")), log = logpath, err = errpath }
  end
  pending = {}
  for _, r in ipairs(running) do
    r.p:read("a")
    local _, how, code = r.p:close()
    local resume = collect(r.s, r.log, how, code, r.err)
    if resume and resume <= #calls then pending[r.s] = resume end
  end
end
local elapsed = os.time() - t0

if os.getenv("KEEP") then print("logs in " .. dir) else os.execute("rm -rf " .. sh_quote(dir)) end

print(("swept %d names, %d calls planned, %d made (%d results, %d Lua errors) in %d children, %d s")
  :format(#names(), #calls, made, counts.ok, counts.err, children, elapsed))

if os.getenv("SWEEP_STATS") then -- where the time goes: kernels compiled and CPU seconds
  local top = {}
  for k, st in pairs(stats) do top[#top + 1] = { k, st[1], st[2] } end
  table.sort(top, function(a, b) return a[3] > b[3] end)
  for k = 1, math.min(40, #top) do print(("  %6d kernels %7.1f s  %s"):format(top[k][2], top[k][3] / 1000, top[k][1])) end
end

local by_kind = {}
for _, f in ipairs(failures) do
  by_kind[f.kind] = by_kind[f.kind] or {}
  table.insert(by_kind[f.kind], f)
end
local LABEL = {
  crash = "crashes and hangs (signal or timeout)",
  internal = "'internal error' messages",
  cxx = "C++ library exceptions as the message",
  shape = "tensors with a negative dimension or a numel that disagrees with their shape",
  compile = "kernels that fail to compile",
  oom = "Lua running out of memory (under the children's limit)",
  slow = ("calls slower than %d s on these tiny inputs (stopped by the memory limit?)"):format(SLOW_S),
}
for _, kind in ipairs({ "crash", "internal", "compile", "cxx", "oom", "shape", "slow" }) do
  local list = by_kind[kind] or {}
  H.test(("no %s (%d found)"):format(LABEL[kind], #list), function()
    if #list == 0 then return end
    local lines = {}
    for k, f in ipairs(list) do
      if k > 40 then
        lines[#lines + 1] = ("  ... and %d more"):format(#list - 40)
        break
      end
      lines[#lines + 1] = ("  %s\n      -> %s"):format(f.idx and describe(calls[f.idx]) or "(between calls)", f.msg)
    end
    error("\n" .. table.concat(lines, "\n"), 0)
  end)
end
H.test("every planned call was made", function()
  assert(made == #calls, ("%d of %d calls made"):format(made, #calls))
end)
H.done()
