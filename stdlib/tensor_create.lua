-- tensor_create: the creation and random functions with tinygrad's parameters
-- (Tensor.zeros(2, 3, {dtype="int32"}), Tensor.full_like(x, 7), Tensor.randint(4, {high=9}), ...).
local args = require "args"
local T, C = Tensor, args.raw
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it

local function is_dtype(s)
  return type(s) == "string" and pcall(dtypes.itemsize, s)
end

-- nil, or the name of a device that exists and runs here (any case), as the engine names it; an
-- index picks another instance of it ("CPU:1"; "CPU:0" is "CPU").
local function check_device(name, device)
  if device == nil then return end
  if type(device) ~= "string" then error(("%s: device must be a string, got %s"):format(name, type(device)), 0) end
  local base, index = device:match("^(.-):(%d+)$")
  base = base or device
  -- Device.why asks this device alone; Device.names() would start every driver
  local d = base:upper()
  local known, why = pcall(Device.why, d)
  if not known then
    if not tostring(why):find("unknown device", 1, true) then error(why, 0) end
    error(("%s: unknown device '%s' (known: %s; an index picks another instance: CPU:1)"):format(name, device,
      table.concat(Device.names(), ", ")), 0)
  end
  if why then error(("%s: device %s cannot run here: %s"):format(name, d, why), 0) end
  return (index and tonumber(index) > 0) and (d .. ":" .. tonumber(index)) or d
end
T._check_device = check_device

-- Runs a creation function with `device` as the default device, and realizes what it makes
-- there (a lazy constant has no device until it is realized). The default comes back even when
-- fn fails.
local function on_device(name, device, fn, ...)
  local d = check_device(name, device)
  if d == nil or d == Device.DEFAULT then return fn(...) end
  local prev = Device.DEFAULT
  Device.DEFAULT = d
  local ok, r = pcall(fn, ...)
  if ok then ok, r = pcall(function() return r:realize() end) end
  Device.DEFAULT = prev
  if not ok then error(r, 0) end
  return r
end
T._on_device = on_device

-- def for a creation function whose parameter "device" picks where it makes the tensor
local function def_on(name, params, fn)
  local at
  for i, p in ipairs(params) do if p == "device" then at = i end end
  return def(name, params, function(...)
    local device = select(at, ...)
    return on_device(name, device, fn, ...)
  end)
end

local function finish(t, requires_grad)
  if requires_grad ~= nil then t:requires_grad_(requires_grad) end
  return t
end

-- zeros(2, 3) and zeros({2, 3}) give the same shape list. A dtype name after the dims is the
-- dtype (zeros(2, 3, "int32")): dims are integers, so it cannot be mistaken.
local function shape_of(name, rest, dtype)
  if rest.n > 0 and type(rest[rest.n]) == "string" and dtype == nil then
    dtype = rest[rest.n]
    rest = { n = rest.n - 1, table.unpack(rest, 1, rest.n - 1) }
  end
  local s = rest
  if rest.n == 1 and type(rest[1]) == "table" then s = rest[1] end
  local out = {}
  for i = 1, (s.n or #s) do
    local d = s[i]
    if math.type(d) ~= "integer" then
      error(("%s: dimension %d must be an integer, got %s"):format(name, i, tostring(d)), 0)
    end
    out[i] = d
  end
  return out, dtype
end

-- Tensor(data [, device] [, {dtype=, device=, requires_grad=}]). A dtype name in the device slot
-- is taken as the dtype (Tensor({1, 2}, "float64")): no device is named like a dtype.
local raw_call = getmetatable(T).__call
getmetatable(T).__call = args.wrap("Tensor", { "cls", "data", "device", "dtype", "requires_grad" },
  function(_, data, device, dtype, requires_grad)
    if dtype == nil and is_dtype(device) then device, dtype = nil, device end
    return on_device("Tensor", device, function()
      return finish(dtype and raw_call(T, data, dtype) or raw_call(T, data), requires_grad)
    end)
  end)

doc("zeros", "a tensor of zeros (float32 unless dtype is given): Tensor.zeros(2, 3, {dtype='int32'})")
doc("ones", "a tensor of ones")
doc("empty", "an allocated tensor whose values are undefined")
for _, name in ipairs({ "zeros", "ones", "empty" }) do
  local f = C[name]
  def_on(name, { "...", "dtype", "device", "requires_grad" }, function(rest, dtype, device, requires_grad)
    local shape
    shape, dtype = shape_of(name, rest, dtype)
    return finish(dtype and f(shape, dtype) or f(shape), requires_grad)
  end)
end

doc("full", "a tensor filled with fill_value (a broadcast constant: no memory)")
def_on("full", { "shape", "fill_value", "dtype", "device", "requires_grad" }, function(shape, v, dtype, device, rg)
  if type(shape) ~= "table" then shape = { shape } end
  return finish(dtype and C.full(shape, v, dtype) or C.full(shape, v), rg)
end)

doc("arange", "start, start+step, ... below stop (arange(stop) counts from 0)")
def_on("arange", { "start", "stop", "step", "dtype", "device", "requires_grad" }, function(start, stop, step, dtype, device, rg)
  local a = { start }
  if stop ~= nil then a[2] = stop end
  if step ~= nil then a[2] = stop or error("arange: step given without stop", 0); a[3] = step end
  if dtype then a[#a + 1] = dtype end
  return finish(C.arange(table.unpack(a)), rg)
end)

doc("linspace", "steps values from start to stop, both included")
def_on("linspace", { "start", "stop", "steps", "dtype", "device", "requires_grad" }, function(start, stop, steps, dtype, device, rg)
  if math.type(steps) ~= "integer" or steps < 0 then
    error(("linspace: steps must be a non-negative integer, got %s"):format(tostring(steps)), 0)
  end
  dtype = dtype or "float32"
  if dtype == "bool" then error("linspace: bool dtype is not supported", 0) end
  local r
  if steps == 1 then
    r = T.full({ 1 }, start, dtype)
  else
    r = (T.arange(steps):cast("float64") * ((stop - start) / (steps - 1)) + start):cast(dtype)
  end
  return finish(r, rg)
end)

doc("eye", "the n x m identity matrix (m defaults to n)")
def_on("eye", { "n", "m", "dtype", "device", "requires_grad" }, function(n, m, dtype, device, rg)
  if math.type(n) ~= "integer" or n < 0 or (m ~= nil and (math.type(m) ~= "integer" or m < 0)) then
    error(("eye: n and m must be non-negative integers, got %s, %s"):format(tostring(n), tostring(m)), 0)
  end
  local x = dtype and C.eye(n, dtype) or C.eye(n)
  if m and m > n then x = x:pad({ { 0, 0 }, { 0, m - n } }) elseif m and m < n then x = x:shrink({ { 0, n }, { 0, m } }) end
  return finish(x, rg)
end)

-- ---------------------------------------------------------------- files

doc("read_image", "an image file (PNG, JPEG, BMP, GIF, ...) as uint8 (height, width, channels), as numpy reads it; channels 1 to 4 converts (1: gray, 3: RGB)")
def("read_image", { "path", "channels" }, function(path, channels)
  if type(path) ~= "string" then error("read_image: path must be a string", 0) end
  local bytes, h, w, c = require("mgimage").read(path, channels)
  return T.frombytes(bytes, { h, w, c }, "uint8")
end)

-- ---------------------------------------------------------------- *_like

local like_params = { "self", "dtype", "device", "requires_grad" }
doc("full_like", "a tensor shaped like x, filled with fill_value")
def("full_like", { "self", "fill_value", "dtype", "device", "requires_grad" }, function(self, v, dtype, device, rg)
  return T.full(self.shape, v, dtype or self.dtype, device, rg)
end)
doc("zeros_like", "zeros shaped like x")
def("zeros_like", like_params, function(self, dtype, device, rg) return T.full_like(self, 0, dtype, device, rg) end)
doc("ones_like", "ones shaped like x")
def("ones_like", like_params, function(self, dtype, device, rg) return T.full_like(self, 1, dtype, device, rg) end)
doc("rand_like", "uniform [0, 1) values shaped like x")
def("rand_like", like_params, function(self, dtype, device, rg)
  local d = dtype or self.dtype
  return T.rand(self.shape, { dtype = dtypes.is_float(d) and d or "float32", device = device, requires_grad = rg })
end)
doc("randn_like", "standard normal values shaped like x")
def("randn_like", like_params, function(self, dtype, device, rg)
  local d = dtype or self.dtype
  return T.randn(self.shape, { dtype = dtypes.is_float(d) and d or "float32", device = device, requires_grad = rg })
end)

-- ---------------------------------------------------------------- random

doc("manual_seed", "reseed the random functions")
def("manual_seed", { "seed" }, function(seed)
  if math.type(seed) ~= "integer" then error(("manual_seed: seed must be an integer, got %s"):format(tostring(seed)), 0) end
  return C.manual_seed(seed)
end)

doc("get_rng_state", "the random generator's state: seed, counter (a checkpoint keeps them)")
doc("set_rng_state", "set the random generator's state (seed, counter) that get_rng_state returned")

doc("rand", "uniform random values in [0, 1) (seeded by manual_seed)")
doc("randn", "standard normal random values")
for _, name in ipairs({ "rand", "randn" }) do
  local f = C[name]
  def_on(name, { "...", "dtype", "device", "requires_grad", "contiguous" }, function(rest, dtype, device, rg)
    local shape
    shape, dtype = shape_of(name, rest, dtype)
    if dtype and not dtypes.is_float(dtype) then
      error(("%s: dtype must be a float type, got %s"):format(name, tostring(dtype)), 0)
    end
    return finish(dtype and f(shape, dtype) or f(shape), rg)
  end)
end

doc("uniform", "uniform random values in [low, high)")
def("uniform", { "...", "low", "high", "dtype", "device", "requires_grad" }, function(rest, low, high, dtype, device, rg)
  low, high = low or 0.0, high or 1.0
  local r = ((high - low) * T.rand(shape_of("uniform", rest), { device = device })):cast(dtype or "float32") + low
  return finish(r, rg)
end)

doc("randint", "random integers in [low, high) (default [0, 10))")
def("randint", { "...", "low", "high", "dtype", "device", "requires_grad" }, function(rest, low, high, dtype, device, rg)
  low, high, dtype = low or 0, high or 10, dtype or "int32"
  if math.type(low) ~= "integer" or math.type(high) ~= "integer" then
    error("randint: low and high must be integers", 0)
  end
  if not dtypes.is_int(dtype) then error(("randint: dtype must be an int type, got %s"):format(dtype), 0) end
  local r = ((high - low) * T.rand(shape_of("randint", rest), { device = device })):cast(dtype) + low
  return finish(r, rg)
end)

doc("normal", "normal random values with mean and std")
def("normal", { "...", "mean", "std", "dtype", "device", "requires_grad" }, function(rest, mean, std, dtype, device, rg)
  local r = (std or 1.0) * T.randn(shape_of("normal", rest), { dtype = dtype, device = device }) + (mean or 0.0)
  return finish(r, rg)
end)

local function fan_shape(name, rest)
  local s = shape_of(name, rest)
  local p = 1
  for i = 2, #s do p = p * s[i] end
  return s, p
end
doc("scaled_uniform", "uniform in [-1, 1) scaled by numel^-0.5")
def("scaled_uniform", { "...", "dtype", "device", "requires_grad" }, function(rest, dtype, device, rg)
  local s, p = fan_shape("scaled_uniform", rest)
  local n = (s[1] or 1) * p
  return finish(T.uniform(s, { low = -1.0, high = 1.0, dtype = dtype, device = device }) * (n ^ -0.5), rg)
end)
doc("glorot_uniform", "Glorot/Xavier uniform initialization")
def("glorot_uniform", { "...", "dtype", "device", "requires_grad" }, function(rest, dtype, device, rg)
  local s, p = fan_shape("glorot_uniform", rest)
  return finish(T.uniform(s, { low = -1.0, high = 1.0, dtype = dtype, device = device }) * math.sqrt(6 / ((s[1] or 1) + p)), rg)
end)
doc("kaiming_uniform", "Kaiming/He uniform initialization (leaky-relu slope a)")
def("kaiming_uniform", { "...", "a", "dtype", "device", "requires_grad" }, function(rest, a, dtype, device, rg)
  local s, p = fan_shape("kaiming_uniform", rest)
  a = a or 0.01
  local bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a * a)) / math.sqrt(p)
  return finish(T.uniform(s, { low = -bound, high = bound, dtype = dtype, device = device }), rg)
end)
doc("kaiming_normal", "Kaiming/He normal initialization")
def("kaiming_normal", { "...", "a", "dtype", "device", "requires_grad" }, function(rest, a, dtype, device, rg)
  local s, p = fan_shape("kaiming_normal", rest)
  a = a or 0.01
  local std = math.sqrt(2.0 / (1 + a * a)) / math.sqrt(p)
  return finish(T.normal(s, { mean = 0.0, std = std, dtype = dtype, device = device }), rg)
end)

doc("randperm", "a random permutation of 0..n-1")
def("randperm", { "n", "device", "dtype", "requires_grad" }, function(n, device, dtype, rg)
  if math.type(n) ~= "integer" or n < 0 then error(("randperm: n must be a non-negative integer, got %s"):format(tostring(n)), 0) end
  local _, idx = T.rand(n, { device = device }):sort()
  return finish(idx:cast(dtype or "int32"), rg)
end)

doc("multinomial", "draw indices with probability proportional to the weights")
def("multinomial", { "self", "num_samples", "replacement" }, function(self, num_samples, replacement)
  num_samples = num_samples or 1
  if self.ndim < 1 or self.ndim > 2 then error("multinomial: needs a 1-d or 2-d tensor of weights", 0) end
  if math.type(num_samples) ~= "integer" or num_samples < 1 then error("multinomial: num_samples must be a positive integer", 0) end
  if not replacement and num_samples ~= 1 then error("multinomial: without replacement only num_samples=1 is supported", 0) end
  local w = self.ndim == 1 and self:unsqueeze(0) or self
  local cw = w:cumsum(1):float()
  local cdf = cw / cw[{ {}, -1 }]:unsqueeze(1)
  local u = T.rand(num_samples, cdf.shape[1], 1)
  local idx = u:expand(-1, -1, cdf.shape[2]):ge(cdf):sum(2):permute(1, 0)
  return (self.ndim == 1 and idx:squeeze(0) or idx):cast("int32")
end)

return T
