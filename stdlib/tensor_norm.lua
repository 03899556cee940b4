-- tensor_norm: normalization (layernorm, batchnorm).
local args = require "args"
local T = Tensor
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it

doc("layernorm", "normalize to zero mean and unit variance over axis (a number or a list)")
def("layernorm", { "self", "axis", "eps" }, function(self, axis, eps)
  axis, eps = axis or -1, eps or 1e-5
  local y = self - self:mean(axis, true)
  return y * ((y * y):mean(axis, true) + eps):rsqrt()
end)

-- x:batchnorm(weight, bias, mean, invstd [, axis=1]): (x - mean) * invstd * weight + bias
doc("batchnorm", "(x - mean) * invstd * weight + bias along axis (default 1)")
def("batchnorm", { "self", "weight", "bias", "mean", "invstd", "axis" }, function(self, weight, bias, mean, invstd, axis)
  local ax = T._axes("batchnorm", self, axis or 1)
  local on = {}
  for _, a in ipairs(ax) do on[a] = true end
  local shape = {}
  for i = 0, self.ndim - 1 do shape[i + 1] = on[i] and self.shape[i + 1] or 1 end
  local x = self - mean:reshape(shape)
  if weight then x = x * weight:reshape(shape) end
  local r = x * (invstd.ndim == #ax and invstd:reshape(shape) or invstd)
  if bias then r = r + bias:reshape(shape) end
  return r
end)

return T
