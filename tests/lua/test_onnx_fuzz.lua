-- Damaged ONNX files: real models (ONNX's test models and PaddleOCR's direction classifier) and
-- test-data tensors mutated many times (bits flipped, cut short, bytes inserted or dropped, an op
-- type swapped for another of the same length, a varint's value changed in place) and loaded, and
-- where they load, run. Each must give a result or a Lua error that says what is wrong: no crash,
-- no sanitizer report (the test runs under ASan and UBSan in CI).
--   build/moongrad tests/lua/test_onnx_fuzz.lua [N]   N mutations (1,000 by default)
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local mgio = require "mgio"
local N = tonumber(arg[1]) or 1000
local D = "/usr/share/libonnx-testdata/data/"

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local sources = {
  D .. "node/test_conv_with_strides_padding/model.onnx",
  D .. "node/test_gemm_default_no_bias/model.onnx",
  D .. "node/test_loop11/model.onnx",
  D .. "node/test_resize_upsample_scales_linear/model.onnx",
  D .. "node/test_lstm_defaults/model.onnx",
  D .. "simple/test_sequence_model1/model.onnx",
  mgio.data_dir .. "/ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx",
}
local pbs = { D .. "node/test_conv_with_strides_padding/test_data_set_0/input_0.pb",
  D .. "node/test_cast_FLOAT_to_FLOAT16/test_data_set_0/input_0.pb" }
local files = {}
for _, p in ipairs(sources) do files[#files + 1] = { path = p, bytes = slurp(p), model = true } end
for _, p in ipairs(pbs) do files[#files + 1] = { path = p, bytes = slurp(p), model = false } end

-- op type names of equal length, for swaps that keep the protobuf well formed
local SWAPS = { { "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Abs", "Neg", "Exp", "Log", "Not", "And", "Xor", "Sum" },
  { "Relu", "Tanh", "Ceil", "Sqrt", "Sign", "Gemm", "Conv", "Size", "Tile", "Less", "Mean", "Clip", "Loop", "Cast", "LSTM" } }

local R = math.random
local function to_string(b)
  local out = {}
  for k = 1, #b, 4096 do out[#out + 1] = string.char(table.unpack(b, k, math.min(#b, k + 4095))) end
  return table.concat(out)
end

local function mutate(s)
  local kind = R(6)
  if kind == 1 then -- flip 1 to 8 random bits
    local b = { s:byte(1, -1) }
    for _ = 1, R(8) do
      local i = R(#b)
      b[i] = b[i] ~ (1 << (R(8) - 1))
    end
    return to_string(b), "bits"
  elseif kind == 2 then -- cut short
    return s:sub(1, R(0, #s - 1)), "truncated"
  elseif kind == 3 then -- bytes inserted or dropped
    local i = R(#s)
    if R(2) == 1 then return s:sub(1, i) .. string.char(R(0, 255)):rep(R(4)) .. s:sub(i + 1), "inserted" end
    return s:sub(1, i - 1) .. s:sub(i + R(4)), "dropped"
  elseif kind == 4 then -- an op type swapped for another of the same length
    local list = SWAPS[R(2)]
    local from, to = list[R(#list)], list[R(#list)]
    local at = s:find(from, 1, true)
    if not at then return s:sub(1, R(#s)), "truncated" end
    return s:sub(1, at - 1) .. to .. s:sub(at + #from), "op swapped"
  else -- a varint after a field tag rewritten in place (dims, dtypes, attribute ints, lengths)
    local b = { s:byte(1, -1) }
    for _ = 1, 200 do
      local i = R(#b - 1)
      if b[i] & 7 == 0 and b[i] < 128 then -- a tag with wire type 0: a varint follows
        local j = i + 1
        repeat
          b[j] = (b[j] & 0x80) | R(0, 127)
          j = j + 1
        until j > #b or b[j - 1] < 0x80
        break
      end
    end
    return to_string(b), "varint changed"
  end
end

-- Inputs of the declared types, symbolic dims as 1; none when they would be huge.
local function inputs_for(m)
  local ins = {}
  for _, i in ipairs(m.inputs) do
    if i.kind ~= "tensor" or i.dtype == "?" then return nil end
    local shape, n = {}, 1
    for k, d in ipairs(i.shape or {}) do
      shape[k] = math.type(d) == "integer" and d or 1
      n = n * shape[k]
    end
    if n > 1e6 or n < 0 then return nil end
    ins[i.name] = Tensor.ones(shape, { dtype = i.dtype })
  end
  return ins
end

H.test(("%d mutated model files and tensors load and run or fail with a message"):format(N), function()
  math.randomseed(22)
  local tmp = os.tmpname()
  local stats = { loaded = 0, ran = 0, refused = 0 }
  for k = 1, N do
    local f = files[(k - 1) % #files + 1]
    local bytes, how = mutate(f.bytes)
    local out = io.open(tmp, "wb")
    out:write(bytes)
    out:close()
    local ok, err
    if f.model then
      local m
      ok, m = pcall(onnx.load, tmp)
      if ok then
        stats.loaded = stats.loaded + 1
        local ins = inputs_for(m)
        if ins then
          ok, err = pcall(function()
            for _, v in pairs(m:run(ins)) do
              if show.typeof(v) == "Tensor" and v:numel() <= 1e6 then v:realize() end
            end
          end)
          if ok then stats.ran = stats.ran + 1 end
        end
      else
        err = m
      end
    else
      ok, err = pcall(onnx.read_tensor, tmp)
    end
    if not ok then
      stats.refused = stats.refused + 1
      assert(type(err) == "string" and #err > 0, ("mutation %d (%s of %s): an error without a message"):format(k, how, f.path))
    end
  end
  os.remove(tmp)
  print(("  %d mutations: %d models loaded, %d ran, %d refused with a message"):format(N, stats.loaded, stats.ran,
    stats.refused))
  assert(stats.loaded > 0 and stats.refused > 0, "the mutations both keep some files loadable and break others")
end)

H.done()
