-- tensor: the Tensor API above the C++ primitives, composed in Lua as tinygrad composes it in
-- tensor.py. Gradients come from the primitives' rules, so nothing composed has a backward of its
-- own. This file loads the parts, each named for what it holds, and gives the C++ methods their
-- parameter lists and docs. Every method's doc is registered beside its definition (doc(name,
-- text), read by :help).
local args = require "args" -- first: it keeps the C++ bindings before anything wraps them
local T = Tensor
local doc = args.doc -- the method's :help text, kept beside it

require "tensor_create"   -- creation and random
require "tensor_math"     -- elementwise math, activations, operators, dtype shortcuts
require "tensor_reduce"   -- reductions, scans, sort, einsum, matmul
require "tensor_shape"    -- movement, joining, gather/scatter, indexing

-- The C++ methods (interp/bind_tensor.cpp, bind_autograd.cpp), with their docs. Those that take no
-- options still reject extra arguments (x:exp(2) is a mistake).
local plain = {
  { "neg", "-x" },
  { "logical_not", "not, for bool tensors (x == 0 for others)" },
  { "exp", "e^x" },
  { "exp2", "2^x (the primitive exp is built on)" },
  { "log", "natural logarithm" },
  { "log2", "base-2 logarithm (the primitive log is built on)" },
  { "sqrt", "square root" },
  { "rsqrt", "1 / sqrt(x)" },
  { "reciprocal", "1 / x" },
  { "sin", "sine" },
  { "cos", "cosine (sin shifted by pi/2)" },
  { "relu", "max(x, 0)" },
  { "sigmoid", "1 / (1 + e^-x)" },
  { "tanh", "hyperbolic tangent (2 * sigmoid(2x) - 1)" },
  { "abs", "absolute value" },
  { "square", "x * x" },
  { "contiguous", "force a real buffer in row-major order (a kernel)" },
  { "realize", "run the kernels now; returns x" },
  { "tolist", "the values as nested Lua tables" },
  { "item", "the value of a one-element tensor as a Lua number" },
  { "numel", "number of elements" },
  { "schedule", "the kernels realize would run, as a Lua list of ScheduleItems" },
  { "schedule_with_vars", "items, vals: the ScheduleItems with their Variables kept symbolic, and the values (by name) a realize binds them to" },
  { "tobytes", "the raw little-endian bytes, row-major, as a Lua string" },
  { "detach", "the same values with no gradient flowing back" },
}
for _, m in ipairs(plain) do
  doc(m[1], m[2])
  args.sign(T, m[1], { "self" })
end
doc("assign", "x now holds the value of another tensor (same shape): how optimizers update parameters")
args.sign(T, "assign", { "self", "x" })
doc("requires_grad_", "mark x as a parameter backward() fills x.grad for; returns x")
args.sign(T, "requires_grad_", { "self", "requires_grad" })
doc("frombytes", "a tensor from raw little-endian bytes (offset and count in bytes)")
args.sign(T, "frombytes", { "data", "shape", "dtype", "offset", "count" })
-- bound as they are, with a signature of their own
doc("realize_all",
  { "Tensor.realize_all{a, b, ...}", "realize several tensors with one schedule (shared work runs once)" })
doc("slice", { "x[{{1,3}, {nil,nil,2}}]  or  x:slice(...)", "basic slicing: {start, stop, step} per dim, 0-based" })

require "tensor_autograd" -- backward, gradient
require "tensor_data"     -- copies, devices, reading values back, scheduling hints
require "tensor_conv"     -- pooling and convolution
require "tensor_layers"   -- linear, sequential, dropout, attention
require "tensor_norm"     -- layernorm, batchnorm
require "tensor_loss"     -- one_hot and the losses
require "multi"           -- x:shard(devices, {axis=}): one tensor over several devices

return T
