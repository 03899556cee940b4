-- optim: optimizers over a list of parameters (tensors with requires_grad). step() builds
-- every update lazily, assigns it, and realizes all parameters and optimizer state in one
-- schedule, so the whole update runs as fused kernels (with the forward and backward it needs).
-- The learning rate and the bias-correction powers are 1-element tensors, not Lua numbers:
-- a number would be a constant in the kernels, and a new value would compile new kernels.
local args = require "args"
local optim = {}

local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

local function scalar(v) return Tensor({ v }, "float32"):realize() end

local function new(cls, params, lr)
  assert(type(params) == "table" and #params > 0, "an optimizer needs a non-empty list of parameters")
  local self = setmetatable({ params = {}, state = {} }, cls)
  for i, p in ipairs(params) do
    assert(args.is_tensor(p), ("parameter %d is not a Tensor"):format(i))
    p.requires_grad = true
    self.params[i] = p
  end
  self.lr = scalar(lr)
  return self
end

function Optimizer:zero_grad()
  for _, p in ipairs(self.params) do p.grad = nil end
end

-- The learning rate as a number, and setting it (a scheduler does this every step).
function Optimizer:get_lr() return self.lr:item() end
function Optimizer:set_lr(v) self.lr:assign(Tensor({ v }, "float32")):realize() end

-- schedule_step(): builds every update and assigns it, without realizing; returns the tensors
-- a step must realize (the parameters that had a gradient, then the optimizer state) and how
-- many parameters those are. step() realizes them; an OptimizerGroup realizes its members' at once.
function Optimizer:schedule_step()
  local out = {}
  for i, p in ipairs(self.params) do
    if p.grad then
      self:update(i, p, p.grad:detach())
      out[#out + 1] = p
    end
  end
  local n = #out
  for _, t in ipairs(self.state) do out[#out + 1] = t end
  return out, n
end

-- step(...): applies the update; tensors passed in (the loss, ...) are realized in the same
-- schedule, so their values come from the same forward pass.
function Optimizer:step(...)
  local realize = { ... }
  local todo, n = self:schedule_step()
  assert(n > 0, "step(): no parameter has a gradient (call loss:backward() first)")
  for _, t in ipairs(todo) do realize[#realize + 1] = t end
  for _, t in ipairs(nn and nn.take_pending() or {}) do realize[#realize + 1] = t end
  Tensor.realize_all(realize)
  self:zero_grad()
  return ...
end

-- state tensors are listed in self.state so step() realizes them
local function buffer(self, like)
  local t = Tensor.zeros(like.shape, { dtype = like.dtype }):contiguous():realize()
  self.state[#self.state + 1] = t
  return t
end

-- ---------------------------------------------------------------- SGD

-- optim.SGD(params [, {lr=0.001, momentum=0, nesterov=false, weight_decay=0}])
local SGD = setmetatable({}, { __index = Optimizer })
SGD.__index = SGD
optim.SGD = args.options("optim.SGD", { "params" }, { "lr", "momentum", "weight_decay", "nesterov" }, function(params, o)
  local self = new(SGD, params, o.lr or 0.001)
  self.momentum, self.nesterov, self.wd = o.momentum or 0, o.nesterov or false, o.weight_decay or 0
  if self.momentum ~= 0 then
    self.b = {}
    for i, p in ipairs(self.params) do self.b[i] = buffer(self, p) end
  end
  return self
end)
function SGD:update(i, p, g)
  if self.wd ~= 0 then g = g + p:detach() * self.wd end
  if self.b then
    self.b[i]:assign(self.b[i] * self.momentum + g)
    g = self.nesterov and g + self.b[i] * self.momentum or self.b[i]
  end
  p:assign(p:detach() - g * self.lr)
end

-- ---------------------------------------------------------------- LAMB, Adam, AdamW

-- optim.LAMB(params [, {lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0}]); Adam and
-- AdamW are LAMB without the trust ratio (AdamW keeps the decoupled weight decay).
local LAMB = setmetatable({}, { __index = Optimizer })
LAMB.__index = LAMB
local function lamb(params, o, adam, default_eps, default_wd)
  local self = new(LAMB, params, o.lr or 0.001)
  self.b1, self.b2 = o.b1 or 0.9, o.b2 or 0.999
  self.eps, self.wd, self.adam = o.eps or default_eps, o.weight_decay or default_wd, adam
  self.b1_t, self.b2_t = scalar(1), scalar(1) -- b1^t and b2^t
  self.state[1], self.state[2] = self.b1_t, self.b2_t
  self.m, self.v = {}, {}
  for i, p in ipairs(self.params) do
    self.m[i], self.v[i] = buffer(self, p), buffer(self, p)
  end
  return self
end
local adam_opts = { "lr", "b1", "b2", "eps", "weight_decay" }
optim.LAMB = args.options("optim.LAMB", { "params" }, adam_opts, function(params, o) return lamb(params, o, false, 1e-6, 0) end)
optim.Adam = args.options("optim.Adam", { "params" }, adam_opts, function(params, o) return lamb(params, o, true, 1e-8, 0) end)
optim.AdamW = args.options("optim.AdamW", { "params" }, adam_opts, function(params, o) return lamb(params, o, true, 1e-8, 0.01) end)

function LAMB:schedule_step()
  self.b1_t:assign(self.b1_t * self.b1)
  self.b2_t:assign(self.b2_t * self.b2)
  return Optimizer.schedule_step(self)
end

function LAMB:update(i, p, g)
  local m, v = self.m[i], self.v[i]
  m:assign(m * self.b1 + g * (1 - self.b1))
  v:assign(v * self.b2 + g * g * (1 - self.b2))
  local m_hat = m / (1 - self.b1_t)
  local v_hat = v / (1 - self.b2_t)
  local up = m_hat / (v_hat:sqrt() + self.eps)
  if self.wd ~= 0 then up = up + p:detach() * self.wd end
  local r = 1
  if not self.adam then -- the trust ratio |p| / |up|, 1 where either is 0
    local r1, r2 = p:detach():square():sum():sqrt(), up:square():sum():sqrt()
    r = r1:gt(0):where(r2:gt(0):where(r1 / r2, 1.0), 1.0)
  end
  p:assign(p:detach() - up * r * self.lr)
end

-- ---------------------------------------------------------------- groups, gradient clipping

-- optim.OptimizerGroup(opt1, opt2, ...): several optimizers stepped as one, as tinygrad's
-- OptimizerGroup (PyTorch's parameter groups): e.g. AdamW with weight decay on the matrices and
-- without on the biases and norms. step() realizes every member's update in one schedule;
-- set_lr sets every member's learning rate; group[i] is the i-th optimizer.
local OptimizerGroup = {}
OptimizerGroup.__index = function(self, k)
  if math.type(k) == "integer" then return rawget(self, "optimizers")[k] end
  return OptimizerGroup[k]
end
optim.OptimizerGroup = OptimizerGroup
setmetatable(OptimizerGroup, { __index = Optimizer, __call = function(cls, ...)
  local opts = { ... }
  assert(#opts > 0, "OptimizerGroup needs at least one optimizer")
  local self = setmetatable({ optimizers = opts, params = {}, state = {} }, cls)
  for i, o in ipairs(opts) do
    assert(type(o) == "table" and o.schedule_step, ("OptimizerGroup: argument %d is not an optimizer"):format(i))
    for _, p in ipairs(o.params) do self.params[#self.params + 1] = p end
    for _, t in ipairs(o.state) do self.state[#self.state + 1] = t end
  end
  self.lr = opts[1].lr
  return self
end })
function OptimizerGroup:schedule_step()
  local out, n = {}, 0
  for _, o in ipairs(self.optimizers) do
    local todo, k = o:schedule_step()
    for _, t in ipairs(todo) do out[#out + 1] = t end
    n = n + k
  end
  return out, n
end
function OptimizerGroup:set_lr(v) for _, o in ipairs(self.optimizers) do o:set_lr(v) end end
function OptimizerGroup:zero_grad() for _, o in ipairs(self.optimizers) do o:zero_grad() end end

-- optim.clip_grad_norm(params, max_norm): scales every gradient by min(1, max_norm / (norm +
-- 1e-6)), where norm is the L2 norm of all the gradients together (PyTorch's
-- torch.nn.utils.clip_grad_norm_). Lazy, like the gradients: call it between backward() and
-- step(), and the scaling fuses into the update (a jitted step replays it). Returns the norm
-- before clipping, a 0-d tensor.
function optim.clip_grad_norm(params, max_norm)
  assert(type(max_norm) == "number" and max_norm > 0, "clip_grad_norm: max_norm must be a positive number")
  local sq
  for _, p in ipairs(params) do
    if p.grad then
      local s = p.grad:square():sum()
      sq = sq and sq + s or s
    end
  end
  assert(sq, "clip_grad_norm: no parameter has a gradient (call loss:backward() first)")
  local norm = sq:sqrt()
  local scale = (max_norm / (norm + 1e-6)):minimum(1)
  for _, p in ipairs(params) do
    if p.grad then p.grad = p.grad * scale end
  end
  return norm
end

-- ---------------------------------------------------------------- learning-rate schedules

-- optim.OneCycle(opt, max_lr, total_steps [, {pct_start=0.25, div=25, final_div=1e4}]):
-- warm up from max_lr/div to max_lr (cosine), then anneal to max_lr/final_div. Call :step()
-- once per training step, before opt:step().
optim.OneCycle = args.options("optim.OneCycle", { "opt", "max_lr", "total_steps" }, { "pct_start", "div", "final_div" },
function(opt, max_lr, total, o)
  local pct, div, final = o.pct_start or 0.25, o.div or 25, o.final_div or 1e4
  local s = { t = 0 }
  local function cos(a, b, f) return b + (a - b) * (1 + math.cos(math.pi * f)) / 2 end
  function s.lr_at(t)
    local up = math.max(1, math.floor(total * pct))
    if t < up then return cos(max_lr / div, max_lr, t / up) end
    return cos(max_lr, max_lr / final, math.min(1, (t - up) / math.max(1, total - up)))
  end
  function s.step()
    opt:set_lr(s.lr_at(s.t))
    s.t = s.t + 1
  end
  return s
end)

return optim
