-- help: the one-line docs that :help prints. Data only: {signature, what it does}.
-- tests/lua/test_repl.lua checks that every function in the Tensor table has an entry.
local M = {}

-- The colon commands, in the order :help lists them. `lua` is the function the command runs.
M.commands = {
  { "debug", ":debug N", "show.debug(N)", "set DEBUG live (0 quiet, 1 kernel counts, 2 each kernel, 3 its source, 4 every IR stage)" },
  { "beam", ":beam N", "show.beam(N)", "set BEAM (the setting is kept; BEAM search itself is not implemented yet)" },
  { "noopt", ":noopt 0|1", "show.noopt(1)", "turn the hand-coded opts and algebraic rewrites off (1) or on (0)" },
  { "device", ":device NAME", 'show.device("CPU")', "set the default device for new tensors (Device.names() lists them)" },
  { "schedule", ":schedule EXPR", "show.schedule(x)", "the kernels realizing EXPR would run, each with its AST" },
  { "ir", ":ir EXPR [STAGE]", 'show.ir(x, "linear")', "the UOp IR at every stage, or one: graph, ast, opts, lowered, simplified, linear" },
  { "src", ":src EXPR", "show.src(x)", "the generated source of each kernel EXPR needs" },
  { "kernels", ":kernels EXPR", "show.kernels(x)", "realize EXPR and list the kernels it ran with time, GFLOPS and GB/s" },
  { "time", ":time EXPR", "show.time(function() return EXPR end)", "build, schedule, compile and run EXPR; print the wall time" },
  { "help", ":help [NAME]", 'show.help("relu")', "this list, or the signature and doc of a Tensor method or a command" },
}

-- Tensor methods and constructors: name -> {signature, doc}.
M.tensor = {
  -- constructors
  zeros = { "Tensor.zeros(d1, d2, ... [, dtype])", "a tensor of zeros (float32 unless dtype is given)" },
  ones = { "Tensor.ones(d1, d2, ... [, dtype])", "a tensor of ones" },
  empty = { "Tensor.empty(d1, d2, ... [, dtype])", "an allocated tensor whose values are undefined" },
  rand = { "Tensor.rand(d1, d2, ... [, dtype])", "uniform random values in [0, 1) (seeded by manual_seed)" },
  randn = { "Tensor.randn(d1, d2, ... [, dtype])", "standard normal random values" },
  full = { "Tensor.full(shape, value [, dtype])", "a tensor filled with value (a broadcast constant: no memory)" },
  arange = { "Tensor.arange(start, stop [, step] [, dtype])", "start, start+step, ... below stop (like range)" },
  eye = { "Tensor.eye(n [, dtype])", "the n x n identity matrix" },
  manual_seed = { "Tensor.manual_seed(seed)", "reseed rand and randn" },
  realize_all = { "Tensor.realize_all{a, b, ...}", "realize several tensors with one schedule (shared work runs once)" },
  -- elementwise
  add = { "x:add(y)  or  x + y", "elementwise sum, broadcasting" },
  sub = { "x:sub(y)  or  x - y", "elementwise difference, broadcasting" },
  mul = { "x:mul(y)  or  x * y", "elementwise product, broadcasting" },
  div = { "x:div(y)  or  x / y", "true division (ints become float32)" },
  idiv = { "x:idiv(y)  or  x // y", "floor division (rounds down, as in Lua and Python)" },
  pow = { "x:pow(y)  or  x ^ y", "elementwise power" },
  maximum = { "x:maximum(y)", "elementwise max of two tensors" },
  minimum = { "x:minimum(y)", "elementwise min of two tensors" },
  lt = { "x:lt(y)", "x < y elementwise, as bool" },
  le = { "x:le(y)", "x <= y elementwise, as bool" },
  gt = { "x:gt(y)", "x > y elementwise, as bool" },
  ge = { "x:ge(y)", "x >= y elementwise, as bool" },
  eq = { "x:eq(y)", "x == y elementwise, as bool (Lua's == compares objects)" },
  ne = { "x:ne(y)", "x ~= y elementwise, as bool" },
  where = { "cond:where(a, b)", "a where cond is true, else b" },
  neg = { "x:neg()  or  -x", "negation" },
  logical_not = { "x:logical_not()", "not, for bool tensors" },
  exp = { "x:exp()", "e^x" },
  exp2 = { "x:exp2()", "2^x (the primitive exp is built on)" },
  log = { "x:log()", "natural logarithm" },
  log2 = { "x:log2()", "base-2 logarithm (the primitive log is built on)" },
  sqrt = { "x:sqrt()", "square root" },
  rsqrt = { "x:rsqrt()", "1 / sqrt(x)" },
  reciprocal = { "x:reciprocal()", "1 / x" },
  sin = { "x:sin()", "sine" },
  cos = { "x:cos()", "cosine (sin shifted by pi/2)" },
  relu = { "x:relu()", "max(x, 0) elementwise" },
  sigmoid = { "x:sigmoid()", "1 / (1 + e^-x)" },
  tanh = { "x:tanh()", "hyperbolic tangent (2 * sigmoid(2x) - 1)" },
  abs = { "x:abs()", "absolute value" },
  square = { "x:square()", "x * x" },
  cast = { "x:cast(dtype)", 'convert to another dtype: x:cast("float16") or x:cast(dtypes.int32)' },
  -- reductions
  sum = { "x:sum([axis [, keepdim]])  or  x:sum{axis=, keepdim=}", "sum over axis (a number or a list), or everything" },
  max = { "x:max([axis [, keepdim]])", "maximum over axis, or everything" },
  min = { "x:min([axis [, keepdim]])", "minimum over axis, or everything" },
  mean = { "x:mean([axis [, keepdim]])", "mean over axis, or everything" },
  argmax = { "x:argmax([axis [, keepdim]])", "index of the maximum (the first one on ties)" },
  cumsum = { "x:cumsum([axis])", "running sum along axis" },
  softmax = { "x:softmax([axis])", "exp(x - max) normalised to sum 1 along axis (default -1)" },
  log_softmax = { "x:log_softmax([axis])", "log of softmax, computed stably" },
  matmul = { "x:matmul(y)", "matrix product (a reshape, a broadcast multiply and a sum)" },
  dot = { "x:dot(y)", "alias of matmul" },
  -- movement (no kernels: they change the ShapeTracker)
  reshape = { "x:reshape(d1, d2, ...)", "same elements, new shape (-1 infers one dim)" },
  permute = { "x:permute(a1, a2, ...)", "reorder the axes" },
  expand = { "x:expand(d1, d2, ...)", "broadcast size-1 dims to a larger size (stride 0, no copy)" },
  flip = { "x:flip(axis, ...)", "reverse along the given axes" },
  transpose = { "x:transpose([dim0, dim1])", "swap two axes (default the last two)" },
  pad = { "x:pad{{before, after}, ...}", "pad each dim with zeros" },
  shrink = { "x:shrink{{start, stop}, ...}", "keep [start, stop) of each dim" },
  squeeze = { "x:squeeze([dim])", "drop size-1 dims (or the one given)" },
  unsqueeze = { "x:unsqueeze(dim)", "insert a size-1 dim at dim" },
  flatten = { "x:flatten([start_dim [, end_dim]])", "merge dims start_dim..end_dim into one" },
  slice = { "x[{{1,3}, {nil,nil,2}}]  or  x:slice(...)", "Python-style slicing: {start, stop, step} per dim, 0-based" },
  -- running and reading back
  contiguous = { "x:contiguous()", "force a real buffer in row-major order (a kernel)" },
  realize = { "x:realize()", "run the kernels now; returns x" },
  tolist = { "x:tolist()", "the values as nested Lua tables" },
  item = { "x:item()", "the value of a one-element tensor as a Lua number" },
  numel = { "x:numel()", "number of elements" },
  schedule = { "x:schedule()", "the kernels realize would run, as a Lua list of ScheduleItems" },
}

-- Properties read as fields: x.shape, x.T, ...
M.fields = {
  shape = { "x.shape", "the shape as a Lua list (x.shape[1] is the first dim)" },
  dtype = { "x.dtype", "the dtype name" },
  device = { "x.device", "the device name" },
  ndim = { "x.ndim", "number of dims" },
  T = { "x.T", "the transpose (last two dims swapped)" },
  uop = { "x.uop", "the lazy UOp graph (print it; .op .dtype .src .arg)" },
  st = { "x.st", "the ShapeTracker of a view: shape, strides, offset, mask, contiguous" },
}

return M
