-- ONNX op handlers: linear quantization. A quantized tensor q stands for (q - zero_point) * scale;
-- quantizing rounds x / scale half to even, adds the zero point and saturates to the integer
-- type's range. The integer ops (ConvInteger, MatMulInteger) work in int32 on q - zero_point; the
-- QLinear ops requantize that product with scale_a * scale_b / scale_y.
-- Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local axis_of, dtype_of, ops = U.axis_of, U.dtype_of, U.ops

local RANGE = { uint8 = { 0, 255 }, int8 = { -128, 127 }, uint16 = { 0, 65535 }, int16 = { -32768, 32767 } }

-- a scale or zero point: a scalar, or a 1-d tensor along `axis` of an nd-dim tensor
local function along(t, axis, nd)
  if t.ndim == 0 or t:numel() == 1 then return t:reshape({}) end
  local shape = {}
  for i = 1, nd do shape[i] = 1 end
  shape[axis + 1] = t:numel()
  return t:reshape(shape)
end

-- round(v) + zp, saturated to dtype's range (v a float tensor, zp an int tensor or nil)
local function saturate(what, v, zp, dtype)
  local range = RANGE[dtype] or error(("onnx: %s to %s is not supported (integer types only)"):format(what, dtype), 0)
  local q = v:round():cast("int32")
  if zp then q = q + zp:cast("int32") end
  return q:clamp(range[1], range[2]):cast(dtype)
end

-- Blocked quantization (opset 21's block_size) is not supported: per tensor or per axis only.
local function no_blocks(name, at)
  if (at.block_size or 0) ~= 0 then
    error(("onnx: %s block_size %d is not supported (per tensor or per axis only)"):format(name, at.block_size), 0)
  end
end

op("QuantizeLinear", 10, function(_, x, at)
  no_blocks("QuantizeLinear", at)
  local nd = x[1].ndim
  local axis = axis_of(at.axis or 1, nd)
  local dtype = x[3] and x[3].dtype or (at.output_dtype and dtype_of(at.output_dtype, "QuantizeLinear")) or "uint8"
  local scale = along(x[2], axis, nd)
  local zp = x[3] and along(x[3], axis, nd)
  return saturate("QuantizeLinear", x[1]:cast(scale.dtype) / scale, zp, dtype)
end)

op("DequantizeLinear", 10, function(_, x, at)
  no_blocks("DequantizeLinear", at)
  local nd = x[1].ndim
  local axis = axis_of(at.axis or 1, nd)
  local scale = along(x[2], axis, nd)
  local q = x[1]:cast("int32")
  if x[3] then q = q - along(x[3], axis, nd):cast("int32") end
  return q:cast(scale.dtype) * scale
end)

-- DynamicQuantizeLinear: uint8 over the range of x widened to include 0
op("DynamicQuantizeLinear", 11, function(_, x)
  local lo, hi = x[1]:min():minimum(0), x[1]:max():maximum(0)
  local scale = hi:eq(lo):where(1, hi - lo) / 255
  local zp = (-lo / scale):clamp(0, 255):round():cast("uint8")
  return saturate("DynamicQuantizeLinear", x[1] / scale, zp, "uint8"), scale:cast(x[1].dtype), zp
end)

-- q - zero_point in int32; w's zero point may be one per output channel (dim 0)
local function centered(q, zp, axis)
  local r = q:cast("int32")
  if zp then r = r - along(zp, axis or 0, q.ndim):cast("int32") end
  return r
end

op("MatMulInteger", 10, function(_, x)
  local a, b = x[1]:cast("int32"), centered(x[2], x[4], x[2].ndim - 1) -- b's zero point per column
  if x[3] then -- a's zero point: a scalar or one per row
    local zp = x[3]:cast("int32")
    a = a - (zp:numel() == 1 and zp:reshape({}) or zp:reshape(-1, 1))
  end
  return a:matmul(b)
end)

op("ConvInteger", 10, function(node, x, at)
  return ops.Conv.fn(node, { centered(x[1], x[3]), centered(x[2], x[4], 0) }, at)
end)

-- the int32 product requantized: round(acc * (sa * sb / sy)) + zy, saturated to zy's type
local function requantize(what, acc, sa, sb, sy, zy, dtype)
  local factor = sa * sb / sy
  return saturate(what, acc:cast(factor.dtype) * factor, zy, zy and zy.dtype or dtype)
end

op("QLinearMatMul", 10, function(_, x)
  local a, b = centered(x[1], x[3], x[1].ndim - 2), centered(x[4], x[6], x[4].ndim - 1)
  return requantize("QLinearMatMul", a:matmul(b), along(x[2], x[1].ndim - 2, x[1].ndim),
    along(x[5], x[4].ndim - 1, x[4].ndim), x[7], x[8], x[1].dtype)
end)

-- QLinearConv: the bias (int32, in units of x_scale * w_scale) joins the accumulator
op("QLinearConv", 10, function(node, x, at)
  local acc = ops.Conv.fn(node, { centered(x[1], x[3]), centered(x[4], x[6], 0), x[9] and x[9]:cast("int32") }, at)
  return requantize("QLinearConv", acc, x[2], along(x[5], 1, acc.ndim), x[7], x[8], x[1].dtype)
end)
end
