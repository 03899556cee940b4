-- onnx: run ONNX models with the Tensor API, as tinygrad's nn/onnx.py does. The file is read by
-- ONNX's own library (interp/bind_onnx.cpp); here each op type has one handler, with the opset
-- range it handles, so the table below says which ops and versions run.
--   local m = onnx.load(path)   m.inputs, m.outputs ({name=, shape=, dtype=}), m.opset, m.producer
--   local outs = m:run{x = t}   (or m{...}): output name -> Tensor, lazy like every result
--   onnx.read_tensor(path)      a Tensor from a serialized TensorProto
--   onnx.read_value(path, type) a tensor, sequence or optional, as the type (a value info's) says
-- Values besides Tensors: a sequence is a Lua list of values with the metatable onnx.Sequence
-- (onnx.sequence{...} makes one), an optional that holds nothing is onnx.NONE, and a string
-- tensor is a list of strings with the metatable onnx.Strings (onnx.strings(list, shape)).
local C = require "mgonnx"
local is_tensor = require("args").is_tensor
local onnx = {}

onnx.Sequence = { __name = "onnx.Sequence" }
onnx.NONE = setmetatable({}, { __name = "onnx.NONE", __tostring = function() return "onnx.NONE" end })
function onnx.sequence(list) return setmetatable(list or {}, onnx.Sequence) end
-- A string tensor (moongrad's dtypes have no strings): a Lua list of the strings in row-major
-- order, its `shape` a field, its metatable onnx.Strings
onnx.Strings = C.Strings -- made in C, which gives string tensors to Lua
function onnx.strings(list, shape)
  list.shape = shape or { #list }
  return setmetatable(list, onnx.Strings)
end
function onnx.is_strings(v) return getmetatable(v) == onnx.Strings end
function onnx.is_sequence(v) return getmetatable(v) == onnx.Sequence end

-- C's plain lists and nils as the values above, following the type
local function as_value(v, type)
  if type == nil or type.kind == "tensor" then return v end
  if type.kind == "optional" then
    if v == nil then return onnx.NONE end
    return as_value(v, type.elem)
  end
  if type.kind == "sequence" then
    for i, e in ipairs(v) do v[i] = as_value(e, type.elem) end
    return onnx.sequence(v)
  end
  error(("onnx: values of kind %s are not supported"):format(tostring(type.kind)), 0)
end
function onnx.read_value(path, type) return as_value(C.read_value(path, type and type.kind), type) end
function onnx.read_tensor(path) return C.read_value(path, "tensor") end

-- TensorProto.DataType -> dtype, as interp/bind_onnx.cpp maps them
local function dtype_of(code, what)
  local ok, name = pcall(C.dtype, code, what)
  if not ok then error("onnx: " .. tostring(name):gsub("^onnx%.dtype: ", ""), 0) end
  return name
end

local function ints(t) -- a 1-d int tensor (a shape, axes) as a Lua list
  return t and t:reshape(-1):tolist()
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
onnx.util = { ints = ints, axis_of = axis_of, axes_list = axes_list, dtype_of = dtype_of, ops = ops, onnx = onnx }
for _, topic in ipairs({ "onnx_ops", "onnx_ops_math", "onnx_ops_quant", "onnx_ops_train", "onnx_ops_signal",
  "onnx_ops_vision", "onnx_ops_index", "onnx_ops_rnn", "onnx_ops_control", "onnx_ops_text" }) do
  require(topic)(op, onnx.util)
end

-- ---------------------------------------------------------------- models

local Model = {}
Model.__index = Model
Model.__call = function(self, inputs) return self:run(inputs) end

local function opset_of(m) return m.opset["ai.onnx"] or m.opset[""] or 1 end

-- Runs graph g's nodes on env (value name -> Tensor); a subgraph's env sees its outer scope's
-- names through __index. Each handler gets (node, inputs, attrs, opset, env); control-flow ops
-- (If, Loop, Scan) run their body graphs with onnx.run_graph. An op of another domain than the
-- default one is keyed "domain:Op" in onnx.ops and runs at the model's opset for that domain
-- (opsets: domain -> version; 1 when not given, as for a subgraph run without them).
function onnx.run_graph(g, env, opset, opsets)
  for name, t in pairs(g.initializers) do env[name] = t end
  for k, node in ipairs(g.nodes) do
    local default = node.domain == "" or node.domain == "ai.onnx"
    local key = default and node.op or node.domain .. ":" .. node.op
    local h, v = ops[key], default and opset or (opsets and opsets[node.domain] or 1)
    if h == nil or v < h.since then
      local count = 0
      for _, n in ipairs(g.nodes) do if n.op == node.op then count = count + 1 end end
      error(("onnx: op %s (%sopset %d, node %d '%s') is not supported: %d node(s) use it"):format(
        node.op, default and "" or node.domain .. " ", v, k, node.name, count), 0)
    end
    local xs = {}
    for i, name in ipairs(node.inputs) do if name ~= "" then xs[i] = env[name] end end
    local outs = table.pack(pcall(h.fn, node, xs, node.attrs, v, env))
    if not outs[1] then -- the handler's message, with the node it ran for
      local msg = tostring(outs[2])
      if not msg:find("^onnx: node ") then
        msg = ("onnx: node %d (%s%s): %s"):format(k, node.op, node.name ~= "" and " '" .. node.name .. "'" or "", msg)
      end
      error(msg, 0)
    end
    for i, name in ipairs(node.outputs) do if name ~= "" then env[name] = outs[i + 1] end end
  end
  return env
end

-- fn(...) with device as the default device (lazy constants and file data land there)
local function on_device(device, fn, ...)
  if device == nil then return fn(...) end
  local args = table.pack(...)
  return Context({ DEV = device }, function() return fn(table.unpack(args, 1, args.n)) end)
end

local function names_of(list)
  local r = {}
  for _, v in ipairs(list) do
    local shape = {}
    for i, d in ipairs(v.shape or {}) do shape[i] = tostring(d) end
    r[#r + 1] = v.kind == "tensor" and ("%s (%s %s)"):format(v.name, v.dtype, table.concat(shape, "x")) or v.name
  end
  return table.concat(r, ", ")
end

-- the given value against the graph input it feeds: kind, dtype and the fixed dims
local function check_input(i, v, all)
  local function bad(why) error(("onnx: input '%s' %s (the model takes %s)"):format(i.name, why, names_of(all)), 0) end
  if i.kind ~= "tensor" then return end
  if i.dtype == "string" then
    if not onnx.is_strings(v) then bad("must be strings (onnx.strings{...}), got " .. type(v)) end
    return
  end
  if not is_tensor(v) then bad("must be a Tensor, got " .. type(v)) end
  if i.dtype ~= "?" and v.dtype ~= i.dtype then bad(("has dtype %s, want %s"):format(v.dtype, i.dtype)) end
  if i.shape then
    if #v.shape ~= #i.shape then bad(("has %d dims (%s), want %d"):format(#v.shape, table.concat(v.shape, "x"), #i.shape)) end
    for k, d in ipairs(i.shape) do
      if math.type(d) == "integer" and v.shape[k] ~= d then
        bad(("has %d at dim %d (shape %s), want %d"):format(v.shape[k], k - 1, table.concat(v.shape, "x"), d))
      end
    end
  end
end

-- Runs the model on `inputs` (name -> Tensor); returns output name -> Tensor (lazy).
function Model:run(inputs)
  if type(inputs) ~= "table" then error("onnx: run takes a table {input name = Tensor}", 2) end
  local env, known = {}, {}
  for _, i in ipairs(self.inputs) do
    known[i.name] = true
    local v = inputs[i.name]
    if v == nil and i.kind == "optional" then v = onnx.NONE end -- an optional not given holds nothing
    if v == nil then error(("onnx: input '%s' is missing (the model takes %s)"):format(i.name, names_of(self.inputs)), 2) end
    check_input(i, v, self.inputs)
    if self.device and is_tensor(v) and v.device ~= self.device then v = v:to(self.device) end
    env[i.name] = v
  end
  for name in pairs(inputs) do
    if not known[name] then
      error(("onnx: '%s' is not an input of the model (it takes %s)"):format(tostring(name), names_of(self.inputs)), 2)
    end
  end
  local ok, err = pcall(on_device, self.device, onnx.run_graph, self.graph, env, opset_of(self), self.opset)
  if not ok then error(err, 0) end
  local r = {}
  for _, o in ipairs(self.outputs) do r[o.name] = env[o.name] end
  return r
end

-- The model in `path`: its graph, and inputs (those not given a value by an initializer).
-- opts.device: the device its weights live on and its kernels run on (the default device if absent).
function onnx.load(path, opts)
  if type(path) ~= "string" then error("onnx.load: give the path of a .onnx file", 2) end
  opts = opts or {}
  local device
  if opts.device ~= nil then
    for _, d in ipairs(Device.names()) do
      if type(opts.device) == "string" and d:upper() == opts.device:upper() then device = d end
    end
    if not device then
      error(("onnx.load: unknown device '%s' (known: %s)"):format(tostring(opts.device), table.concat(Device.names(), ", ")), 2)
    end
  end
  local m = on_device(device, C.load, path)
  m.device = device
  m.inputs = {}
  for _, i in ipairs(m.graph.inputs) do
    if m.graph.initializers[i.name] == nil then m.inputs[#m.inputs + 1] = i end
  end
  m.outputs = m.graph.outputs
  return setmetatable(m, Model)
end

return onnx
