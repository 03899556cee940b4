-- ONNX's own backend test suite (Debian's libonnx-testdata, ONNX 1.12): each test folder's
-- model.onnx run on its test_data_set_*/input_*.pb and compared with output_*.pb (rtol 1e-3,
-- atol 1e-7, as ONNX's own runner). Prints "N passed, M failed, K excluded" per folder.
--   build/moongrad tests/lua/onnx_suite.lua [FOLDER ...] [--min-pass FOLDER=N ...] [--verbose]
-- DEV=LLVM (CL, VULKAN) runs it on that device. Exclusions: tests/onnx_exclusions.txt, one line
-- each: the test's folder name and the reason.
local DATA = "/usr/share/libonnx-testdata/data/"
local here = arg[0]:match("^(.*/)") or "./"

local folders, min_pass, verbose = {}, {}, false
for _, a in ipairs(arg) do
  local f, n = a:match("^%-%-min%-pass=(.-)=(%d+)$")
  if f then min_pass[f] = tonumber(n)
  elseif a == "--verbose" then verbose = true
  else folders[#folders + 1] = a end
end
if #folders == 0 then folders = { "node", "pytorch-converted", "pytorch-operator", "simple" } end

local excluded = {}
for line in io.lines(here .. "../onnx_exclusions.txt") do
  local name, why = line:match("^(%S+)%s+(.+)$")
  if name and not line:match("^#") then excluded[name] = why end
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function list(dir)
  local r = {}
  local p = io.popen("ls -1 '" .. dir .. "' 2>/dev/null")
  for name in p:lines() do r[#r + 1] = name end
  p:close()
  return r
end

-- nil when the values (tensors, sequences, onnx.NONE) agree, else why not
local function compare(got, want)
  if got == nil then return "no output" end
  if want == onnx.NONE or got == onnx.NONE then
    return got ~= want and ("%s, want %s"):format(tostring(got), tostring(want)) or nil
  end
  if onnx.is_sequence(want) then
    if not onnx.is_sequence(got) then return "not a sequence" end
    if #got ~= #want then return ("a sequence of %d, want %d"):format(#got, #want) end
    for i = 1, #want do
      local why = compare(got[i], want[i])
      if why then return ("element %d: %s"):format(i, why) end
    end
    return nil
  end
  if onnx.is_sequence(got) then return "a sequence, want a tensor" end
  if onnx.is_strings(want) or onnx.is_strings(got) then
    if not (onnx.is_strings(want) and onnx.is_strings(got)) then return "strings against numbers" end
    local gs, ws = table.concat(got.shape, "x"), table.concat(want.shape, "x")
    if gs ~= ws then return ("shape %s, want %s"):format(gs, ws) end
    for i = 1, #want do
      if got[i] ~= want[i] then return ("string %d is %q, want %q"):format(i, got[i], want[i]) end
    end
    return nil
  end
  local gs, ws = table.concat(got.shape, "x"), table.concat(want.shape, "x")
  if gs ~= ws then return ("shape %s, want %s"):format(gs, ws) end
  if got.dtype ~= want.dtype then return ("dtype %s, want %s"):format(got.dtype, want.dtype) end
  if want.numel == 0 then return nil end
  if want.dtype == "bool" or want.dtype:find("int") then
    local bad = got:ne(want):cast("int32"):sum():item()
    return bad > 0 and ("%d elements differ"):format(bad) or nil
  end
  local g, w = got:cast("float64"), want:cast("float64")
  local same_nan = g:isnan():eq(w:isnan()):logical_not():cast("int32"):sum():item() == 0
  if not same_nan then return "NaN where the reference has none (or the other way)" end
  local err = ((g - w):abs() - (w:abs() * 1e-3 + 1e-7)):maximum(0)
  -- equal values agree (infinities too, whose difference is NaN); the NaNs were matched above
  err = g:eq(w):bitwise_or(w:isnan()):where(0, err)
  err = err:isnan():where(math.huge, err) -- an infinity against a finite value
  local worst = err:max():item()
  return worst > 0 and ("off by %.3g beyond tolerance"):format(worst) or nil
end

-- ONNX's test data stores bfloat16 tensors as uint16 (numpy has no bfloat16): the same bits,
-- read here as the type the model declares
local function as_declared(t, dtype)
  if onnx.is_strings(t) then return t end
  if dtype == "bfloat16" and t.dtype == "uint16" then return Tensor.frombytes(t:tobytes(), t.shape, "bfloat16") end
  return t
end

local function run_test(dir)
  local m = onnx.load(dir .. "/model.onnx")
  local sets = 0
  for _, set in ipairs(list(dir)) do
    if set:match("^test_data_set_") then
      sets = sets + 1
      local inputs, k = {}, 0
      for _, i in ipairs(m.inputs) do
        local path = ("%s/%s/input_%d.pb"):format(dir, set, k)
        if not exists(path) then break end
        inputs[i.name] = as_declared(onnx.read_value(path, i), i.dtype)
        k = k + 1
      end
      local outs = m:run(inputs)
      for j, o in ipairs(m.outputs) do
        local path = ("%s/%s/output_%d.pb"):format(dir, set, j - 1)
        if exists(path) then
          local why = compare(outs[o.name], as_declared(onnx.read_value(path, o), o.dtype))
          if why then error(("%s output %s: %s"):format(set, o.name, why), 0) end
        end
      end
    end
  end
  if sets == 0 then error("no test data", 0) end
end

local failed_floor = false
for _, folder in ipairs(folders) do
  local pass, fail, excl = 0, 0, 0
  for _, name in ipairs(list(DATA .. folder)) do
    if excluded[name] then
      excl = excl + 1
    else
      local ok, err = pcall(run_test, DATA .. folder .. "/" .. name)
      if ok then pass = pass + 1 else
        fail = fail + 1
        if verbose then print(("FAIL %s/%s: %s"):format(folder, name, tostring(err))) end
      end
      collectgarbage()
    end
  end
  print(("%s: %d passed, %d failed, %d excluded"):format(folder, pass, fail, excl))
  if min_pass[folder] and pass < min_pass[folder] then
    print(("%s: %d passed, fewer than the %d this suite has reached"):format(folder, pass, min_pass[folder]))
    failed_floor = true
  end
end
if failed_floor then os.exit(1) end
