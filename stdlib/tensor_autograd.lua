-- tensor_autograd: backward and gradient over the C++ autograd (interp/bind_autograd.cpp,
-- engine/gradient.cpp), with tinygrad's parameters.
local args = require "args"
local T, C = Tensor, args.raw
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it
local is_tensor = args.is_tensor

doc("backward",
  "add d(loss)/dt to t.grad for every tensor t with requires_grad (lazy); gradient weights a non-scalar output")
def("backward", { "self", "gradient" }, function(self, gradient)
  if gradient ~= nil then
    if not is_tensor(gradient) or gradient.ndim ~= self.ndim then
      error("backward: gradient must be a Tensor of the output's shape", 0)
    end
    return C.backward((self * gradient:detach()):sum())
  end
  return C.backward(self)
end)
-- y:gradient(a, b [, {gradient=g}]) or Tensor.gradient(y, {a, b}): a list of gradients
doc("gradient", "the gradients of y w.r.t. each target, as a list: y:gradient(a, b) or Tensor.gradient(y, {a, b})")
def("gradient", { "self", "...", "gradient", "materialize_grads" }, function(self, rest, gradient)
  local targets = rest
  if rest.n == 1 and type(rest[1]) == "table" and not is_tensor(rest[1]) then targets = rest[1] end
  local y = gradient ~= nil and (self * gradient:detach()):sum() or self
  return C.gradient(y, targets)
end)

return T
