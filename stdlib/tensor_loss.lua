-- tensor_loss: the losses, with tinygrad's reduction= and label smoothing, and one_hot for the
-- class ids they take.
local args = require "args"
local T = Tensor
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it
local is_tensor = args.is_tensor
local function shape_str(shape) return "(" .. table.concat(shape, ", ") .. (#shape == 1 and ",)" or ")") end

-- x:one_hot([num_classes=max+1]) -> int32 rows with a 1 at each id (tinygrad's dtype)
doc("one_hot", "int32 rows with a 1 at each id (num_classes default max + 1)")
def("one_hot", { "self", "num_classes" }, function(self, n)
  if not dtypes.is_int(self.dtype) then error("one_hot: expects an int tensor, got " .. self.dtype, 0) end
  if n == nil or n == -1 then n = self:numel() > 0 and (self:max() + 1):item() or 0 end
  if math.type(n) ~= "integer" or n < 0 then error("one_hot: num_classes must be a non-negative integer", 0) end
  return self:unsqueeze(-1):eq(T.arange(n)):where(1, 0)
end)

local function reduce_loss(name, x, reduction)
  reduction = reduction or "mean"
  if reduction == "mean" then return x:mean() end
  if reduction == "sum" then return x:sum() end
  if reduction == "none" then return x end
  error(("%s: reduction must be 'mean', 'sum' or 'none', got %s"):format(name, tostring(reduction)), 0)
end

doc("binary_crossentropy", "-(y log p + (1-y) log(1-p)); reduction mean, sum or none")
def("binary_crossentropy", { "self", "Y", "reduction" }, function(self, Y, reduction)
  return reduce_loss("binary_crossentropy", -Y * self:log() - (1 - Y) * (1 - self):log(), reduction)
end)
-- x:binary_crossentropy_logits(Y [, reduction="mean", pos_weight]), as PyTorch's
-- binary_cross_entropy_with_logits: -(pos_weight y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))).
-- Written stably: -log sigmoid(x) = log(1 + e^-x) = max(-x, 0) + log(1 + e^-|x|), and
-- -log(1 - sigmoid(x)) = x + that, so the loss is (1 - y) x + (1 + (pos_weight - 1) y) log(1 + e^-x).
-- pos_weight (a Tensor or a number) weighs the positive term; a per-class Tensor broadcasts over
-- the last dim.
doc("binary_crossentropy_logits", "binary cross-entropy of sigmoid(x), computed stably; pos_weight (a Tensor or " ..
  "a number, broadcast with x) weighs the positive term as PyTorch's; reduction mean, sum or none")
def("binary_crossentropy_logits", { "self", "Y", "reduction", "pos_weight" }, function(self, Y, reduction, pos_weight)
  local name = "binary_crossentropy_logits"
  if pos_weight == nil then
    return reduce_loss(name, self:maximum(0) - Y * self + (1 + (-self:abs()):exp()):log(), reduction)
  end
  if is_tensor(pos_weight) then
    local ps, xs = pos_weight.shape, self.shape
    for i = 1, math.max(#ps, #xs) do
      local p, x = ps[#ps - i + 1] or 1, xs[#xs - i + 1] or 1
      if p ~= x and p ~= 1 and x ~= 1 then
        error(("%s: pos_weight of shape %s does not broadcast with the logits' shape %s"):format(name,
          shape_str(ps), shape_str(xs)), 0)
      end
    end
  elseif type(pos_weight) ~= "number" then
    error(("%s: pos_weight must be a Tensor or a number, got %s"):format(name, type(pos_weight)), 0)
  end
  local softplus_neg = (-self):maximum(0) + (1 + (-self:abs()):exp()):log() -- -log sigmoid(x)
  return reduce_loss(name, (1 - Y) * self + (1 + (pos_weight - 1) * Y) * softplus_neg, reduction)
end)

-- logits:sparse_categorical_crossentropy(Y [, ignore_index=-1, label_smoothing=0, reduction="mean"]).
-- As tinygrad, ignore_index=-1 ignores nothing; "mean" divides by the count of counted labels.
doc("sparse_categorical_crossentropy",
  "negative log-likelihood of the right class from logits; reduction mean, sum or none")
def("sparse_categorical_crossentropy", { "self", "Y", "ignore_index", "label_smoothing", "reduction" },
  function(self, Y, ignore_index, ls, reduction)
    ignore_index, ls, reduction = ignore_index or -1, ls or 0.0, reduction or "mean"
    if ls < 0 or ls > 1 then error("sparse_categorical_crossentropy: label_smoothing must be in [0, 1]", 0) end
    if reduction ~= "mean" and reduction ~= "sum" and reduction ~= "none" then
      error(("sparse_categorical_crossentropy: reduction must be 'mean', 'sum' or 'none', got %s"):format(tostring(reduction)), 0)
    end
    if not is_tensor(Y) then error("sparse_categorical_crossentropy: Y must be a Tensor of class ids", 0) end
    local n = self.shape[self.ndim]
    local logp = self:log_softmax(-1)
    local hot = Y:unsqueeze(-1):eq(T.arange(n))
    -- no mask, no smoothing term and a count that is a number where they change nothing: each
    -- would be kernels of its own (an MNIST step's loss took 14 kernels, tinygrad's 5)
    local mask = ignore_index ~= -1 and Y:ne(ignore_index) or nil
    if mask then hot = hot:bitwise_and(mask:unsqueeze(-1)) end
    local unreduced = hot:where(logp, 0):sum(-1)
    if ls ~= 0 then
      local smoothing = logp:mean(-1)
      if mask then smoothing = smoothing * mask end
      unreduced = (1 - ls) * unreduced + ls * smoothing
    end
    if reduction == "mean" then return -(unreduced:sum() / (mask and mask:sum() or Y:numel())) end
    if reduction == "sum" then return -unreduced:sum() end
    return -unreduced
  end)

-- logits:cross_entropy(Y [, reduction, label_smoothing]): classes on dim 1, as tinygrad; Y holds
-- class ids (int) or probabilities (float, same shape as the logits)
doc("cross_entropy", "cross-entropy from logits (classes on dim 1), Y as class ids or probabilities")
def("cross_entropy", { "self", "Y", "reduction", "label_smoothing" }, function(self, Y, reduction, ls)
  ls = ls or 0.0
  if ls < 0 or ls > 1 then error("cross_entropy: label_smoothing must be in [0, 1]", 0) end
  local ax = self.ndim > 1 and 1 or 0
  if Y.ndim < 2 and self.ndim >= 2 then Y = Y:one_hot(self.shape[2]) end
  local c = self.shape[ax + 1]
  Y = (1 - ls) * Y + ls / c
  return reduce_loss("cross_entropy", -self:log_softmax(ax):mul(Y):sum(ax), reduction)
end)

doc("nll_loss", "negative log-likelihood from log-probabilities (classes on dim 1)")
def("nll_loss", { "self", "Y", "weight", "ignore_index", "reduction" }, function(self, Y, weight, ignore_index, reduction)
  local w = weight and weight[Y] or T.ones_like(Y, { dtype = self.dtype })
  local mw = ignore_index and w * Y:ne(ignore_index) or w
  local safe = ignore_index and Y:ne(ignore_index):where(Y, 0) or Y
  local nll = -self:gather(1, safe:unsqueeze(1)):squeeze(1) * mw
  if (reduction or "mean") == "mean" then return nll:sum() / mw:sum() end
  return reduce_loss("nll_loss", nll, reduction)
end)

-- kept for code written before tinygrad's names: ((x - y)^2).mean()
doc("mse", "mean squared error (not in tinygrad; kept for older scripts)")
def("mse", { "self", "Y" }, function(self, Y) return (self - Y):square():mean() end)

return T
