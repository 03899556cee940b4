-- The ONNX control flow (If, Loop, Scan), sequences and optionals. Bodies are graphs in
-- attributes, run with onnx.run_graph over a scope that sees the enclosing one; a condition or a
-- trip count is read back with :item(), so the control flow is decided eagerly while the graph is
-- built. A sequence is a Lua list with the metatable onnx.Sequence; an empty optional is onnx.NONE.
-- Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local ints, axis_of, onnx = U.ints, U.axis_of, U.onnx

-- Runs graph `body` with its declared inputs bound to args[1..] over a scope that sees `env`;
-- returns the list of its outputs, in its order.
local function run_body(body, env, opset, args)
  local scope = setmetatable({}, { __index = env })
  for i, v in ipairs(body.inputs) do scope[v.name] = args[i] end
  onnx.run_graph(body, scope, opset)
  local outs = {}
  for i, o in ipairs(body.outputs) do outs[i] = scope[o.name] end
  return outs
end

-- the item-th (0-based) slice of x along axis, that axis dropped
local function slice_at(x, axis, item)
  local idx = {}
  for i = 1, x.ndim do idx[i] = { nil } end
  idx[axis + 1] = item
  return x[idx]
end

-- Values a body produced once per iteration, stacked along a new axis. With no iterations the
-- body's output type gives the shape (0, ...), where it is known.
local function stack_outputs(node, list, axis, info)
  if #list > 0 then return Tensor.stack(list, axis_of(axis, list[1].ndim + 1)) end
  local shape = { 0 }
  for i, s in ipairs(info.shape or {}) do
    if math.type(s) ~= "integer" then
      error(("onnx: %s: no iterations, and output '%s' has no static shape to make it empty from"):format(
        node.op, info.name), 0)
    end
    shape[i + 1] = s
  end
  return Tensor.zeros(shape, { dtype = info.dtype })
end

op("If", 1, function(_, x, at, opset, env)
  local body = x[1]:item() and at.then_branch or at.else_branch
  local outs = run_body(body, env, opset, {})
  return table.unpack(outs, 1, #body.outputs)
end)

-- Loop(M, cond, v...): body(i, cond, v...) -> (cond, v..., scan...); the loop-carried values v
-- go round, each scan output is stacked over the iterations. As the spec says, an omitted M
-- means no bound, and an omitted cond input means the body's condition is ignored.
op("Loop", 1, function(node, x, at, opset, env)
  local body = at.body
  local M = x[1] and x[1]:item()
  local cond = true
  if x[2] then cond = x[2]:item() end
  local carried = {}
  for i = 3, #node.inputs do carried[i - 2] = x[i] end
  local n = #node.inputs - 2
  local k = #body.outputs - 1 - n
  if M == nil and x[2] == nil then error("onnx: Loop with neither a trip count nor a condition never ends", 0) end
  local scans = {}
  for j = 1, k do scans[j] = {} end
  local i = 0
  while (M == nil or i < M) and cond do
    local args = { Tensor(i, "int64"), Tensor(cond, "bool") }
    for j = 1, n do args[j + 2] = carried[j] end
    local outs = run_body(body, env, opset, args)
    if x[2] then cond = outs[1]:item() end
    for j = 1, n do carried[j] = outs[j + 1] end
    for j = 1, k do scans[j][i + 1] = outs[n + 1 + j] end
    i = i + 1
  end
  local r = {}
  for j = 1, n do r[j] = carried[j] end
  for j = 1, k do r[n + j] = stack_outputs(node, scans[j], 0, body.outputs[n + 1 + j]) end
  return table.unpack(r, 1, n + k)
end)

-- One scan: body(state..., element...) -> (state..., scan output...), stepping along each scan
-- input's axis (backwards where its direction is 1); each scan output is stacked along its axis,
-- in reverse order where its direction is 1.
local function scan(node, body, states, xs, at, env, opset, in_dirs)
  local n, m = #states, #xs
  local in_axes, out_axes = at.scan_input_axes or {}, at.scan_output_axes or {}
  local out_dirs = at.scan_output_directions or {}
  local axes, steps = {}, nil
  for j = 1, m do
    axes[j] = axis_of(in_axes[j] or 0, xs[j].ndim)
    local len = xs[j].shape[axes[j] + 1]
    if steps and len ~= steps then error(("onnx: %s: scan inputs of %d and %d steps"):format(node.op, steps, len), 0) end
    steps = len
  end
  local k = #body.outputs - n
  local scans = {}
  for j = 1, k do scans[j] = {} end
  for t = 0, (steps or 0) - 1 do
    local args = {}
    for j = 1, n do args[j] = states[j] end
    for j = 1, m do args[n + j] = slice_at(xs[j], axes[j], (in_dirs[j] or 0) == 1 and steps - 1 - t or t) end
    local outs = run_body(body, env, opset, args)
    for j = 1, n do states[j] = outs[j] end
    for j = 1, k do
      if (out_dirs[j] or 0) == 1 then table.insert(scans[j], 1, outs[n + j]) else scans[j][t + 1] = outs[n + j] end
    end
  end
  local r = {}
  for j = 1, n do r[j] = states[j] end
  for j = 1, k do r[n + j] = stack_outputs(node, scans[j], out_axes[j] or 0, body.outputs[n + j]) end
  return r
end

-- Scan 9+: inputs are the initial states, then num_scan_inputs scanned tensors.
-- Scan 8: a first input sequence_lens, and every input has a batch axis 0 (the scan axis is 1);
-- each batch row is scanned on its own.
op("Scan", 8, function(node, x, at, opset, env)
  local m = at.num_scan_inputs
  if opset >= 9 then
    local n = #node.inputs - m
    local states, xs = {}, {}
    for j = 1, n do states[j] = x[j] end
    for j = 1, m do xs[j] = x[n + j] end
    local r = scan(node, at.body, states, xs, at, env, opset, at.scan_input_directions or {})
    return table.unpack(r, 1, #at.body.outputs)
  end
  local n = #node.inputs - 1 - m
  local first = x[2]
  local batch = first.shape[1]
  if x[1] then
    for b, len in ipairs(ints(x[1])) do
      local full = x[2 + n].shape[2]
      if len ~= full then
        error(("onnx: Scan (opset 8): sequence_lens %d for row %d, shorter than the %d steps, is not supported"):format(
          len, b - 1, full), 0)
      end
    end
  end
  local rows = {}
  for b = 0, batch - 1 do
    local states, xs = {}, {}
    for j = 1, n do states[j] = slice_at(x[1 + j], 0, b) end
    for j = 1, m do xs[j] = slice_at(x[1 + n + j], 0, b) end
    rows[b + 1] = scan(node, at.body, states, xs, {}, env, opset, at.directions or {})
  end
  local r = {}
  for j = 1, #at.body.outputs do
    local list = {}
    for b = 1, batch do list[b] = rows[b][j] end
    r[j] = Tensor.stack(list, 0)
  end
  return table.unpack(r, 1, #at.body.outputs)
end)

-- ---------------------------------------------------------------- sequences

local function seq_of(node, v)
  if not onnx.is_sequence(v) then error(("onnx: %s: input is not a sequence"):format(node.op), 0) end
  return v
end
local function copy(seq)
  local r = {}
  for i, v in ipairs(seq) do r[i] = v end
  return r
end
-- a position (a Tensor, negative from the end) as a 1-based Lua index; `last` is the largest
-- valid 0-based position
local function position(node, p, n, last)
  local i = p:item()
  if i < 0 then i = i + n end
  if i < 0 or i > last then error(("onnx: %s: position %d is out of range for a sequence of %d"):format(node.op, p:item(), n), 0) end
  return i + 1
end

op("SequenceConstruct", 11, function(_, x) return onnx.sequence(copy(x)) end)
op("SequenceEmpty", 11, function() return onnx.sequence{} end)
op("SequenceLength", 11, function(node, x) return Tensor(#seq_of(node, x[1]), "int64") end)
op("SequenceAt", 11, function(node, x)
  local s = seq_of(node, x[1])
  return s[position(node, x[2], #s, #s - 1)]
end)
op("SequenceInsert", 11, function(node, x)
  local s = copy(seq_of(node, x[1]))
  local at = x[3] and position(node, x[3], #s, #s) or #s + 1
  table.insert(s, at, x[2])
  return onnx.sequence(s)
end)
op("SequenceErase", 11, function(node, x)
  local s = copy(seq_of(node, x[1]))
  local at = x[2] and position(node, x[2], #s, #s - 1) or #s
  if #s == 0 then error("onnx: SequenceErase: the sequence is empty", 0) end
  table.remove(s, at)
  return onnx.sequence(s)
end)
-- split: none (pieces of 1, squeezed unless keepdims), one size (the last piece may be smaller)
-- or a list of sizes
op("SplitToSequence", 11, function(_, x, at)
  local d, split = x[1], x[2]
  local axis = axis_of(at.axis or 0, d.ndim)
  local pieces
  if split == nil then
    pieces = d:split(1, axis)
    if at.keepdims == 0 then
      for i, p in ipairs(pieces) do pieces[i] = p:squeeze(axis) end
    end
  elseif split.ndim == 0 then
    pieces = d:split(split:item(), axis)
  else
    pieces = d:split(ints(split), axis)
  end
  return onnx.sequence(pieces)
end)
op("ConcatFromSequence", 11, function(node, x, at)
  local s = copy(seq_of(node, x[1]))
  if #s == 0 then error("onnx: ConcatFromSequence: the sequence is empty", 0) end
  if at.new_axis == 1 then return Tensor.stack(s, axis_of(at.axis, s[1].ndim + 1)) end
  return Tensor.cat(s, axis_of(at.axis, s[1].ndim))
end)
-- SequenceMap: the body runs once per element of the first input; the other inputs give their
-- i-th element when they are sequences, or themselves. Each output is a sequence.
op("SequenceMap", 17, function(node, x, at, opset, env)
  local n = #seq_of(node, x[1])
  for j = 2, #node.inputs do
    if onnx.is_sequence(x[j]) and #x[j] ~= n then
      error(("onnx: SequenceMap: input %d has %d elements, the first %d"):format(j, #x[j], n), 0)
    end
  end
  local r = {}
  for k = 1, #at.body.outputs do r[k] = onnx.sequence{} end
  for i = 1, n do
    local args = {}
    for j = 1, #node.inputs do args[j] = onnx.is_sequence(x[j]) and x[j][i] or x[j] end
    local outs = run_body(at.body, env, opset, args)
    for k = 1, #outs do r[k][i] = outs[k] end
  end
  return table.unpack(r, 1, #at.body.outputs)
end)

-- ---------------------------------------------------------------- optionals

op("Optional", 15, function(_, x)
  if x[1] == nil then return onnx.NONE end
  return x[1]
end)
op("OptionalHasElement", 15, function(_, x) return Tensor(x[1] ~= nil and x[1] ~= onnx.NONE, "bool") end)
op("OptionalGetElement", 15, function(_, x)
  if x[1] == nil or x[1] == onnx.NONE then error("onnx: OptionalGetElement: the optional holds nothing", 0) end
  return x[1]
end)

-- ---------------------------------------------------------------- training

-- Gradient (domain ai.onnx.preview.training): d y / d x for each tensor named in xs, by
-- moongrad's autograd over the graph that made y (a non-scalar y is summed: a seed of ones).
-- The inputs say at which values; only the values y was computed from are supported (feeding
-- others would mean rerunning the graph between them and y).
op("ai.onnx.preview.training:Gradient", 1, function(node, x, at, _, env)
  local y = env[at.y]
  if y == nil then error(("onnx: Gradient: y '%s' is not a value of the graph"):format(tostring(at.y)), 0) end
  local targets = {}
  for i, name in ipairs(at.xs) do
    if x[i] ~= env[name] then
      error(("onnx: Gradient: input %d is not the value named '%s' in xs; gradients at other values are not supported"):format(
        i, name), 0)
    end
    targets[i] = x[i]
  end
  if y:numel() ~= 1 then y = y:sum() end
  return table.unpack(Tensor.gradient(y, targets), 1, #targets)
end)
end
