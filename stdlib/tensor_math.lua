-- tensor_math: elementwise math composed from the primitives, as tinygrad's tensor.py composes
-- it, plus the operators Lua 5.4 adds (% & | ~ << >>) and the dtype shortcuts.
local args = require "args"
local T, C = Tensor, args.raw
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it

local is_tensor = args.is_tensor
local function is_float(t) return dtypes.is_float(t.dtype) end
local function check_tensor(name, v)
  if not is_tensor(v) then error(("%s: expected a Tensor, got %s"):format(name, type(v)), 0) end
end

-- ---------------------------------------------------------------- arithmetic with options

-- x:add(y [, reverse]): reverse=true computes y + x, as tinygrad's reverse flag
doc("add", "x + y, broadcasting (reverse=true gives y + x)")
doc("sub", "x - y, broadcasting")
doc("mul", "x * y, broadcasting")
doc("idiv", "floor division (x // y, rounds down as Lua and Python)")
doc("pow", "x ^ y elementwise")
for _, name in ipairs({ "add", "sub", "mul", "idiv", "pow" }) do
  local f = C[name]
  def(name, { "self", "x", "reverse" }, function(self, x, reverse)
    if reverse then return f(x, self) end
    return f(self, x)
  end)
end

-- x:div(y [, reverse, rounding_mode]): rounding_mode "trunc" or "floor" rounds the quotient
doc("div", "true division (ints become float32); rounding_mode 'trunc' or 'floor'")
def("div", { "self", "x", "reverse", "rounding_mode" }, function(self, x, reverse, mode)
  local a, b = self, x
  if reverse then a, b = x, self end
  if mode == nil then return C.div(a, b) end
  a, b = T._broadcasted(a, b)
  if mode == "floor" then return a:idiv(b) end
  if mode ~= "trunc" then error(("div: rounding_mode must be 'trunc', 'floor' or nil, got %s"):format(tostring(mode)), 0) end
  if is_float(a) then return C.div(a, b):trunc() end
  return T._alu("IDIV", a, b) -- C's division truncates
end)

doc("matmul", "matrix product (a reshape, a broadcast multiply and a sum)")
def("matmul", { "self", "x", "reverse", "dtype" }, function(self, x, reverse, dtype)
  local r = reverse and C.matmul(x, self) or C.matmul(self, x)
  return dtype and r:cast(dtype) or r
end)
doc("dot", "alias of matmul")
def("dot", { "self", "w", "dtype" }, function(self, w, dtype) return T.matmul(self, w, false, dtype) end)

-- x % y: the remainder with the divisor's sign (floor division), as Python and tinygrad
doc("mod", "x % y: the remainder with the divisor's sign")
def("mod", { "self", "x", "reverse" }, function(self, x, reverse)
  local a, b = T._broadcasted(self, x)
  if reverse then a, b = b, a end
  return a - a:idiv(b) * b
end)

local function bitwise(name, op)
  def(name, { "self", "x", "reverse" }, function(self, x, reverse)
    if reverse then return T._alu(op, x, self) end
    return T._alu(op, self, x)
  end)
end
doc("bitwise_and", "x & y for int or bool tensors")
bitwise("bitwise_and", "AND")
doc("bitwise_or", "x | y for int or bool tensors")
bitwise("bitwise_or", "OR")
doc("bitwise_xor", "x ~ y (Lua's binary ~) for int or bool tensors")
bitwise("bitwise_xor", "XOR")
doc("bitwise_not", "~x: flips every bit (logical not for bool)")
def("bitwise_not", { "self" }, function(self)
  if self.dtype == "bool" then return self:logical_not() end
  if not dtypes.is_int(self.dtype) then error("bitwise_not: needs an int or bool tensor, got " .. self.dtype, 0) end
  return T._alu("XOR", self, -1)
end)
-- Shifts take a non-negative integer amount. tinygrad allows them on unsigned dtypes only; here
-- every int dtype shifts (>> on a signed int is arithmetic, as in C and PyTorch).
local function shift(name, op)
  def(name, { "self", "x" }, function(self, x)
    if math.type(x) ~= "integer" or x < 0 then
      error(("%s: the shift must be a non-negative integer, got %s"):format(name, tostring(x)), 0)
    end
    if not dtypes.is_int(self.dtype) then error(("%s: needs an int tensor, got %s"):format(name, self.dtype), 0) end
    return T._alu(op, self, x)
  end)
end
doc("lshift", "x << n for int tensors")
shift("lshift", "SHL")
doc("rshift", "x >> n for int tensors (arithmetic for signed ints)")
shift("rshift", "SHR")

-- The operators. Lua calls a metamethod with the tensor on either side.
local mt = debug.getregistry()["Tensor"]
local function meta(fn)
  return function(a, b)
    if is_tensor(a) then return fn(a, b) end
    return fn(b, a, true)
  end
end
mt.__mod = meta(T.mod)
mt.__band = meta(T.bitwise_and)
mt.__bor = meta(T.bitwise_or)
mt.__bxor = meta(T.bitwise_xor)
mt.__bnot = function(a) return a:bitwise_not() end
mt.__shl = function(a, b)
  if not is_tensor(a) then error("Tensor <<: the tensor must be on the left (x << n)", 0) end
  return a:lshift(b)
end
mt.__shr = function(a, b)
  if not is_tensor(a) then error("Tensor >>: the tensor must be on the left (x >> n)", 0) end
  return a:rshift(b)
end

doc("maximum", "elementwise max of two tensors")
def("maximum", { "self", "x" }, C.maximum)
doc("minimum", "elementwise min of two tensors")
def("minimum", { "self", "x" }, C.minimum)
doc("where", "x where self (the condition) is true, else y")
def("where", { "self", "x", "y" }, C.where)
doc("masked_fill", "value where mask is true, else x")
def("masked_fill", { "self", "mask", "value" }, function(self, mask, value)
  check_tensor("masked_fill", mask)
  return mask:where(value, self)
end)
doc("copysign", "|x| with the sign of other")
def("copysign", { "self", "other" }, function(self, other)
  local _, o = T._broadcasted(self, other)
  return o:lt(0):where(-self:abs(), self:abs()) + o * 0
end)
doc("lerp", "x + (end - x) * weight")
def("lerp", { "self", "end", "weight" }, function(self, e, w) return self + (e - self) * w end)
doc("lt", "x < y elementwise, as bool")
doc("le", "x <= y elementwise, as bool")
doc("gt", "x > y elementwise, as bool")
doc("ge", "x >= y elementwise, as bool")
doc("eq", "x == y elementwise, as bool (Lua's == compares objects)")
doc("ne", "x ~= y elementwise, as bool")
for _, name in ipairs({ "lt", "le", "gt", "ge", "eq", "ne" }) do def(name, { "self", "x" }, C[name]) end

-- ---------------------------------------------------------------- rounding and classes

doc("trunc", "round toward zero")
def("trunc", { "self" }, function(self) return T._alu("TRUNC", self) end)
doc("ceil", "round up")
def("ceil", { "self" }, function(self)
  local b = self:trunc()
  return self:gt(b):where(b + 1, b)
end)
doc("floor", "round down")
def("floor", { "self" }, function(self)
  local b = self:trunc()
  return self:lt(b):where(b - 1, b)
end)
-- round half to even, as PyTorch, numpy and tinygrad
doc("round", "round to nearest, ties to even")
def("round", { "self" }, function(self)
  if not is_float(self) then return self end
  local r = (self + 0.5):floor()
  local tie, odd = (r - self):eq(0.5), (r % 2):ne(0)
  return (tie:bitwise_and(odd)):where(r - 1, r)
end)
doc("isinf", "true where x is +inf (detect_positive) or -inf (detect_negative)")
def("isinf", { "self", "detect_positive", "detect_negative" }, function(self, pos, neg)
  if pos == nil then pos = true end
  if neg == nil then neg = true end
  local r = T.zeros_like(self, { dtype = "bool" })
  if pos then r = r:bitwise_or(self:eq(math.huge)) end
  if neg then r = r:bitwise_or(self:eq(-math.huge)) end
  return r
end)
doc("isnan", "true where x is nan")
def("isnan", { "self" }, function(self) return self:ne(self) end)
doc("isfinite", "true where x is neither inf nor nan")
def("isfinite", { "self" }, function(self) return self:isinf():bitwise_or(self:isnan()):logical_not() end)
doc("sign", "-1, 0 or 1 (nan stays nan)")
def("sign", { "self" }, function(self)
  local one = T.full_like(self, 1)
  return self:ne(0):where(self:lt(0):where(T.full_like(self, -1), one), T.full_like(self, 0)) + self * 0
end)
doc("clamp", "clip values to [min_, max_] (either may be nil)")
def("clamp", { "self", "min_", "max_" }, function(self, lo, hi)
  if lo == nil and hi == nil then error("clamp: give min_ or max_ (or both)", 0) end
  local r = lo ~= nil and self:maximum(lo) or self
  return hi ~= nil and r:minimum(hi) or r
end)
doc("clip", "alias of clamp")
args.alias(T, "clip", "clamp")

-- ---------------------------------------------------------------- transcendental

local function polyN(x, coeffs)
  local r = x * 0 + coeffs[1]
  for i = 2, #coeffs do r = r * x + coeffs[i] end
  return r
end
doc("tan", "tangent (sin / cos)")
def("tan", { "self" }, function(self) return self:sin() / self:cos() end)
doc("asin", "arcsine (a polynomial, as tinygrad)")
def("asin", { "self" }, function(self)
  local c = { -0.0012624911, 0.0066700901, -0.0170881256, 0.0308918810, -0.0501743046, 0.0889789874, -0.2145988016,
    1.5707963050 }
  local a = self:abs()
  return self:sign() * (math.pi / 2 - (1.0 - a):sqrt() * polyN(a, c))
end)
doc("acos", "arccosine")
def("acos", { "self" }, function(self) return math.pi / 2 - self:asin() end)
doc("atan", "arctangent")
def("atan", { "self" }, function(self) return (self / (1 + self * self):sqrt()):asin() end)
doc("sinh", "hyperbolic sine")
def("sinh", { "self" }, function(self) return (self:exp() - (-self):exp()) / 2 end)
doc("cosh", "hyperbolic cosine")
def("cosh", { "self" }, function(self) return (self:exp() + (-self):exp()) / 2 end)
doc("atanh", "inverse hyperbolic tangent")
def("atanh", { "self" }, function(self) return ((1 + self) / (1 - self)):log() / 2 end)
doc("asinh", "inverse hyperbolic sine")
def("asinh", { "self" }, function(self) return (self + (self:square() + 1):sqrt()):log() end)
doc("acosh", "inverse hyperbolic cosine")
def("acosh", { "self" }, function(self) return (self + (self:square() - 1):sqrt()):log() end)
-- Abramowitz-Stegun 7.1.26 (max error 1.5e-7), odd-extended, as tinygrad
doc("erf", "the error function (Abramowitz-Stegun, error < 2e-7)")
def("erf", { "self" }, function(self)
  local t = 1.0 / (1.0 + 0.3275911 * self:abs())
  return self:sign() * (1.0 - t * polyN(t, { 1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592 }) *
    (-self:square()):exp())
end)

-- ---------------------------------------------------------------- activations

doc("hardsigmoid", "relu(alpha x + beta) - relu(alpha x + beta - 1)")
def("hardsigmoid", { "self", "alpha", "beta" }, function(self, alpha, beta)
  alpha, beta = alpha or 1 / 6, beta or 0.5
  return (alpha * self + beta):relu() - (alpha * self + beta - 1):relu()
end)
doc("elu", "x for x > 0, alpha * (e^x - 1) otherwise")
def("elu", { "self", "alpha" }, function(self, alpha)
  alpha = alpha or 1.0
  return self:relu() - (1 - self:exp()):relu() * alpha
end)
doc("celu", "max(x, 0) + min(alpha (e^(x/alpha) - 1), 0)")
def("celu", { "self", "alpha" }, function(self, alpha)
  alpha = alpha or 1.0
  return self:maximum(0) + (alpha * ((self / alpha):exp() - 1)):minimum(0)
end)
doc("selu", "gamma * (x for x >= 0, alpha (e^x - 1) otherwise)")
def("selu", { "self", "alpha", "gamma" }, function(self, alpha, gamma)
  alpha, gamma = alpha or 1.67326, gamma or 1.0507
  return gamma * self:ge(0):detach():where(self, alpha * (self:exp() - 1))
end)
doc("silu", "x * sigmoid(x)")
def("silu", { "self" }, function(self) return self * self:sigmoid() end)
doc("swish", "alias of silu")
def("swish", { "self" }, function(self) return self:silu() end)
doc("relu6", "min(max(x, 0), 6)")
def("relu6", { "self" }, function(self) return self:relu() - (self - 6):relu() end)
doc("hardswish", "x * relu6(x + 3) / 6")
def("hardswish", { "self" }, function(self) return self * (self + 3):relu6() * (1 / 6) end)
doc("hardtanh", "clip to [min_val, max_val]")
def("hardtanh", { "self", "min_val", "max_val" }, function(self, lo, hi) return self:clip(lo or -1, hi or 1) end)
-- x:gelu([approximate="tanh"]): "tanh" is tinygrad's form (and its default, which scripts and
-- tests rely on); "none" is the exact x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), PyTorch's default.
-- Both are written to keep their precision for large negative x, where 1 + tanh u and 1 + erf
-- would cancel: 0.5 (1 + tanh u) is sigmoid(2u), and Phi(x) is erfc(|x| / sqrt 2) / 2 for x < 0
-- (1 minus that otherwise), with erfc the same Abramowitz-Stegun form as erf above.
doc("gelu", "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with approximate='tanh' (the default, as tinygrad); " ..
  "the exact 0.5 x (1 + erf(x / sqrt 2)) with approximate='none' (PyTorch's default)")
def("gelu", { "self", "approximate" }, function(self, approximate)
  approximate = approximate == nil and "tanh" or approximate
  if approximate == "tanh" then
    return self * (2 * math.sqrt(2 / math.pi) * (self + 0.044715 * self * self * self)):sigmoid()
  end
  if approximate ~= "none" then
    error(("gelu: approximate must be 'none' or 'tanh', got %s"):format(
      type(approximate) == "string" and ("'" .. approximate .. "'") or tostring(approximate)), 0)
  end
  local z = self:abs() * (1 / math.sqrt(2))
  local t = 1.0 / (1.0 + 0.3275911 * z)
  local half_erfc = 0.5 * t * polyN(t, { 1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592 }) *
    (-z:square()):exp()
  return self * self:lt(0):detach():where(half_erfc, 1 - half_erfc)
end)
doc("quick_gelu", "x * sigmoid(1.702 x)")
def("quick_gelu", { "self" }, function(self) return self * (self * 1.702):sigmoid() end)
doc("leaky_relu", "x for x > 0, neg_slope * x otherwise")
def("leaky_relu", { "self", "neg_slope" }, function(self, slope)
  slope = slope or 0.01
  return self:relu() - (-slope * self):relu()
end)
-- log(1 + e^(beta x)) / beta, stable for large |x|: max(x, 0) + log(1 + e^-|beta x|) / beta
doc("softplus", "log(1 + e^(beta x)) / beta, computed stably")
def("softplus", { "self", "beta" }, function(self, beta)
  beta = beta or 1
  local bx = self * beta
  return bx:relu() / beta + ((-bx:abs()):exp() + 1):log() / beta
end)
doc("mish", "x * tanh(softplus(x))")
def("mish", { "self" }, function(self) return self * self:softplus():tanh() end)
doc("softsign", "x / (1 + |x|)")
def("softsign", { "self" }, function(self) return self / (1 + self:abs()) end)

-- ---------------------------------------------------------------- dtypes

doc("cast", 'convert to another dtype: x:cast("float16") or x:cast(dtypes.int32)')
def("cast", { "self", "dtype" }, C.cast)
doc("bitcast", "reinterpret the bits as another dtype of the same size")
def("bitcast", { "self", "dtype" }, C.bitcast)
doc("float", "cast to float32")
doc("half", "cast to float16")
doc("double", "cast to float64")
doc("int", "cast to int32")
doc("long", "cast to int64")
doc("bool", "cast to bool")
doc("bfloat16", "cast to bfloat16")
for name, dt in pairs({ float = "float32", half = "float16", int = "int32", bool = "bool", double = "float64",
  long = "int64", bfloat16 = "bfloat16" }) do
  def(name, { "self" }, function(self) return self:cast(dt) end)
end
doc("is_floating_point", "whether the dtype is a float type")
def("is_floating_point", { "self" }, function(self) return is_float(self) end)
doc("element_size", "bytes per element")
def("element_size", { "self" }, function(self) return dtypes.itemsize(self.dtype) end)
doc("nbytes", "bytes of all elements")
def("nbytes", { "self" }, function(self) return self:numel() * dtypes.itemsize(self.dtype) end)
doc("size", "the shape as a list, or the size of dim")
def("size", { "self", "dim" }, function(self, dim)
  if dim == nil then return self.shape end
  local n = self.ndim
  if math.type(dim) ~= "integer" or dim < -math.max(n, 1) or dim >= math.max(n, 1) then
    error(("size: dim %s is out of range for %d dims"):format(tostring(dim), n), 0)
  end
  if n == 0 then error("size: a 0-d tensor has no dims", 0) end
  return self.shape[(dim % n) + 1]
end)

return T
