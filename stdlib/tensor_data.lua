-- tensor_data: small tinygrad methods about a tensor's data: copies, moving between devices,
-- reading the values back, and the scheduling hints moongrad takes as the identity.
local args = require "args"
local T = Tensor
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it
local is_tensor = args.is_tensor

-- A copy's gradient: the output's, on x's device (registered once: Tensor._grad_fn keeps each
-- function for good)
local copy_grad
local function copied(out, x)
  if T.no_grad then return out end
  copy_grad = copy_grad or T._grad_fn(function(g, src) return g:to(src.device) end)
  return T._custom_grad(out, { x }, copy_grad)
end

doc("clone", "a copy in a new buffer: assigning to x afterwards leaves the clone as it was")
def("clone", { "self" }, function(self)
  -- contiguous() alone is x itself when x is realized and contiguous, so a later x:assign would
  -- show through; a sharded tensor's pieces or a symbolic shape keep that route
  if type(self.device) ~= "string" then return self:contiguous() end
  for _, d in ipairs(self.shape) do
    if math.type(d) ~= "integer" then return self:contiguous() end
  end
  return copied(T.empty(self.shape, { dtype = self.dtype, device = self.device }):assign(self), self)
end)
-- A copy on another device, or x itself when it is there already. Between devices whose buffers
-- are host memory (CPU:n, LLVM:n) the copy is a COPY node in the graph, done by a kernel of the
-- destination device when something realizes it (after x's own kernels, and beside the other
-- device's work: engine/realize.cpp). To or from any other device it is made now, through host
-- memory. Either way the gradient flows back: the output's gradient, copied to x's device.
-- x copied into a new buffer on device (shard_ makes a view instead on x's own device)
function T._copy_to(self, device)
  local lazy = device ~= self.device and self:_copy(device)
  if lazy then return lazy end
  local bytes, shape, dtype = self:tobytes(), self.shape, self.dtype
  return copied(T._on_device("to", device, function() return T.frombytes(bytes, shape, dtype) end), self)
end
doc("to", "x on device: a lazy copy kernel between CPU:n and LLVM:n, else a copy through host memory now (gradients flow back through it)")
def("to", { "self", "device" }, function(self, device)
  if type(device) ~= "string" then error("to: device must be a string", 0) end
  device = T._check_device("to", device)
  if device == self.device then return self end
  return T._copy_to(self, device)
end)
doc("to_", "move x to device in place (only the default device exists for now)")
def("to_", { "self", "device" }, function(self, device)
  if type(device) ~= "string" or device:upper() ~= self.device:upper() then
    error("to_: moving a tensor in place is not supported; use x = x:to(device)", 0)
  end
  return self
end)
doc("data", "the values as a flat Lua list")
def("data", { "self" }, function(self) return self:flatten():tolist() end)
doc("replace", "x now stands for another tensor's graph")
def("replace", { "self", "x", "allow_shape_mismatch" }, function(self, x, mismatch)
  if not is_tensor(x) then error("replace: expected a Tensor", 0) end
  if not mismatch and table.concat(x.shape, ",") ~= table.concat(self.shape, ",") then
    error("replace: shapes differ (pass allow_shape_mismatch=true)", 0)
  end
  return x
end)
-- forward identity; in tinygrad they are scheduling hints, which moongrad's scheduler does not take
doc("contiguous_backward", "x (a scheduling hint in tinygrad; the identity here)")
def("contiguous_backward", { "self" }, function(self) return self end)
doc("fuse", "x (a scheduling hint in tinygrad; the identity here)")
def("fuse", { "self" }, function(self) return self end)

return T
