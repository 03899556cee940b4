-- nn: layers as plain Lua tables of tensors. A layer is called like a function (layer(x));
-- its parameters are fields (layer.weight, layer.bias), so state.get_parameters finds them.
-- Initialization follows tinygrad (and PyTorch): uniform in +-1/sqrt(fan_in).
local args = require "args"
local nn = {}

-- A class: nn.Linear(3, 4) makes an instance; instance(x) runs its forward.
local function class(name)
  local c = { __name = name }
  c.__index = c
  c.__call = function(self, ...) return self:forward(...) end
  c.__tostring = function(self) return name .. (self.describe and self:describe() or "") end
  setmetatable(c, { __call = function(cls, ...)
    local o = setmetatable({}, cls)
    -- init is an args wrapper called from pcall (a C function), so its errors carry no position:
    -- give them the caller's line
    local ok, err = pcall(o.init, o, ...)
    if not ok then error(err, 2) end
    return o
  end })
  return c
end
nn.class = class

local function uniform(shape, bound)
  return ((Tensor.rand(shape) * 2 - 1) * bound):realize()
end
local function param(t) return t:realize():requires_grad_() end

local function pair(v) return type(v) == "table" and v or { v, v } end

-- ---------------------------------------------------------------- Linear, Conv2d

nn.Linear = class("Linear")
nn.Linear.init = args.options("nn.Linear", { "self", "in_features", "out_features" }, { "bias" },
function(self, cin, cout, o)
  local bias = o.bias
  local bound = 1 / math.sqrt(cin)
  self.weight = param(uniform({ cout, cin }, bound))
  if bias ~= false then self.bias = param(uniform({ cout }, bound)) end
end)
function nn.Linear:forward(x) return x:linear(self.weight.T, self.bias) end
function nn.Linear:describe() return ("(%d -> %d)"):format(self.weight.shape[2], self.weight.shape[1]) end

-- nn.Conv2d(cin, cout, kernel [, {stride=1, padding=0, dilation=1, groups=1, bias=true}])
nn.Conv2d = class("Conv2d")
nn.Conv2d.init = args.options("nn.Conv2d", { "self", "in_channels", "out_channels", "kernel_size" },
  { "stride", "padding", "dilation", "groups", "bias" },
function(self, cin, cout, kernel, o)
  local k = pair(kernel)
  self.stride, self.padding, self.dilation, self.groups = o.stride or 1, o.padding or 0, o.dilation or 1, o.groups or 1
  local fan_in = (cin // self.groups) * k[1] * k[2]
  local bound = 1 / math.sqrt(fan_in)
  self.weight = param(uniform({ cout, cin // self.groups, k[1], k[2] }, bound))
  if o.bias ~= false then self.bias = param(uniform({ cout }, bound)) end
end)
function nn.Conv2d:forward(x)
  return x:conv2d(self.weight, self.bias,
    { stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups })
end
function nn.Conv2d:describe()
  local w = self.weight.shape
  return ("(%d -> %d, %dx%d)"):format(w[2] * self.groups, w[1], w[3], w[4])
end

-- nn.ConvTranspose2d(cin, cout, kernel [, {stride, padding, output_padding, dilation, groups, bias}])
nn.ConvTranspose2d = class("ConvTranspose2d")
nn.ConvTranspose2d.init = args.options("nn.ConvTranspose2d", { "self", "in_channels", "out_channels", "kernel_size" },
  { "stride", "padding", "output_padding", "dilation", "groups", "bias" },
function(self, cin, cout, kernel, o)
  local k = pair(kernel)
  self.opts = { stride = o.stride or 1, padding = o.padding or 0, output_padding = o.output_padding or 0,
    dilation = o.dilation or 1, groups = o.groups or 1 }
  local bound = 1 / math.sqrt((cout // self.opts.groups) * k[1] * k[2])
  self.weight = param(uniform({ cin, cout // self.opts.groups, k[1], k[2] }, bound))
  if o.bias ~= false then self.bias = param(uniform({ cout }, bound)) end
end)
function nn.ConvTranspose2d:forward(x) return x:conv_transpose2d(self.weight, self.bias, self.opts) end

-- ---------------------------------------------------------------- normalization

-- nn.BatchNorm(channels [, {eps=1e-5, momentum=0.1, affine=true, track_running_stats=true}])
-- Training (Tensor.training): batch statistics, and the running ones move toward them.
-- Eval: the running statistics. Works on (N, C) and (N, C, H, W).
nn.BatchNorm = class("BatchNorm")
nn.BatchNorm2d = nn.BatchNorm
local pending = setmetatable({}, { __mode = "k" }) -- running stats assigned since the last step
nn.BatchNorm.init = args.options("nn.BatchNorm", { "self", "sz" }, { "eps", "affine", "track_running_stats", "momentum" },
function(self, c, o)
  self.eps, self.momentum = o.eps or 1e-5, o.momentum or 0.1
  if o.affine ~= false then
    self.weight = param(Tensor.ones(c))
    self.bias = param(Tensor.zeros(c))
  end
  if o.track_running_stats ~= false then
    self.running_mean = Tensor.zeros(c):realize()
    self.running_var = Tensor.ones(c):realize()
    self.num_batches_tracked = Tensor.zeros(1):realize()
  end
end)
function nn.BatchNorm:forward(x)
  local axes = { 0 }
  for d = 2, x.ndim - 1 do axes[#axes + 1] = d end
  local mean, invstd
  if Tensor.training or not self.running_mean then
    mean = x:mean(axes)
    local shape = { 1, -1 }
    for _ = 3, x.ndim do shape[#shape + 1] = 1 end
    local centered = x - mean:detach():reshape(shape)
    local var = (centered * centered):mean(axes)
    invstd = (var + self.eps):rsqrt()
    if self.running_mean and Tensor.training then
      local n = x:numel() / x.shape[2]
      local m = self.momentum
      self.running_mean:assign(self.running_mean * (1 - m) + mean:detach() * m)
      self.running_var:assign(self.running_var * (1 - m) + var:detach() * (m * n / math.max(n - 1, 1)))
      self.num_batches_tracked:assign(self.num_batches_tracked + 1)
      pending[self.running_mean], pending[self.running_var], pending[self.num_batches_tracked] = true, true, true
    end
  else
    mean, invstd = self.running_mean, (self.running_var + self.eps):rsqrt()
  end
  return x:batchnorm(self.weight, self.bias, mean, invstd)
end

-- The running statistics assigned since the last call: an optimizer step realizes them with
-- the parameters, so their graphs never grow across steps.
function nn.take_pending()
  local out = {}
  for t in pairs(pending) do out[#out + 1] = t end
  for _, t in ipairs(out) do pending[t] = nil end
  return out
end

-- nn.LayerNorm(shape [, {eps=1e-5, affine=true}]): over the last #shape dims
nn.LayerNorm = class("LayerNorm")
nn.LayerNorm.init = args.options("nn.LayerNorm", { "self", "normalized_shape" }, { "eps", "elementwise_affine" },
function(self, shape, o)
  o.affine = o.elementwise_affine
  self.shape = type(shape) == "table" and shape or { shape }
  self.eps = o.eps or 1e-5
  if o.affine ~= false then
    self.weight = param(Tensor.ones(self.shape))
    self.bias = param(Tensor.zeros(self.shape))
  end
end)
function nn.LayerNorm:forward(x)
  local axes = {}
  for i = 1, #self.shape do axes[i] = -i end
  local y = x - x:mean(axes, true)
  y = y * ((y * y):mean(axes, true) + self.eps):rsqrt()
  if self.weight then y = y * self.weight + self.bias end
  return y
end

-- nn.GroupNorm(groups, channels [, {eps=1e-5, affine=true}])
nn.GroupNorm = class("GroupNorm")
nn.GroupNorm.init = args.options("nn.GroupNorm", { "self", "num_groups", "num_channels" }, { "eps", "affine" },
function(self, groups, c, o)
  self.groups, self.eps = groups, o.eps or 1e-5
  if o.affine ~= false then
    self.weight = param(Tensor.ones(c))
    self.bias = param(Tensor.zeros(c))
  end
end)
function nn.GroupNorm:forward(x)
  local n, c = x.shape[1], x.shape[2]
  local y = x:reshape(n, self.groups, -1):layernorm(-1, self.eps):reshape(x.shape)
  if self.weight then
    local shape = { 1, c }
    for _ = 3, x.ndim do shape[#shape + 1] = 1 end
    y = y * self.weight:reshape(shape) + self.bias:reshape(shape)
  end
  return y
end

-- nn.RMSNorm(dim [, {eps=1e-6}]): x / sqrt(mean(x^2) + eps) * weight
nn.RMSNorm = class("RMSNorm")
nn.RMSNorm.init = args.options("nn.RMSNorm", { "self", "dim" }, { "eps" },
function(self, dim, o)
  self.eps = o.eps or 1e-6
  self.weight = param(Tensor.ones(dim))
end)
function nn.RMSNorm:forward(x) return x * ((x * x):mean(-1, true) + self.eps):rsqrt() * self.weight end

-- nn.Embedding(vocab, dim): rows of a table picked by integer ids (a one-hot matmul)
nn.Embedding = class("Embedding")
nn.Embedding.init = args.options("nn.Embedding", { "self", "vocab_size", "embed_size" }, {},
function(self, vocab, dim)
  self.vocab = vocab
  self.weight = param(Tensor.randn(vocab, dim))
end)
function nn.Embedding:forward(ids) return ids:one_hot(self.vocab):matmul(self.weight) end

-- nn.Sequential{layer_or_function, ...}: calls each in turn
nn.Sequential = class("Sequential")
function nn.Sequential:init(layers) for i, l in ipairs(layers) do self[i] = l end end
function nn.Sequential:forward(x)
  for _, l in ipairs(self) do x = l(x) end
  return x
end

return nn
