-- onnx: run ONNX models with the Tensor API, as tinygrad's nn/onnx.py does. The file is read by
-- ONNX's own library (interp/bind_onnx.cpp); here each op type has one handler, with the opset
-- range it handles, so the table below says which ops and versions run.
--   local m = onnx.load(path)   m.inputs, m.outputs ({name=, shape=, dtype=}), m.opset, m.producer
--   local outs = m:run{x = t}   (or m{...}): output name -> Tensor, lazy like every result
--   onnx.read_tensor(path)      a Tensor from a serialized TensorProto
local C = require "mgonnx"
local onnx = { read_tensor = C.read_tensor }

-- TensorProto.DataType -> dtype
local DTYPES = { [1] = "float32", [2] = "uint8", [3] = "int8", [4] = "uint16", [5] = "int16", [6] = "int32",
  [7] = "int64", [9] = "bool", [10] = "float16", [11] = "float64", [12] = "uint32", [13] = "uint64",
  [16] = "bfloat16" }
local function dtype_of(code, what)
  return DTYPES[code] or error(("onnx: %s: element type %s is not supported"):format(what, tostring(code)), 0)
end

local function ints(t) -- a 1-d int tensor (a shape, axes) as a Lua list
  if t == nil then return nil end
  local l = t:reshape(-1):tolist()
  return l
end
local function axis_of(a, nd) return a < 0 and a + nd or a end
local function axes_list(list, nd) -- ONNX axes (any sign) as 0-based non-negative, sorted
  local r = {}
  for i, a in ipairs(list) do r[i] = axis_of(a, nd) end
  table.sort(r)
  return r
end

-- ---------------------------------------------------------------- the handlers
-- ops[type] = {since = first opset handled, fn = function(node, inputs, attrs, opset) -> outputs...};
-- each handles its op from `since` up to opset 18 (ONNX 1.12's newest). The handlers live in
-- stdlib/onnx_ops*.lua, one file per topic.
local ops = {}
onnx.ops = ops
local function op(name, since, fn)
  assert(ops[name] == nil, "onnx: two handlers for " .. name)
  ops[name] = { since = since, fn = fn }
end
onnx.util = { ints = ints, axis_of = axis_of, axes_list = axes_list, dtype_of = dtype_of, ops = ops }
for _, topic in ipairs({ "onnx_ops", "onnx_ops_math", "onnx_ops_quant", "onnx_ops_train", "onnx_ops_signal" }) do require(topic)(op, onnx.util) end

-- ---------------------------------------------------------------- models

local Model = {}
Model.__index = Model
Model.__call = function(self, inputs) return self:run(inputs) end

local function opset_of(m) return m.opset["ai.onnx"] or m.opset[""] or 1 end

-- The domains run here besides the default one, each at the model's opset for it (opsets:
-- domain -> version; 1 when not given, as for a subgraph run without them)
local OTHER_DOMAINS = { ["ai.onnx.preview.training"] = true } -- Momentum, Adam, Adagrad

-- Runs graph g's nodes on env (value name -> Tensor); a subgraph's env sees its outer scope's
-- names through __index. Each handler gets (node, inputs, attrs, opset, env); control-flow ops
-- (If, Loop, Scan) run their body graphs with onnx.run_graph.
function onnx.run_graph(g, env, opset, opsets)
  for name, t in pairs(g.initializers) do env[name] = t end
  for k, node in ipairs(g.nodes) do
    local h = ops[node.op]
    local v = opset
    if node.domain ~= "" and node.domain ~= "ai.onnx" then
      v = OTHER_DOMAINS[node.domain] and (opsets and opsets[node.domain] or 1)
    end
    if v == nil or h == nil or v < h.since then
      local count = 0
      for _, n in ipairs(g.nodes) do if n.op == node.op then count = count + 1 end end
      error(("onnx: op %s (%sopset %d, node %d '%s') is not supported: %d node(s) use it"):format(
        node.op, node.domain ~= "" and node.domain .. " " or "", v or 0, k, node.name, count), 0)
    end
    local xs = {}
    for i, name in ipairs(node.inputs) do if name ~= "" then xs[i] = env[name] end end
    local outs = table.pack(h.fn(node, xs, node.attrs, v, env))
    for i, name in ipairs(node.outputs) do if name ~= "" then env[name] = outs[i] end end
  end
  return env
end

-- Runs the model on `inputs` (name -> Tensor); returns output name -> Tensor (lazy).
function Model:run(inputs)
  local env = {}
  for _, i in ipairs(self.inputs) do
    local v = inputs[i.name]
    if v == nil then
      local want = {}
      for _, j in ipairs(self.inputs) do want[#want + 1] = j.name end
      error(("onnx: input '%s' is missing (the model takes %s)"):format(i.name, table.concat(want, ", ")), 2)
    end
    env[i.name] = v
  end
  local ok, err = pcall(onnx.run_graph, self.graph, env, opset_of(self), self.opset)
  if not ok then error(err, 2) end
  local r = {}
  for _, o in ipairs(self.outputs) do r[o.name] = env[o.name] end
  return r
end

-- The model in `path`: its graph, and inputs (those not given a value by an initializer).
function onnx.load(path)
  if type(path) ~= "string" then error("onnx.load: give the path of a .onnx file", 2) end
  local m = C.load(path)
  m.inputs = {}
  for _, i in ipairs(m.graph.inputs) do
    if m.graph.initializers[i.name] == nil then m.inputs[#m.inputs + 1] = i end
  end
  m.outputs = m.graph.outputs
  return setmetatable(m, Model)
end

return onnx
