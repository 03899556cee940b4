-- tensor_layers: the functional forms of layers: linear, sequential, dropout and attention.
local args = require "args"
local T = Tensor
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it

-- x:linear(weight [, bias, dtype]) = x @ weight + bias, with weight (in, out) as in tinygrad
-- (nn.Linear stores (out, in) and passes weight.T)
doc("linear", "x @ weight + bias, with weight (in, out) as in tinygrad")
def("linear", { "self", "weight", "bias", "dtype" }, function(self, w, b, dtype)
  local y = w.ndim == 1 and self * w or self:matmul(w, false, dtype)
  if b then y = y + b end
  return y
end)

doc("sequential", "apply each function of a list in turn")
def("sequential", { "self", "ll" }, function(self, ll)
  local x = self
  for _, f in ipairs(ll) do x = f(x) end
  return x
end)

doc("dropout", "zero elements with probability p while Tensor.training is true, scale the rest")
def("dropout", { "self", "p" }, function(self, p)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p > 1 then error("dropout: p must be in [0, 1]", 0) end
  if not Tensor.training or p == 0 then return self end
  local keep = Tensor.rand(self.shape):ge(p)
  return keep:where(self, 0) / (1 - p)
end)

-- q:scaled_dot_product_attention(k, v [, attn_mask, dropout_p, is_causal])
doc("scaled_dot_product_attention", "softmax(q k^T / sqrt(d) + mask) v, with is_causal for a lower-triangular mask")
def("scaled_dot_product_attention", { "self", "key", "value", "attn_mask", "dropout_p", "is_causal" },
  function(self, key, value, attn_mask, dropout_p, is_causal)
    local qk = self:matmul(key:transpose(-2, -1)) / math.sqrt(self.shape[self.ndim])
    if is_causal then
      if attn_mask then error("scaled_dot_product_attention: attn_mask and is_causal=true cannot both be set", 0) end
      attn_mask = T.ones_like(qk, { dtype = "bool" }):tril()
    end
    if attn_mask then
      if attn_mask.dtype == "bool" then attn_mask = attn_mask:where(0, -math.huge) end
      qk = qk + attn_mask
    end
    return qk:softmax(-1):dropout(dropout_p or 0):matmul(value)
  end)

return T
