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

-- q:scaled_dot_product_attention(k, v [, attn_mask, dropout_p, is_causal]), as tinygrad and
-- PyTorch's F.scaled_dot_product_attention: q (..., Lq, E), k (..., Lk, E), v (..., Lk, Ev) give
-- (..., Lq, Ev). attn_mask must broadcast to the scores' shape (..., Lq, Lk): a bool mask marks
-- the pairs that take part (false becomes -inf), a float mask is added to the scores. is_causal
-- is PyTorch's torch.ones(Lq, Lk).tril(0) (query i sees keys 0..i, also when Lq ~= Lk); it and
-- attn_mask cannot both be given. dropout_p applies while Tensor.training is true (tinygrad's).
local function shape_str(shape) return "(" .. table.concat(shape, ", ") .. (#shape == 1 and ",)" or ")") end
doc("scaled_dot_product_attention", "softmax(q k^T / sqrt(d) + mask) v; attn_mask bool (true = takes part) or " ..
  "float (added), broadcast to (..., Lq, Lk); is_causal for PyTorch's lower-triangular ones(Lq, Lk):tril() mask")
def("scaled_dot_product_attention", { "self", "key", "value", "attn_mask", "dropout_p", "is_causal" },
  function(self, key, value, attn_mask, dropout_p, is_causal)
    local name = "scaled_dot_product_attention"
    for _, it in ipairs({ { "query", self }, { "key", key }, { "value", value } }) do
      local what, t = it[1], it[2]
      if not args.is_tensor(t) then error(("%s: %s must be a Tensor, got %s"):format(name, what, type(t)), 0) end
      if t.ndim < 2 then
        error(("%s: %s needs at least 2 dims (..., L, E), got shape %s"):format(name, what, shape_str(t.shape)), 0)
      end
    end
    if self.shape[self.ndim] ~= key.shape[key.ndim] then
      error(("%s: query %s and key %s differ in the last dim (the embedding size)"):format(name,
        shape_str(self.shape), shape_str(key.shape)), 0)
    end
    if key.shape[key.ndim - 1] ~= value.shape[value.ndim - 1] then
      error(("%s: key %s and value %s differ in dim -2 (the number of keys)"):format(name,
        shape_str(key.shape), shape_str(value.shape)), 0)
    end
    if is_causal ~= nil and type(is_causal) ~= "boolean" then
      error(("%s: is_causal must be true or false, got %s"):format(name, type(is_causal)), 0)
    end
    if is_causal and attn_mask ~= nil then
      error(name .. ": attn_mask and is_causal=true cannot both be set", 0)
    end
    local qk = self:matmul(key:transpose(-2, -1)) / math.sqrt(self.shape[self.ndim])
    if is_causal then attn_mask = T.ones_like(qk, { dtype = "bool" }):tril() end
    if attn_mask ~= nil then
      if not args.is_tensor(attn_mask) then
        error(("%s: attn_mask must be a bool or float Tensor, got %s"):format(name, type(attn_mask)), 0)
      end
      local ms, ss = attn_mask.shape, qk.shape
      local fits = #ms <= #ss
      for i = 1, #ms do
        local m = ms[#ms - i + 1]
        fits = fits and (m == 1 or m == ss[#ss - i + 1])
      end
      if not fits then
        error(("%s: attn_mask of shape %s does not broadcast to the attention scores' shape %s (..., Lq, Lk)")
          :format(name, shape_str(ms), shape_str(ss)), 0)
      end
      if attn_mask.dtype == "bool" then
        attn_mask = attn_mask:where(0, -math.huge)
      elseif not dtypes.is_float(attn_mask.dtype) then
        error(("%s: attn_mask must be bool (true = takes part) or float (added to the scores), got %s")
          :format(name, tostring(attn_mask.dtype)), 0)
      end
      qk = qk + attn_mask
    end
    return qk:softmax(-1):dropout(dropout_p or 0):matmul(value)
  end)

return T
