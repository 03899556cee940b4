-- ONNX loading (interp/bind_onnx.cpp, stdlib/onnx.lua): the model's description, a run against
-- ONNX's own reference outputs, and clear errors for bad files and inputs. The whole backend
-- suite is tests/lua/onnx_suite.lua.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
local D = "/usr/share/libonnx-testdata/data/"

test("onnx.load describes a model: inputs, outputs, opset, producer", function()
  local m = onnx.load(D .. "node/test_gemm_default_no_bias/model.onnx")
  assert(m.producer == "backend-test" and m.opset["ai.onnx"] >= 1, tostring(m.producer))
  assert(#m.inputs == 2 and m.inputs[1].dtype == "float32" and #m.inputs[1].shape == 2)
  assert(#m.outputs == 1 and m.graph.nodes[1].op == "Gemm")
end)

test("a model's outputs match ONNX's reference outputs, lazily", function()
  local dir = D .. "node/test_conv_with_strides_padding/"
  local m = onnx.load(dir .. "model.onnx")
  local ins = {}
  for i, inp in ipairs(m.inputs) do ins[inp.name] = onnx.read_tensor(dir .. "test_data_set_0/input_" .. (i - 1) .. ".pb") end
  local out = m(ins)[m.outputs[1].name]
  assert(#out:schedule() >= 1, "the output is lazy: it has kernels to run")
  local want = onnx.read_tensor(dir .. "test_data_set_0/output_0.pb")
  H.same(out:tolist(), want:tolist(), 1e-5, "conv with strides and padding")
end)

test("bad files and inputs are clear errors", function()
  H.errors(function() onnx.load("/nonexistent.onnx") end, "cannot open")
  local tmp = os.tmpname()
  local src = io.open(D .. "node/test_add/model.onnx", "rb"):read("a")
  io.open(tmp, "wb"):write(src:sub(1, #src // 2)):close()
  H.errors(function() onnx.load(tmp) end, "not an ONNX model")
  os.remove(tmp)
  -- well-formed protobuf, but Abs takes one input, not Add's two: the checker says so
  io.open(tmp, "wb"):write((src:gsub("Add", "Abs"))):close()
  H.errors(function() onnx.load(tmp) end, "the ONNX checker refuses the model", "input size 2")
  os.remove(tmp)
  H.errors(function() onnx.read_tensor(D .. "node/test_add/model.onnx") end, "element type UNDEFINED")
  local m = onnx.load(D .. "node/test_add/model.onnx")
  H.errors(function() m:run({}) end, "input 'x' is missing")
  local x, y = Tensor.zeros(3, 4, 5), Tensor.zeros(3, 4, 5)
  H.errors(function() m:run({ x = x, y = y, z = x }) end, "'z' is not an input of the model (it takes x (float32 3x4x5), y (float32 3x4x5))")
  H.errors(function() m:run({ x = x, y = Tensor.zeros(3, 4) }) end, "input 'y' has 2 dims (3x4), want 3")
  H.errors(function() m:run({ x = x, y = Tensor.zeros(3, 4, 6) }) end, "input 'y' has 6 at dim 2 (shape 3x4x6), want 5")
  H.errors(function() m:run({ x = x, y = Tensor.zeros(3, 4, 5, "int32") }) end, "input 'y' has dtype int32, want float32")
  H.errors(function() m:run({ x = x, y = 1 }) end, "input 'y' must be a Tensor")
  -- an op without a handler: named with its opset, the node and how many nodes use it
  local add = onnx.ops.Add
  onnx.ops.Add = nil
  local ok, err = pcall(m.run, m, { x = x, y = y })
  onnx.ops.Add = add
  assert(not ok and err:find("op Add (opset", 1, true) and err:find("1 node(s) use it", 1, true), tostring(err))
  H.errors(function() onnx.load(D .. "node/test_add/model.onnx", { device = "NOPE" }) end, "unknown device 'NOPE'")
end)

test("weights in an external data file are read from beside the model", function()
  local dir = (arg[0]:match("^(.*/)") or "") .. "../data/onnx_external/"
  local m = onnx.load(dir .. "model.onnx")
  assert(m.inputs[1].shape[1] == "N", "a symbolic dim is its name")
  local y = m{ x = onnx.read_tensor(dir .. "input_0.pb") }.y
  H.same(y:tolist(), onnx.read_tensor(dir .. "output_0.pb"):tolist(), 1e-5, "relu(x W + b)")
  H.errors(function() onnx.load(dir .. "model_outside.onnx") end, "must be a path inside the model's folder")
  -- a copy whose data file is cut short
  local tmp = os.tmpname()
  os.remove(tmp)
  assert(os.execute(("mkdir -p '%s' && cp '%smodel.onnx' '%s/' && head -c 50 '%sweights.bin' > '%s/weights.bin'"):format(tmp,
    dir, tmp, dir, tmp)))
  H.errors(function() onnx.load(tmp .. "/model.onnx") end, "too few for offset")
  os.execute(("rm -r '%s'"):format(tmp))
end)

test("string tensors: read, normalized and cast, as ONNX's reference does", function()
  local dir = D .. "node/test_strnormalizer_export_monday_casesensintive_upper/"
  local m = onnx.load(dir .. "model.onnx")
  assert(m.inputs[1].dtype == "string")
  local x = onnx.read_tensor(dir .. "test_data_set_0/input_0.pb")
  assert(onnx.is_strings(x) and x[1] == "monday" and #x == 4)
  local y = m{ x = x }.y
  assert(table.concat(y, ",") == "TUESDAY,WEDNESDAY,THURSDAY" and y.shape[1] == 3, table.concat(y, ","))
  H.errors(function() m{ x = Tensor.zeros(4) } end, "input 'x' must be strings")
  -- numbers written as the shortest decimal that reads back as the same float32 (NumPy's repr)
  local cast = onnx.ops.Cast.fn
  local s = cast({ op = "Cast", name = "" }, { Tensor({ 0.1, 2, 1e-5, 0 / 0 }) }, { to = 8 })
  assert(table.concat(s, ",") == "0.1,2.0,1e-05,NaN", table.concat(s, ","))
  local back = cast({ op = "Cast", name = "" }, { onnx.strings({ "0.25", "-INF", "7" }) }, { to = 1 })
  H.same(back:tolist(), { 0.25, -math.huge, 7.0 }, nil, "strings to float32")
  H.errors(function() cast({ op = "Cast", name = "" }, { onnx.strings({ "abc" }) }, { to = 1 }) end, "'abc' is not a number")
end)

test(":onnx PATH summarizes a model at the prompt", function()
  assert(require("repl").translate(":onnx a b.onnx") == 'show.onnx("a b.onnx")')
  local lines = {}
  local real_print = print
  print = function(...) lines[#lines + 1] = table.concat({ ... }, "\t") end
  local ok, m = pcall(show.onnx, D .. "pytorch-converted/test_Conv2d/model.onnx")
  print = real_print
  assert(ok, tostring(m))
  local text = table.concat(lines, "\n")
  lines = {}
  print = function(...) lines[#lines + 1] = table.concat({ ... }, "\t") end
  pcall(show.help, "onnx")
  print = real_print
  local help = table.concat(lines, "\n")
  for _, name in ipairs({ "onnx.load", "m:run", "m.inputs", "m.outputs", "m.opset", "m.producer", "onnx.read_tensor" }) do
    assert(help:find(name, 1, true), ":help onnx documents " .. name)
  end
  assert(text:find("1 nodes: Conv 1", 1, true) and text:find("parameters: 76 in 2 tensors", 1, true), text)
end)

H.done()
