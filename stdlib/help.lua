-- help: the one-line docs that :help prints: the colon commands and the fields here, the Tensor
-- methods' from beside their definitions. Data only: {signature, what it does}.
-- tests/lua/test_repl.lua checks that every function in the Tensor table has an entry.
local M = {}

-- The colon commands, in the order :help lists them. `lua` is the function the command runs.
M.commands = {
  { "debug", ":debug N", "show.debug(N)", "set DEBUG live (0 quiet, 1 kernel counts, 2 each kernel, 3 its source, 4 every IR stage)" },
  { "beam", ":beam N", "show.beam(N)", "set BEAM, the search width for each new kernel's opts (0: hand-coded); alone: the setting and the cache" },
  { "noopt", ":noopt 0|1", "show.noopt(1)", "turn the opts (dim merging, upcasts) and the full simplifier off (1: basic folds such as x*1 -> x stay) or on (0)" },
  { "device", ":device NAME", 'show.device("CPU")', "set the default device for new tensors (Device.names() lists them)" },
  { "schedule", ":schedule EXPR", "show.schedule(x)", "the kernels realizing EXPR would run, each with its AST" },
  { "ir", ":ir EXPR [STAGE]", 'show.ir(x, "linear")', "the UOp IR at every stage, or one: graph, ast, opts, lowered, simplified, linear, source" },
  { "viz", ":viz EXPR", "show.viz(x)", "the graph at every stage, with the rewrite rules that fired, in an HTML page (prints its path)" },
  { "src", ":src EXPR", "show.src(x)", "the generated source of each kernel EXPR needs" },
  { "opts", ":opts EXPR", 'show.opts(x, {{"UPCAST", 0, 4}})', "the opts of each kernel EXPR needs; with a list, the last kernel lowered and timed with those instead" },
  { "kernels", ":kernels EXPR", "show.kernels(x)", "realize EXPR and list the kernels it ran with time, GFLOPS, GB/s and share of the machine's limit" },
  { "roofline", ":roofline [EXPR]", "show.roofline(x)", "realize EXPR and plot its kernels against the machine's peak FLOP/s and memory bandwidth (alone: those limits)" },
  { "time", ":time EXPR", "show.time(function() return EXPR end)", "build, schedule, compile and run EXPR; print the wall time" },
  { "onnx", ":onnx PATH", 'show.onnx("model.onnx")', "an ONNX model: producer, opsets, inputs and outputs, nodes by op type, parameters and their bytes; onnx.load(path) and m:run{...} run it" },
  { "help", ":help [NAME]", 'show.help("relu")', "this list, or the signature and doc of a Tensor method or a command" },
}

-- More for the commands that stand for a whole API: printed by :help NAME after the command's line.
M.details = {
  onnx = [[
local m = onnx.load(path [, {device = "LLVM"}])  a model: m.inputs, m.outputs ({name=, shape=, dtype=},
    a symbolic dim as its name), m.opset (domain -> version), m.producer, m.graph
local outs = m:run{[input_name] = Tensor, ...}   (or m{...}): output name -> Tensor, lazy like every
    result, so :schedule, :src, :debug 2 and :viz work on a model's output
onnx.read_tensor(path)         a Tensor from a serialized TensorProto (ONNX's test data .pb files)
onnx.read_value(path, type)    a tensor, sequence (onnx.sequence{...}) or optional (onnx.NONE: empty)
onnx.ops                       the handlers by op type ("domain:Op" for other domains), each with
    the first opset it handles; stdlib/onnx_ops*.lua
onnx.run_graph(graph, env, opset)  runs a graph's nodes on env (name -> value)
Errors name what is wrong: the file (the checker's message), an op without a handler (its opset,
the node, how many nodes use it), a missing, extra or misshaped input (with what the model takes).]],
}

-- Globals besides Tensor: name -> {signature, doc}
M.globals = {
  TinyJit = { "local f = TinyJit(fn); f(x, ...)", "the first call runs fn, the second captures its kernels, later calls replay them on the new inputs' buffers (no Lua, no scheduling); tensor arguments may change values, not shapes or dtypes; bound Variables may change values (the kernels take them as parameters); the returned tensors are the same objects each call, rewritten" },
  Context = { "Context({DEBUG=2, BEAM=2, NOOPT=1, WINO=0, DEV='LLVM'}, fn)", "runs fn with those settings, then restores them" },
  dist = { "dist.init(); dist.all_reduce(t, {op='mean'}); local ddp = dist.DataParallel(model); ddp:sync()", "several processes over MPI (mpirun -np 2 build/moongrad script.lua): rank, world_size, all_reduce (sum, mean, max, min), broadcast {root=}, barrier, average_gradients(params), DataParallel; one process without mpirun, where every collective returns its input" },
  Variable = { "local v = Variable('start_pos', 1, 1024); local vp = v:bind(5)", "a symbolic int for shapes that change every call: a bound Variable stands in shrink/slice bounds, reshape and expand (x:shrink{{0, 1}, {0, vp}}); kernels take it as a parameter, so one compiled kernel (and one TinyJit capture) serves every value; vp.val, vp:unbind(), vp + 1; binding outside [min, max] is an error" },
}

-- Tensor methods and constructors: name -> doc, or {signature, doc}. Each doc lives beside its
-- method's definition in stdlib/tensor*.lua (args.doc). Without a signature, :help builds one
-- from the parameter names the function was declared with (stdlib/args.lua), so it cannot drift
-- from what the function accepts.
M.tensor = require("args").docs

-- Properties read as fields: x.shape, x.T, ...
M.fields = {
  shape = { "x.shape", "the shape as a Lua list (x.shape[1] is the first dim)" },
  dtype = { "x.dtype", "the dtype name" },
  device = { "x.device", "the device name" },
  ndim = { "x.ndim", "number of dims" },
  T = { "x.T", "the transpose (dims 1 and 0 swapped)" },
  uop = { "x.uop", "the lazy UOp graph (print it; .op .dtype .src .arg)" },
  st = { "x.st", "the ShapeTracker of a view: shape, strides, offset, mask, contiguous" },
  grad = { "x.grad", "the gradient backward() accumulated for x (a Tensor), or nil" },
  requires_grad = { "x.requires_grad", "whether backward() computes x.grad; settable" },
}

return M
