-- Every Tensor op against PyTorch: tests/data/torch_refs.lua holds inputs, float64 reference
-- outputs and gradients made by tests/data/make_torch_refs.py (Debian's python3-torch, fixed
-- seeds). Each case evaluates its Lua expression on the same float32 inputs and compares with
-- tinygrad's tolerances (test/test_ops.py: |got - want| <= atol + rtol * |want|; atol 1e-6 /
-- rtol 1e-3 forward, 1e-4 / 1e-3 for gradients, looser only where tinygrad's test is looser;
-- the tolerances are stored per case). Shapes and dtypes must match tinygrad's; a reference nan
-- needs a nan, an infinity the same infinity, and cases marked signed_zero need the sign of each
-- zero. Gradients are of loss = sum(out * w) for the case's fixed weights w.
--
-- TORCH_REFS=pattern runs only the cases whose name matches the Lua pattern.
-- Regenerate the data with: /usr/bin/python3 tests/data/make_torch_refs.py
local dir = arg[0]:match("^(.*/)") or ""
local H = dofile(dir .. "harness.lua")
local cases = dofile(dir .. "../data/torch_refs.lua")
local only = os.getenv("TORCH_REFS")

local numel = H.numel

local function shape_str(shape)
  local t = {}
  for i, s in ipairs(shape) do t[i] = tostring(s) end
  return "(" .. table.concat(t, ", ") .. (#t == 1 and ",)" or ")")
end

local nest = H.nest

local function make_tensor(spec, dtype)
  dtype = dtype or spec.dtype
  if numel(spec.shape) == 0 then return Tensor.zeros(spec.shape, { dtype = dtype }) end
  return Tensor(nest(spec.data, spec.shape), { dtype = dtype })
end

local function flatten(v, out)
  out = out or {}
  if type(v) == "table" then
    for _, x in ipairs(v) do flatten(x, out) end
  else
    out[#out + 1] = v
  end
  return out
end

local function is_tensor(x) return type(x) == "userdata" end

-- failing case names by reason, for the summary at the end
local reasons, reason_order = {}, {}
local function fail(reason, msg) error("[" .. reason .. "] " .. msg, 0) end

-- an error raised by moongrad while evaluating: a missing method is its own reason
local function classify(err)
  err = tostring(err)
  local m = err:match("has no method or property '([%w_]+)'")
    or err:match("attempt to call a nil value %(method '([%w_]+)'%)")
    or err:match("attempt to call a nil value %(field '([%w_]+)'%)")
  if m then return "missing method", ("'%s' is missing: %s"):format(m, err) end
  return "error", err
end

local function fmt(v)
  if type(v) ~= "number" then return tostring(v) end
  if v ~= v then return "nan" end
  if v == 0 and 1 / v < 0 then return "-0.0" end
  local t = ("%.9g"):format(v)
  if math.type(v) == "float" and t:match("^-?%d+$") then t = t .. ".0" end
  return t
end

-- compares one tensor with a reference {shape, dtype, data}; returns nil or (reason, message)
local function compare(what, got, want, atol, rtol, signed_zero, check_dtype)
  if not is_tensor(got) then return "wrong value", ("%s: expected a Tensor, got %s"):format(what, type(got)) end
  local gshape = got.shape
  local same = #gshape == #want.shape
  for i = 1, #want.shape do same = same and gshape[i] == want.shape[i] end
  if not same then
    return "wrong shape", ("%s: shape %s, expected %s"):format(what, shape_str(gshape), shape_str(want.shape))
  end
  if check_dtype and tostring(got.dtype) ~= want.dtype then
    return "wrong dtype", ("%s: dtype %s, expected %s"):format(what, tostring(got.dtype), want.dtype)
  end
  local ok, vals = pcall(function() return flatten(got:tolist()) end)
  if not ok then return "error", ("%s: realizing it failed: %s"):format(what, tostring(vals)) end
  if #vals ~= #want.data then
    return "wrong shape", ("%s: %d values, expected %d"):format(what, #vals, #want.data)
  end
  local bad, first, worst, worst_i = 0, nil, -1, nil
  for i, w in ipairs(want.data) do
    local g, good = vals[i], nil
    if type(w) == "boolean" or math.type(w) == "integer" then
      good = g == w
    elseif type(g) ~= "number" then
      good = false
    elseif w ~= w then
      good = g ~= g
    elseif w == math.huge or w == -math.huge then
      good = g == w
    elseif g ~= g or g == math.huge or g == -math.huge then
      good = false
    else
      local err = math.abs(g - w)
      good = err <= atol + rtol * math.abs(w)
      if signed_zero and w == 0 and g == 0 and (1 / g > 0) ~= (1 / w > 0) then good = false end
      if not good and err > worst then worst, worst_i = err, i end
    end
    if not good then
      bad = bad + 1
      first = first or i
    end
  end
  if bad > 0 then
    local msg = ("%s: %d of %d values differ (atol %g, rtol %g); first at flat index %d: got %s, expected %s")
      :format(what, bad, #want.data, atol, rtol, first - 1, fmt(vals[first]), fmt(want.data[first]))
    if worst_i and worst_i ~= first then
      msg = msg .. ("; largest error %.3g at %d: got %s, expected %s"):format(worst, worst_i - 1, fmt(vals[worst_i]),
        fmt(want.data[worst_i]))
    end
    return "wrong value", msg
  end
end

local function run_case(c)
  local fn, lerr = load("local a, b, c, d = ...; return " .. c.expr, "=" .. c.name, "t")
  if not fn then fail("error", "the expression does not parse: " .. lerr) end
  local ins, targets = {}, {}
  for i, spec in ipairs(c.inputs) do
    local ok, t = pcall(make_tensor, spec)
    if not ok then fail("error", ("making input %d %s %s failed: %s"):format(i, spec.dtype, shape_str(spec.shape), tostring(t))) end
    if spec.grad then
      t.requires_grad = true
      targets[#targets + 1] = t
    end
    ins[i] = t
  end
  local res = table.pack(pcall(fn, ins[1], ins[2], ins[3], ins[4]))
  if not res[1] then fail(classify(res[2])) end
  local outs
  if res.n == 2 and type(res[2]) == "table" then
    outs = res[2] -- a list of tensors (split, chunk, meshgrid)
  else
    outs = table.move(res, 2, res.n, 1, {})
  end
  if #outs ~= #c.out then
    fail("wrong count", ("returned %d values, expected %d (%s)"):format(#outs, #c.out, c.expr))
  end
  for i, want in ipairs(c.out) do
    local what = #c.out > 1 and ("output " .. i) or "output"
    local reason, msg = compare(what, outs[i], want, c.atol, c.rtol, c.signed_zero, true)
    if reason then fail(reason, msg) end
  end
  if not c.grads then return end
  -- as in tinygrad's test_ops, the forward pass is built again: the realized outputs above no
  -- longer carry the graph
  local ok, grads = pcall(function()
    local again = table.pack(fn(ins[1], ins[2], ins[3], ins[4]))
    if again.n == 1 and type(again[1]) == "table" then again = again[1] end
    local loss
    for i, w in ipairs(c.w) do
      if w then
        local term = (again[i] * make_tensor(w, "float32")):sum()
        loss = loss and loss + term or term
      end
    end
    return Tensor.gradient(loss, targets)
  end)
  if not ok then fail("grad error", tostring(grads)) end
  local k = 0
  for i, want in ipairs(c.grads) do
    if want then
      k = k + 1
      local what = ("gradient of input %d"):format(i)
      if grads[k] == nil then fail("wrong grad", what .. ": missing") end
      local reason, msg = compare(what, grads[k], { shape = want.shape, dtype = "float32", data = want.data },
        c.grad_atol, c.grad_rtol, false, false)
      if reason then fail(reason == "wrong value" and "wrong grad" or "grad " .. reason, msg) end
    end
  end
end

-- Each case runs in a child process (this script with TORCH_REFS_CHILD=first index), so a crash
-- fails only the case that crashed; the child reports one line per case.
local selected, names = {}, {}
for i, c in ipairs(cases) do
  assert(not names[c.name], "duplicate case name " .. c.name)
  names[c.name] = true
  if not only or c.name:match(only) then selected[#selected + 1] = i end
end
assert(#selected > 0, "no case matches TORCH_REFS=" .. tostring(only))

local child_first = tonumber(os.getenv("TORCH_REFS_CHILD") or "")
if child_first then
  for _, i in ipairs(selected) do
    if i >= child_first then
      local ok, err = pcall(run_case, cases[i])
      local line = ok and "PASS" or ("FAIL " .. tostring(err))
      io.stdout:write(("@@ %d %s\n"):format(i, (line:gsub("[\r\n]", " "))))
      io.stdout:flush()
    end
  end
  os.exit(0)
end

local function shq(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local exe = arg[-1] or "moongrad"
local results, pos = {}, 1
while pos <= #selected do
  local first = selected[pos]
  local p = assert(io.popen(("TORCH_REFS_CHILD=%d %s %s 2>&1"):format(first, shq(exe), shq(arg[0]))))
  local other = {}
  for line in p:lines() do
    local idx, res = line:match("^@@ (%d+) (.*)$")
    if idx then
      results[tonumber(idx)] = res
    else
      other[#other + 1] = line
    end
  end
  local _, how, code = p:close()
  -- the first selected case without a result crashed (or the child died before it)
  while pos <= #selected and results[selected[pos]] do pos = pos + 1 end
  if pos <= #selected then
    local tail = table.concat(other, " | ", math.max(1, #other - 2))
    results[selected[pos]] = ("FAIL [crash] the process died (%s %s) while running it: %s"):format(tostring(how), tostring(code), tail)
    pos = pos + 1
  end
end

for _, i in ipairs(selected) do
  local res = results[i]
  local reason = res:match("^FAIL %[([^%]]+)%]") or (res ~= "PASS" and "error") or nil
  if reason then
    if not reasons[reason] then
      reasons[reason] = {}
      reason_order[#reason_order + 1] = reason
    end
    table.insert(reasons[reason], cases[i].name)
  end
  H.test(cases[i].name, function()
    if res ~= "PASS" then error(res:gsub("^FAIL ", ""), 0) end
  end)
end

-- summary: failing cases grouped by reason
if #reason_order > 0 then
  print("failures by reason:")
  for _, r in ipairs(reason_order) do print(("  %-15s %3d: %s"):format(r, #reasons[r], table.concat(reasons[r], " "))) end
end
H.done()
