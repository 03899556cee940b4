-- tensor: the Tensor API above the C++ primitives, composed in Lua as tinygrad composes it in
-- tensor.py. Gradients come from the primitives' rules, so nothing composed has a backward of its
-- own. This file loads the parts, each named for what it holds, and gives the C++ methods that take
-- no options their parameter lists.
local args = require "args" -- first: it keeps the C++ bindings before anything wraps them
local T = Tensor

require "tensor_create"   -- creation and random
require "tensor_math"     -- elementwise math, activations, operators, dtype shortcuts
require "tensor_reduce"   -- reductions, scans, sort, einsum, matmul
require "tensor_shape"    -- movement, joining, gather/scatter, indexing

-- The C++ methods that take no options still reject extra arguments (x:exp(2) is a mistake).
for _, name in ipairs({ "neg", "logical_not", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "reciprocal", "sin",
  "cos", "relu", "sigmoid", "tanh", "abs", "square", "contiguous", "realize", "tolist", "item", "numel", "schedule",
  "tobytes", "detach" }) do
  args.sign(T, name, { "self" })
end
args.sign(T, "assign", { "self", "x" })
args.sign(T, "requires_grad_", { "self", "requires_grad" })
args.sign(T, "frombytes", { "data", "shape", "dtype", "offset", "count" })

require "tensor_autograd" -- backward, gradient
require "tensor_data"     -- copies, devices, reading values back, scheduling hints
require "tensor_conv"     -- pooling and convolution
require "tensor_layers"   -- linear, sequential, dropout, attention
require "tensor_norm"     -- layernorm, batchnorm
require "tensor_loss"     -- one_hot and the losses

return T
