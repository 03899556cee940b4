-- The ONNX op handlers on the Tensor API: elementwise, shapes, reductions, losses, convolution,
-- pooling, normalization, Resize. Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local ints, axis_of, axes_list, dtype_of, ops = U.ints, U.axis_of, U.axes_list, U.dtype_of, U.ops

for name, m in pairs({ Abs = "abs", Neg = "neg", Exp = "exp", Log = "log", Sqrt = "sqrt", Reciprocal = "reciprocal",
  Relu = "relu", Sigmoid = "sigmoid", Tanh = "tanh", Sin = "sin", Cos = "cos", Tan = "tan", Floor = "floor",
  Ceil = "ceil", Round = "round", Sign = "sign", Erf = "erf", Softplus = "softplus", Not = "logical_not",
  Softsign = "softsign" }) do
  op(name, 1, function(_, x) return x[1][m](x[1]) end)
end
op("Identity", 1, function(_, x) return x[1] end)
op("Pow", 1, function(_, x) return x[1]:pow(x[2]):cast(x[1].dtype) end) -- the base's dtype
for name, m in pairs({ Add = "add", Sub = "sub", Mul = "mul", Equal = "eq", Less = "lt", Greater = "gt",
  LessOrEqual = "le", GreaterOrEqual = "ge", And = "bitwise_and", Or = "bitwise_or", Xor = "bitwise_xor" }) do
  op(name, 1, function(_, x) return x[1][m](x[1], x[2]) end)
end
-- integer Div truncates in ONNX (C's), float Div is true division
op("Div", 1, function(_, x)
  local a, b = x[1], x[2]
  if a.dtype:find("int") then return a:div(b, false, "trunc"):cast(a.dtype) end
  return a:div(b)
end)
op("Mod", 10, function(_, x, at)
  if at.fmod == 1 then return x[1] - x[2] * x[1]:div(x[2], false, "trunc") end
  if x[1].dtype:find("^uint") then return Tensor._alu("MOD", x[1], x[2]) end -- no signs to fix
  return x[1] % x[2]
end)
for name, m in pairs({ Max = "maximum", Min = "minimum" }) do
  op(name, 1, function(_, x)
    local r = x[1]
    for i = 2, #x do r = r[m](r, x[i]) end
    return r
  end)
end
op("Sum", 1, function(_, x)
  local r = x[1]
  for i = 2, #x do r = r + x[i] end
  return r
end)
op("Mean", 1, function(_, x)
  local r = x[1]
  for i = 2, #x do r = r + x[i] end
  return r / #x
end)
op("Where", 9, function(_, x) return x[1]:where(x[2], x[3]) end)
op("LeakyRelu", 1, function(_, x, at) return x[1]:leaky_relu(at.alpha or 0.01) end)
op("Elu", 1, function(_, x, at) return x[1]:elu(at.alpha or 1.0) end)
op("Selu", 1, function(_, x, at)
  local a, g = at.alpha or 1.67326319217681884765625, at.gamma or 1.05070102214813232421875
  return (x[1]:gt(0)):where(x[1], (x[1]:exp() - 1) * a) * g
end)
op("HardSigmoid", 1, function(_, x, at)
  return (x[1] * (at.alpha or 0.2) + (at.beta or 0.5)):clamp(0, 1)
end)
op("Clip", 1, function(_, x, at)
  local lo, hi = x[2] or at.min, x[3] or at.max
  if type(lo) ~= "number" and lo ~= nil then lo = lo:item() end
  if type(hi) ~= "number" and hi ~= nil then hi = hi:item() end
  if lo == nil and hi == nil then return x[1] end
  return x[1]:clamp(lo, hi)
end)
local STRING = 8 -- TensorProto.DataType
op("Cast", 1, function(node, x, at)
  if at.to == STRING or U.onnx.is_strings(x[1]) then return U.cast_strings(x[1], at.to, node) end
  return x[1]:cast(dtype_of(at.to, node.name))
end)

-- shapes
op("Shape", 1, function(_, x, at)
  local s = x[1].shape
  local first, last = at.start or 0, at["end"] or #s
  first, last = axis_of(first, #s), axis_of(last, #s)
  local r = {}
  for i = first + 1, math.min(last, #s) do r[#r + 1] = s[i] end
  return Tensor(r, "int64")
end)
op("Reshape", 5, function(_, x, at)
  local shape, s = ints(x[2]), x[1].shape
  for i, v in ipairs(shape) do
    if v == 0 and at.allowzero ~= 1 then shape[i] = s[i] end
  end
  return x[1]:reshape(shape)
end)
op("Flatten", 1, function(_, x, at)
  local a = axis_of(at.axis or 1, x[1].ndim)
  local lead = 1
  for i = 1, a do lead = lead * x[1].shape[i] end
  return x[1]:reshape(lead, -1)
end)
op("Transpose", 1, function(_, x, at)
  local perm = at.perm
  if not perm then
    perm = {}
    for i = 1, x[1].ndim do perm[i] = x[1].ndim - i end
  end
  return x[1]:permute(perm)
end)
local function squeeze_axes(node, x, at, opset) return opset >= 13 and ints(x[2]) or at.axes end
op("Squeeze", 1, function(node, x, at, opset)
  local axes = squeeze_axes(node, x, at, opset)
  local s, keep = x[1].shape, {}
  local drop = {}
  if axes then for _, a in ipairs(axes_list(axes, #s)) do drop[a + 1] = true end
  else for i, d in ipairs(s) do drop[i] = d == 1 end end
  for i, d in ipairs(s) do if not drop[i] then keep[#keep + 1] = d end end
  return x[1]:reshape(keep)
end)
op("Unsqueeze", 1, function(node, x, at, opset)
  local axes = squeeze_axes(node, x, at, opset)
  local nd = x[1].ndim + #axes
  local new, shape, k = {}, {}, 1
  for _, a in ipairs(axes_list(axes, nd)) do new[a + 1] = true end
  for i = 1, nd do
    if new[i] then shape[i] = 1 else shape[i] = x[1].shape[k]; k = k + 1 end
  end
  return x[1]:reshape(shape)
end)
op("Concat", 1, function(_, x, at)
  local args = {}
  for i = 2, #x do args[#args + 1] = x[i] end
  args[#args + 1] = { dim = at.axis }
  return x[1]:cat(table.unpack(args))
end)
op("Size", 1, function(_, x) return Tensor(x[1]:numel(), "int64") end)
op("ThresholdedRelu", 10, function(_, x, at) return x[1]:gt(at.alpha or 1.0):where(x[1], 0) end)
op("CastLike", 15, function(node, x)
  local like = U.onnx.is_strings(x[2]) and STRING or x[2].dtype
  if like == STRING or U.onnx.is_strings(x[1]) then return U.cast_strings(x[1], like, node) end
  return x[1]:cast(like)
end)
-- Dropout: the identity and a mask of all true, unless training_mode (an input from opset 12)
-- is true: then each element is kept with probability 1 - ratio and scaled by 1 / (1 - ratio),
-- drawn from moongrad's generator (the seed attribute is not used)
op("Dropout", 1, function(_, x, at, opset)
  local training = opset >= 12 and x[3] ~= nil and x[3]:item()
  local ratio = opset >= 12 and x[2] and x[2]:item() or at.ratio or 0.5
  if not training or ratio == 0 then return x[1], Tensor.ones(x[1].shape, { dtype = "bool" }) end
  local keep = x[1]:rand_like():ge(ratio)
  return keep:where(x[1] / (1 - ratio), 0):cast(x[1].dtype), keep
end)
op("Range", 11, function(_, x)
  local start, limit, delta = x[1]:item(), x[2]:item(), x[3]:item()
  local n = math.max(math.ceil((limit - start) / delta), 0)
  return (Tensor.arange(n, { dtype = x[1].dtype }) * delta + start):cast(x[1].dtype)
end)
-- Slice: starts, ends (clamped into the dim, negative from the end), axes, steps as inputs (10+)
op("Slice", 1, function(_, x, at, opset)
  local d = x[1]
  local starts, ends, axes, steps
  if opset < 10 then starts, ends, axes = at.starts, at.ends, at.axes
  else starts, ends, axes, steps = ints(x[2]), ints(x[3]), ints(x[4]), ints(x[5]) end
  local idx = {}
  for i = 1, d.ndim do idx[i] = { nil } end
  for i = 1, #starts do
    local a = axis_of(axes and axes[i] or i - 1, d.ndim)
    local n, step = d.shape[a + 1], steps and steps[i] or 1
    local function clamp(v, lo, hi) return math.max(lo, math.min(hi, v)) end
    local b, e = starts[i], ends[i]
    if b < 0 then b = b + n end
    if e < 0 then e = e + n end
    if step > 0 then b, e = clamp(b, 0, n), clamp(e, 0, n) else b, e = clamp(b, -1, n - 1), clamp(e, -1, n - 1) end
    if step > 0 then
      idx[a + 1] = e > b and { b, e, step } or { 0, 0 }
    else -- backwards: flip, then step forward over the flipped dim
      local fb, fe = n - 1 - b, n - 1 - e
      idx[a + 1] = fe > fb and { fb, fe, -step } or { 0, 0 }
      d = d:flip(a)
    end
  end
  return d[idx]
end)
op("Split", 1, function(node, x, at, opset)
  local axis = axis_of(at.axis or 0, x[1].ndim)
  local sizes = (opset >= 13 and ints(x[2])) or at.split
  if not sizes then
    local n, parts = x[1].shape[axis + 1], #node.outputs
    if at.num_outputs then parts = at.num_outputs end
    local each = math.ceil(n / parts)
    sizes = {}
    for i = 1, parts do sizes[i] = math.min(each, n - each * (i - 1)) end
  end
  local r, at0 = {}, 0
  for i, sz in ipairs(sizes) do
    local idx = {}
    for k = 1, x[1].ndim do idx[k] = { nil } end
    idx[axis + 1] = { at0, at0 + sz }
    r[i] = x[1][idx]
    at0 = at0 + sz
  end
  return table.unpack(r)
end)
-- Pad: pads (begin..., end...) as an attribute before opset 11, then as an input; modes
-- constant, reflect, edge (moongrad's replicate)
op("Pad", 1, function(_, x, at, opset)
  local pads = opset >= 11 and ints(x[2]) or at.pads or at.paddings
  local value = opset >= 11 and (x[3] and x[3]:item() or 0) or (at.value or 0)
  local n = x[1].ndim
  local axes = opset >= 18 and x[4] and axes_list(ints(x[4]), n) or nil
  local p = {}
  for i = 1, n do p[i] = { 0, 0 } end
  local k = axes and #axes or n
  for j = 1, k do
    local a = axes and axes[j] + 1 or j
    p[a] = { pads[j], pads[j + k] }
  end
  local mode = at.mode or "constant"
  return x[1]:pad(p, mode == "edge" and "replicate" or mode, value)
end)
-- PRelu: before opset 7 a 1-d slope of the channel count is per channel (axis 1), not broadcast
-- from the right
op("PRelu", 1, function(_, x, _, opset)
  local slope = x[2]
  if opset < 7 and slope.ndim == 1 and x[1].ndim > 2 and slope.shape[1] == x[1].shape[2] then
    local shape = { slope.shape[1] }
    for _ = 3, x[1].ndim do shape[#shape + 1] = 1 end
    slope = slope:reshape(shape)
  end
  return x[1]:lt(0):where(x[1] * slope, x[1])
end)
op("Tile", 1, function(_, x)
  local reps = ints(x[2])
  local d = x[1]
  -- each dim i: (s) -> (1, s) expanded to (r, s), then merged to (r*s)
  local shape, big, final = {}, {}, {}
  for i, sz in ipairs(d.shape) do
    shape[#shape + 1] = 1; shape[#shape + 1] = sz
    big[#big + 1] = reps[i]; big[#big + 1] = sz
    final[i] = reps[i] * sz
  end
  return d:reshape(shape):expand(big):reshape(final)
end)
op("InstanceNormalization", 1, function(_, x, at)
  local axes = {}
  for a = 2, x[1].ndim - 1 do axes[#axes + 1] = a end
  local shape = { 1, x[1].shape[2] }
  for _ = 3, x[1].ndim do shape[#shape + 1] = 1 end
  local y = x[1] - x[1]:mean(axes, true)
  local r = y * ((y * y):mean(axes, true) + (at.epsilon or 1e-5)):rsqrt()
  return r * x[2]:reshape(shape) + x[3]:reshape(shape)
end)
op("Shrink", 9, function(_, x, at)
  local l, b = at.lambd or 0.5, at.bias or 0
  return x[1]:lt(-l):where(x[1] + b, x[1]:gt(l):where(x[1] - b, 0)):cast(x[1].dtype)
end)
op("Trilu", 14, function(_, x, at)
  local k = x[2] and x[2]:item() or 0
  if at.upper == 0 then return x[1]:tril(k) end
  return x[1]:triu(k)
end)
op("CumSum", 11, function(_, x, at)
  local axis = axis_of(x[2]:item(), x[1].ndim)
  local d = x[1]
  if at.reverse == 1 then d = d:flip(axis) end
  local r = d:cumsum(axis)
  if at.exclusive == 1 then r = r - d end
  if at.reverse == 1 then r = r:flip(axis) end
  return r
end)
op("BitShift", 11, function(_, x, at) return Tensor._alu(at.direction == "LEFT" and "SHL" or "SHR", x[1], x[2]) end)
op("LayerNormalization", 17, function(node, x, at)
  local axis = axis_of(at.axis or -1, x[1].ndim)
  local axes = {}
  for a = axis, x[1].ndim - 1 do axes[#axes + 1] = a end
  local d = x[1]:cast("float32")
  local mean = d:mean(axes, true)
  local y = d - mean
  local invstd = ((y * y):mean(axes, true) + (at.epsilon or 1e-5)):rsqrt()
  local r = y * invstd * x[2]
  if x[3] then r = r + x[3] end
  return r:cast(x[1].dtype), mean, invstd
end)
op("Expand", 8, function(_, x)
  local shape, s = ints(x[2]), x[1].shape
  local nd = math.max(#shape, #s)
  local out, src = {}, {}
  for i = 1, nd do
    local a = shape[i - (nd - #shape)] or 1
    local b = s[i - (nd - #s)] or 1
    out[i] = (a == 1) and b or a
    src[i] = b
  end
  return x[1]:reshape(src):expand(out)
end)
-- Gather: each index picks a slice along the axis; done as a one-hot select and a sum (exact for
-- every dtype), then the index dims put where the axis was
op("Gather", 1, function(_, x, at)
  local d, idx = x[1], x[2]
  local axis = axis_of(at.axis or 0, d.ndim)
  local n = d.shape[axis + 1]
  idx = idx:cast("int64")
  idx = idx:lt(0):where(idx + n, idx)
  local perm, rest = { axis }, {}
  for i = 0, d.ndim - 1 do
    if i ~= axis then perm[#perm + 1] = i; rest[#rest + 1] = d.shape[i + 1] end
  end
  local k = 1
  for _, s in ipairs(idx.shape) do k = k * s end
  local oh_shape, d_shape = { k, n }, { 1, n }
  for _, s in ipairs(rest) do oh_shape[#oh_shape + 1] = 1; d_shape[#d_shape + 1] = s end
  local hit = idx:reshape(k, 1):eq(Tensor.arange(n, { dtype = "int64" }):reshape(1, n)):reshape(oh_shape)
  local g = hit:where(d:permute(perm):reshape(d_shape), 0):sum({ axis = 1 }):cast(d.dtype)
  local shape = {}
  for _, s in ipairs(idx.shape) do shape[#shape + 1] = s end
  for _, s in ipairs(rest) do shape[#shape + 1] = s end
  g = g:reshape(shape)
  local ni, back = #idx.shape, {}
  for i = 0, axis - 1 do back[#back + 1] = ni + i end
  for i = 0, ni - 1 do back[#back + 1] = i end
  for i = ni + axis, #shape - 1 do back[#back + 1] = i end
  return g:permute(back)
end)
-- GatherElements: out[..i..] = data[..index[..i..]..] along the axis; the other dims of data are
-- cut to the index's, then a one-hot select over the axis and a sum
op("GatherElements", 11, function(_, x, at)
  local d, idx = x[1], x[2]:cast("int64")
  local axis = axis_of(at.axis or 0, d.ndim)
  local n = d.shape[axis + 1]
  idx = idx:lt(0):where(idx + n, idx)
  local cut = {}
  for i = 1, d.ndim do cut[i] = i == axis + 1 and { 0, n } or { 0, idx.shape[i] } end
  d = d:shrink(cut)
  local cls = {}
  for i = 1, d.ndim + 1 do cls[i] = 1 end
  cls[axis + 2] = n
  local hit = idx:unsqueeze(axis + 1):eq(Tensor.arange(n, { dtype = "int64" }):reshape(cls))
  return hit:where(d:unsqueeze(axis), 0):sum({ axis = axis + 1 }):cast(x[1].dtype)
end)
op("OneHot", 9, function(_, x, at)
  local idx, depth, values = x[1], x[2]:item(), x[3]
  local nd = idx.ndim + 1
  local axis = axis_of(at.axis or -1, nd)
  idx = idx:lt(0):where(idx + depth, idx)
  local cls = {}
  for i = 1, nd do cls[i] = 1 end
  cls[axis + 1] = depth
  local hit = idx:unsqueeze(axis):eq(Tensor.arange(depth, { dtype = idx.dtype }):reshape(cls))
  local off, on = values[{ 0 }], values[{ 1 }]
  return hit:where(on, off)
end)
op("Hardmax", 1, function(_, x, at, opset)
  local a = axis_of(at.axis or (opset >= 13 and -1 or 1), x[1].ndim)
  local d = x[1]
  if opset < 13 then
    local lead = 1
    for i = 1, a do lead = lead * d.shape[i] end
    d, a = d:reshape(lead, -1), 1
  end
  local n = d.shape[a + 1]
  local cls = {}
  for i = 1, d.ndim do cls[i] = 1 end
  cls[a + 1] = n
  local hit = d:argmax({ axis = a, keepdim = true }):eq(Tensor.arange(n, { dtype = "int32" }):reshape(cls))
  return hit:cast(x[1].dtype):reshape(x[1].shape)
end)
op("Einsum", 12, function(_, x, at)
  local args = { at.equation }
  for i = 1, #x do args[#args + 1] = x[i] end
  return Tensor.einsum(table.unpack(args))
end)
-- DepthToSpace (DCR: depth, column, row; CRD: column, row, depth) and SpaceToDepth, as views
op("DepthToSpace", 1, function(_, x, at)
  local b = at.blocksize
  local n, c, h, w = table.unpack(x[1].shape)
  local r
  if at.mode == "CRD" then
    r = x[1]:reshape(n, c // (b * b), b, b, h, w):permute(0, 1, 4, 2, 5, 3)
  else
    r = x[1]:reshape(n, b, b, c // (b * b), h, w):permute(0, 3, 4, 1, 5, 2)
  end
  return r:reshape(n, c // (b * b), h * b, w * b)
end)
op("SpaceToDepth", 1, function(_, x, at)
  local b = at.blocksize
  local n, c, h, w = table.unpack(x[1].shape)
  return x[1]:reshape(n, c, h // b, b, w // b, b):permute(0, 3, 5, 1, 2, 4):reshape(n, c * b * b, h // b, w // b)
end)
op("Constant", 1, function(_, _, at)
  if at.value then return at.value end
  if at.value_float then return Tensor(at.value_float, "float32") end
  if at.value_int then return Tensor(at.value_int, "int64") end
  if at.value_floats then return Tensor(at.value_floats, "float32") end
  if at.value_ints then return Tensor(at.value_ints, "int64") end
  error("onnx: Constant without a value this loader reads", 0)
end)
op("ConstantOfShape", 9, function(_, x, at)
  local v = at.value or Tensor({ 0 }, "float32")
  local shape = ints(x[1])
  return Tensor.full(shape, v:reshape(-1):tolist()[1], { dtype = v.dtype })
end)

-- reductions: axes as an attribute, or as an input from opset 13 (ReduceSum) / 18 (the others)
local function reduce(method, input_from)
  return function(_, x, at, opset)
    local axes = opset >= input_from and ints(x[2]) or at.axes
    local keep = at.keepdims ~= 0
    if axes == nil or #axes == 0 then
      if at.noop_with_empty_axes == 1 then return x[1] end
      axes = nil
    else
      axes = axes_list(axes, x[1].ndim)
    end
    return x[1][method](x[1], { axis = axes, keepdim = keep })
  end
end
op("ReduceSum", 1, reduce("sum", 13))
op("ReduceMean", 1, reduce("mean", 18))
op("ReduceMax", 1, reduce("max", 18))
op("ReduceMin", 1, reduce("min", 18))
op("ReduceProd", 1, reduce("prod", 18))
-- the composed reductions: a function of x, the sum, then a function of the result
local function reduce_of(pre, post, input_from)
  local sum = reduce("sum", input_from)
  return function(node, x, at, opset)
    local r = sum(node, { pre(x[1]), x[2] }, at, opset)
    return post and post(r) or r
  end
end
op("ReduceSumSquare", 1, reduce_of(function(t) return t * t end, nil, 18))
op("ReduceL1", 1, reduce_of(function(t) return t:abs() end, nil, 18))
op("ReduceL2", 1, reduce_of(function(t) return t * t end, function(r) return r:sqrt() end, 18))
op("ReduceLogSum", 1, reduce_of(function(t) return t end, function(r) return r:log() end, 18))
op("ReduceLogSumExp", 1, function(node, x, at, opset)
  local m = reduce("max", 18)(node, x, { axes = at.axes, keepdims = 1 }, opset)
  local r = reduce("sum", 18)(node, { (x[1] - m):exp(), x[2] }, at, opset):log()
  if at.keepdims == 0 then return r + reduce("max", 18)(node, x, at, opset) end
  return r + m
end)
for name, m in pairs({ ArgMax = "argmax", ArgMin = "argmin" }) do
  op(name, 1, function(_, x, at)
    local axis = axis_of(at.axis or 0, x[1].ndim)
    local keep = at.keepdims ~= 0
    if at.select_last_index == 1 then -- the first index of the flipped tensor, counted from the end
      local r = x[1]:flip(axis)[m](x[1]:flip(axis), { axis = axis, keepdim = keep })
      return (r * -1 + (x[1].shape[axis + 1] - 1)):cast("int64")
    end
    return x[1][m](x[1], { axis = axis, keepdim = keep }):cast("int64")
  end)
end

-- losses: the target picks one class per position (a one-hot select along axis 1, exact); a
-- target equal to ignore_index counts with weight 0
local function nll(input, target, weight, at)
  local c = input.shape[2]
  local cls = {}
  for i = 1, input.ndim do cls[i] = 1 end
  cls[2] = c
  local hit = target:unsqueeze(1):eq(Tensor.arange(c, { dtype = target.dtype }):reshape(cls))
  local picked = hit:where(input, 0):sum({ axis = 1 })
  local w = weight and hit:where(weight:reshape(cls), 0):sum({ axis = 1 }) or hit:any(1):cast(input.dtype)
  if at.ignore_index then w = target:eq(at.ignore_index):where(0, w) end
  local loss = -picked * w
  local red = at.reduction or "mean"
  if red == "none" then return loss end
  if red == "sum" then return loss:sum() end
  return loss:sum() / w:sum()
end
op("NegativeLogLikelihoodLoss", 12, function(_, x, at) return nll(x[1], x[2], x[3], at) end)
op("SoftmaxCrossEntropyLoss", 12, function(_, x, at)
  local logp = x[1]:log_softmax(1)
  return nll(logp, x[2], x[3], at), logp
end)

-- softmax: from opset 13 along one axis; before, over the flattened dims from axis on
local function softmax_op(method)
  return function(_, x, at, opset)
    local a = axis_of(at.axis or (opset >= 13 and -1 or 1), x[1].ndim)
    if opset >= 13 then return x[1][method](x[1], a) end
    local lead = 1
    for i = 1, a do lead = lead * x[1].shape[i] end
    return x[1]:reshape(lead, -1)[method](x[1]:reshape(lead, -1), 1):reshape(x[1].shape)
  end
end
op("Softmax", 1, softmax_op("softmax"))
op("LogSoftmax", 1, softmax_op("log_softmax"))

-- linear algebra and convolution
op("MatMul", 1, function(_, x) return x[1]:matmul(x[2]) end)
op("Gemm", 1, function(_, x, at)
  local a, b = x[1], x[2]
  if at.transA == 1 then a = a:transpose(0, 1) end
  if at.transB == 1 then b = b:transpose(0, 1) end
  local r = a:matmul(b) * (at.alpha or 1.0)
  if x[3] then r = r + x[3] * (at.beta or 1.0) end
  return r
end)
-- Explicit pads {b1, b2, ..., e1, e2, ...} of a conv or pool over `spatial` (the input's sizes):
-- auto_pad SAME_UPPER / SAME_LOWER pad so that the output is ceil(in / stride), an odd total
-- with its extra element after (UPPER) or before (LOWER); VALID pads nothing; else at.pads
local function conv_pads(node, at, spatial, kernel, strides, dilations)
  local n, mode = #spatial, at.auto_pad or "NOTSET"
  local p = {}
  if mode == "NOTSET" then
    for i = 1, 2 * n do p[i] = at.pads and at.pads[i] or 0 end
  elseif mode == "VALID" then
    for i = 1, 2 * n do p[i] = 0 end
  elseif mode == "SAME_UPPER" or mode == "SAME_LOWER" then
    for i = 1, n do
      local s, d = strides and strides[i] or 1, dilations and dilations[i] or 1
      local out = (spatial[i] + s - 1) // s
      local total = math.max((out - 1) * s + (kernel[i] - 1) * d + 1 - spatial[i], 0)
      local small = total // 2
      p[i], p[i + n] = small, total - small
      if mode == "SAME_LOWER" then p[i], p[i + n] = total - small, small end
    end
  else
    error(("onnx: %s auto_pad %s is not supported"):format(node.op, mode), 0)
  end
  return p
end
local function spatial_of(t, n) return { table.unpack(t.shape, t.ndim - n + 1) } end

op("Conv", 1, function(node, x, at)
  local inp, w = x[1], x[2]
  local n = w.ndim - 2
  local pads = conv_pads(node, at, spatial_of(inp, n), spatial_of(w, n), at.strides, at.dilations)
  local flat = {} -- conv2d's order: (begin, end) per spatial dim, the last dim first
  for i = n, 1, -1 do flat[#flat + 1] = pads[i]; flat[#flat + 1] = pads[i + n] end
  return inp:conv2d(w, x[3], at.group or 1, at.strides or 1, at.dilations or 1, flat)
end)

-- ConvTranspose: the full transposed convolution, then per spatial dim the range
-- [pad begin, full + output_padding - pad end) of it, zeros where that runs past the end (the
-- bias is added after). With output_shape (or auto_pad SAME, whose output is in * stride) the
-- pads are what gives that shape: their total split evenly, the odd one at the end for
-- SAME_UPPER, at the start otherwise.
op("ConvTranspose", 1, function(node, x, at)
  local n = x[2].ndim - 2
  local y = x[1]:conv_transpose2d(x[2], nil, at.group or 1, at.strides or 1, at.dilations or 1, 0, 0)
  local mode = at.auto_pad or "NOTSET"
  local out_pad = at.output_padding or {}
  local lo, hi = {}, {}
  for i = 1, n do
    local full = y.shape[i + 2] + (out_pad[i] or 0)
    local want = at.output_shape and at.output_shape[#at.output_shape - n + i]
    if not want and (mode == "SAME_UPPER" or mode == "SAME_LOWER") then
      want = x[1].shape[i + 2] * (at.strides and at.strides[i] or 1)
    end
    if want then
      local total = full - want
      local half = total // 2
      if mode == "SAME_UPPER" then lo[i] = half else lo[i] = total - half end
    elseif mode == "NOTSET" or mode == "VALID" then
      lo[i] = mode == "NOTSET" and at.pads and at.pads[i] or 0
      want = full - lo[i] - (mode == "NOTSET" and at.pads and at.pads[i + n] or 0)
    else
      error(("onnx: ConvTranspose auto_pad %s is not supported"):format(mode), 0)
    end
    hi[i] = lo[i] + want
  end
  -- zeros around y where the range runs outside it, then the range cut out
  local p, cut = { { 0, 0 }, { 0, 0 } }, { { 0, y.shape[1] }, { 0, y.shape[2] } }
  for i = 1, n do
    local before, after = math.max(-lo[i], 0), math.max(hi[i] - y.shape[i + 2], 0)
    p[i + 2] = { before, after }
    cut[i + 2] = { lo[i] + before, hi[i] + before }
  end
  y = y:pad(p):shrink(cut)
  if x[3] then
    local shape = { 1, -1 }
    for i = 1, n do shape[i + 2] = 1 end
    y = y + x[3]:reshape(shape)
  end
  return y
end)
op("IsInf", 10, function(_, x, at) return x[1]:isinf(at.detect_positive ~= 0, at.detect_negative ~= 0) end)
op("IsNaN", 9, function(_, x) return x[1]:isnan() end)
op("EyeLike", 9, function(_, x, at)
  local n, m = x[1].shape[1], x[1].shape[2]
  local k = at.k or 0
  local r = Tensor.arange(n, { dtype = "int64" }):reshape(n, 1) + k
  local c = Tensor.arange(m, { dtype = "int64" }):reshape(1, m)
  local dt = at.dtype and dtype_of(at.dtype, "EyeLike") or x[1].dtype
  return r:eq(c):cast(dt)
end)
op("TopK", 10, function(_, x, at)
  local k = x[2]:reshape(-1):tolist()[1]
  local axis = axis_of(at.axis or -1, x[1].ndim)
  local v, i = x[1]:topk(k, axis, at.largest ~= 0)
  return v, i:cast("int64")
end)
op("Compress", 9, function(_, x, at)
  local cond = x[2]:cast("bool"):tolist()
  local keep = {}
  for i, c in ipairs(cond) do if c then keep[#keep + 1] = i - 1 end end
  local d = at.axis and x[1] or x[1]:reshape(-1)
  local axis = at.axis and axis_of(at.axis, d.ndim) or 0
  local n = d.shape[axis + 1]
  local k = #keep
  if k == 0 then
    local shape = {}
    for i, s in ipairs(d.shape) do shape[i] = i == axis + 1 and 0 or s end
    return Tensor.zeros(shape, { dtype = d.dtype })
  end
  return ops.Gather.fn(nil, { d, Tensor(keep, "int64") }, { axis = axis })
end)

-- Resize, modes nearest, linear and cubic, as ONNX's reference: per resized axis, each output
-- index o has a source position p (the coordinate transformation), computed here in Lua; nearest
-- takes one row, linear the 2 and cubic the 4 rows around p (a p on a row weighs that row alone),
-- clamped to the edge, and the gathered rows are blended with their weights.
-- The source position of output index o; out_w is scale * n_in (not rounded) and lo, hi the
-- axis's roi (tf_crop_and_resize). The second result is true where p lies outside the input.
local function source_pos(o, scale, n_in, n_out, out_w, mode, lo, hi)
  if mode == "asymmetric" then return o / scale end
  if mode == "align_corners" then return out_w == 1 and 0 or o * (n_in - 1) / (out_w - 1) end
  if mode == "pytorch_half_pixel" then return n_out > 1 and (o + 0.5) / scale - 0.5 or 0 end
  if mode == "tf_half_pixel_for_nn" then return (o + 0.5) / scale end
  if mode == "half_pixel_symmetric" then
    return n_in / 2 * (1 - n_out / out_w) + (o + 0.5) / scale - 0.5
  end
  if mode == "tf_crop_and_resize" then
    local p = n_out > 1 and lo * (n_in - 1) + o * (hi - lo) * (n_in - 1) / (n_out - 1)
        or 0.5 * (lo + hi) * (n_in - 1)
    return p, p < 0 or p > n_in - 1
  end
  if mode == "half_pixel" then return (o + 0.5) / scale - 0.5 end
  error("onnx: Resize coordinate_transformation_mode " .. mode .. " is not supported", 0)
end
local function nearest(p, how)
  if how == "floor" then return math.floor(p) end
  if how == "ceil" then return math.ceil(p) end
  local f = math.floor(p)
  if p - f == 0.5 then return how == "round_prefer_ceil" and f + 1 or f end
  return math.floor(p + 0.5)
end
-- the first neighbour and the weights of the rows around p: 2 for linear, 4 for cubic (Keys'
-- kernel with coefficient a); r = 1 at a whole p, so that the row p weighs 1 and the others 0
local function taps(p, mode, a)
  local f = math.floor(p)
  local r = p == f and 1 or p - f
  if mode == "linear" then return (p == f and f - 1 or f), { 1 - r, r } end
  local function near(t) return ((a + 2) * t - (a + 3)) * t * t + 1 end -- |t| <= 1
  local function far(t) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a end -- 1 < |t| < 2
  return (p == f and f - 2 or f - 1), { far(r + 1), near(r), near(1 - r), far(2 - r) }
end
-- The rows idx (0-based) of x along axis a as a view, when they follow a pattern a view can
-- express: each row repeated k times in order (an integer upsampling), or a run of consecutive
-- rows. nil otherwise (the caller gathers).
local function rows_of(x, a, idx)
  local n_in, n_out = x.shape[a + 1], #idx
  local k = n_out // n_in
  local repeated, run = k >= 1 and n_out == n_in * k, true
  for o = 1, n_out do
    repeated = repeated and idx[o] == (o - 1) // k
    run = run and idx[o] == idx[1] + o - 1
  end
  if run then
    local cut = {}
    for d = 1, x.ndim do cut[d] = d == a + 1 and { idx[1], idx[1] + n_out } or { 0, x.shape[d] } end
    return x:shrink(cut)
  end
  if not repeated then return nil end
  local split, grown, out = {}, {}, {}
  for d = 1, x.ndim do
    split[#split + 1], grown[#grown + 1], out[d] = x.shape[d], x.shape[d], x.shape[d]
    if d == a + 1 then split[#split + 1], grown[#grown + 1], out[d] = 1, k, n_out end
  end
  -- written out: readers index it plainly, not through the div and mod of a merged expand
  return x:reshape(split):expand(grown):reshape(out):contiguous()
end

op("Resize", 10, function(_, x, at, opset)
  local mode = at.mode or "nearest"
  if mode ~= "nearest" and mode ~= "linear" and mode ~= "cubic" then error("onnx: Resize mode " .. mode .. " is not supported", 0) end
  if at.antialias == 1 then error("onnx: Resize antialias 1 is not supported", 0) end
  local ct = at.coordinate_transformation_mode or "half_pixel"
  local d = x[1]
  local roi = opset >= 11 and x[2] and x[2]:numel() > 0 and x[2]:cast("float64"):reshape(-1):tolist() or nil
  local scales = opset >= 11 and x[3] and x[3]:numel() > 0 and x[3]:cast("float64"):reshape(-1):tolist()
      or (opset < 11 and x[2]:cast("float64"):reshape(-1):tolist()) or nil
  local sizes = opset >= 11 and x[4] and x[4]:numel() > 0 and ints(x[4]) or nil
  local axes = at.axes and axes_list(at.axes, d.ndim)
  if not axes then
    axes = {}
    for a = 0, d.ndim - 1 do axes[a + 1] = a end
  end
  -- keep_aspect_ratio_policy: sizes give one scale for all the axes, the smallest or largest
  local policy, common = at.keep_aspect_ratio_policy or "stretch", nil
  if sizes and policy ~= "stretch" then
    for j, a in ipairs(axes) do
      local s = sizes[j] / d.shape[a + 1]
      if common == nil or (policy == "not_larger" and s < common) or (policy == "not_smaller" and s > common) then common = s end
    end
  end
  local a_coef, extrapolation = at.cubic_coeff_a or -0.75, at.extrapolation_value or 0
  for j, a in ipairs(axes) do
    local n_in = d.shape[a + 1]
    local n_out, scale
    if common then n_out, scale = math.floor(common * n_in + 0.5), common
    elseif sizes then n_out, scale = sizes[j], sizes[j] / n_in
    else n_out, scale = math.floor(n_in * scales[j] + 1e-9), scales[j] end
    local out_w = scale * n_in
    local lo, hi = 0, 1
    if roi then lo, hi = roi[j], roi[j + #axes] end
    if n_out ~= n_in or scale ~= 1 or lo ~= 0 or hi ~= 1 then
      local pos, outside, any_outside = {}, {}, false
      for o = 0, n_out - 1 do
        pos[o + 1], outside[o + 1] = source_pos(o, scale, n_in, n_out, out_w, ct, lo, hi)
        any_outside = any_outside or outside[o + 1] == true
      end
      local shape = {}
      for k = 1, d.ndim do shape[k] = k == a + 1 and n_out or 1 end
      local function gather(src, idx) -- the rows idx (a list) of src along the axis
        return rows_of(src, a, idx) or ops.Gather.fn(nil, { src, Tensor(idx, "int64") }, { axis = a })
      end
      local r
      if mode == "nearest" then
        local idx = {}
        for o, p in ipairs(pos) do
          idx[o] = math.max(0, math.min(n_in - 1, nearest(p, at.nearest_mode or "round_prefer_floor")))
        end
        r = gather(d, idx)
      else
        local idx, w = {}, {} -- idx[k][o], w[k][o]: the k-th row of output o and its weight
        for o, p in ipairs(pos) do
          local first, cs = taps(p, mode, a_coef)
          local sum = 0
          for k, c in ipairs(cs) do
            local i = first + k - 1
            if at.exclude_outside == 1 and (i < 0 or i >= n_in) then c = 0 end
            idx[k] = idx[k] or {}
            w[k] = w[k] or {}
            idx[k][o], w[k][o] = math.max(0, math.min(n_in - 1, i)), c
            sum = sum + c
          end
          if at.exclude_outside == 1 and sum ~= 0 then
            for k = 1, #cs do w[k][o] = w[k][o] / sum end
          end
        end
        local src = d
        if not d.dtype:find("float") then src = d:cast("float32") end
        for k = 1, #idx do
          local wt = Tensor(w[k], "float32"):reshape(shape):cast(src.dtype)
          local term = gather(src, idx[k]) * wt
          r = r and r + term or term
        end
        r = r:cast(d.dtype)
      end
      if any_outside then
        r = Tensor(outside, "bool"):reshape(shape):where(extrapolation, r):cast(d.dtype)
      end
      d = r
    end
  end
  return d
end)

-- pooling: explicit pads (begin..., end...) around the spatial dims, then the pool. MaxPool's
-- second output, Indices, is each max's flat position in the unpadded input (N, C, spatial...),
-- row-major, or with the spatial dims in column-major order for storage_order 1.
local function pool(method, pad_value)
  return function(node, x, at)
    local k = at.kernel_shape
    local n = #k
    local d = x[1]
    local spatial = spatial_of(d, n)
    local pads = conv_pads(node, at, spatial, k, at.strides, at.dilations)
    local p, padded = {}, false
    for i = 1, d.ndim - n do p[i] = { 0, 0 } end
    for i = 1, n do
      p[#p + 1] = { pads[i], pads[i + n] }
      padded = padded or pads[i] ~= 0 or pads[i + n] ~= 0
    end
    if padded then d = d:pad(p, nil, pad_value) end
    local strides, dil, ceil = at.strides or 1, at.dilations or 1, at.ceil_mode == 1
    if method == "max" then
      if #node.outputs < 2 or node.outputs[2] == "" then return d:max_pool2d(k, strides, dil, 0, ceil) end
      local y, i = d:max_pool2d(k, strides, dil, 0, ceil, true)
      -- i is row-major in the padded spatial dims: split it into coordinates, unpadded
      local coords, rest = {}, i:cast("int64")
      for j = n, 1, -1 do
        local size = d.shape[d.ndim - n + j]
        coords[j] = rest % size - pads[j]
        rest = rest // size
      end
      local flat, order = nil, {}
      for j = 1, n do order[j] = at.storage_order == 1 and n + 1 - j or j end
      for _, j in ipairs(order) do flat = flat and flat * spatial[j] + coords[j] or coords[j] end
      -- plus the offset of each (batch, channel) plane
      local count = 1
      for _, s in ipairs(spatial) do count = count * s end
      local shape = { table.unpack(x[1].shape, 1, x[1].ndim - n) }
      for _ = 1, n do shape[#shape + 1] = 1 end
      local base = Tensor.arange(x[1]:numel() // count, { dtype = "int64" }):reshape(shape) * count
      return y, flat + base
    end
    if padded and at.count_include_pad ~= 1 then
      -- the mean over the real elements only: pool the ones that mark them
      local count = x[1]:ones_like():pad(p):avg_pool2d(k, strides, dil, 0, ceil)
      return d:avg_pool2d(k, strides, dil, 0, ceil) / count
    end
    return d:avg_pool2d(k, strides, dil, 0, ceil)
  end
end
op("MaxPool", 1, pool("max", -math.huge))
op("AveragePool", 1, pool("avg", 0))
op("GlobalAveragePool", 1, function(_, x)
  local axes = {}
  for a = 2, x[1].ndim - 1 do axes[#axes + 1] = a end
  return x[1]:mean(axes, true)
end)
op("GlobalMaxPool", 1, function(_, x)
  local axes = {}
  for a = 2, x[1].ndim - 1 do axes[#axes + 1] = a end
  return x[1]:max(axes, true)
end)
-- BatchNormalization: with the running mean and variance; in training mode (training_mode 1
-- from opset 14, before it whenever the running statistics are asked for) with the batch's own
-- (the variance biased), and the running ones updated by momentum as the second and third outputs
op("BatchNormalization", 1, function(node, x, at, opset)
  local shape = { 1, x[1].shape[2] }
  for _ = 3, x[1].ndim do shape[#shape + 1] = 1 end
  local scale, bias, mean, var = x[2]:reshape(shape), x[3]:reshape(shape), x[4]:reshape(shape), x[5]:reshape(shape)
  local training = opset >= 14 and at.training_mode == 1
      or opset < 14 and at.is_test ~= 1 and #node.outputs > 1 and node.outputs[2] ~= ""
  if not training then return (x[1] - mean) * (var + (at.epsilon or 1e-5)):rsqrt() * scale + bias end
  local axes = { 0 }
  for a = 2, x[1].ndim - 1 do axes[#axes + 1] = a end
  local bmean = x[1]:mean(axes, true)
  local bvar = ((x[1] - bmean) * (x[1] - bmean)):mean(axes, true)
  local y = (x[1] - bmean) * (bvar + (at.epsilon or 1e-5)):rsqrt() * scale + bias
  local mom = at.momentum or 0.9
  local run_mean = x[4] * mom + bmean:reshape(-1) * (1 - mom)
  local run_var = x[5] * mom + bvar:reshape(-1) * (1 - mom)
  return y, run_mean:cast(x[4].dtype), run_var:cast(x[5].dtype), bmean:reshape(-1), bvar:reshape(-1)
end)
end
