-- ONNX op handlers: elementwise math and activations beyond the basic ones, normalizations
-- (MeanVarianceNormalization, LRN), Det, and the data-dependent NonZero and Unique.
-- Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local ints, axis_of, axes_list, dtype_of, ops = U.ints, U.axis_of, U.axes_list, U.dtype_of, U.ops

for name, m in pairs({ Asin = "asin", Acos = "acos", Atan = "atan", Sinh = "sinh", Cosh = "cosh",
  Asinh = "asinh", Acosh = "acosh", Atanh = "atanh", HardSwish = "hardswish" }) do
  op(name, 1, function(_, x) return x[1][m](x[1]) end)
end
op("Celu", 12, function(_, x, at) return x[1]:celu(at.alpha or 1.0) end)
end
