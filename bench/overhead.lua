-- Where a step's time goes besides its kernels, without TinyJit: building the graph (Lua and the
-- engine's tensor ops), realizing it (schedule cache, buffers, launches) beyond the kernels' own
-- time, and the full collection that frees one step's garbage (the Lua tables and tensors of its
-- graph). For U5 (bench/user.lua's two convolutions forward and backward) and, where the models
-- are installed, PaddleOCR's detector and recognizer (bench/onnx_ocr.lua) on a new input each run.
-- Medians of N steps after 3 warm-ups.
--   MG_THREADS=1 build/moongrad bench/overhead.lua [N]
local N = tonumber(arg[1]) or 10

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- prepare() makes a step's inputs (not timed), build(inputs) its graph, returning the tensors to
-- realize; prints the medians of each part in ms
local function measure(label, prepare, build)
  local cols = { build = {}, realize = {}, kernels = {}, gc = {} }
  local count
  for i = 1, N + 3 do
    local inputs = prepare()
    collectgarbage()
    local t0 = show.clock()
    local outs = build(inputs)
    local t1 = show.clock()
    local ks = 0
    local log = show.kernel_log(function() Tensor.realize_all(outs) end)
    for _, k in ipairs(log) do ks = ks + k.seconds end
    local t2 = show.clock()
    outs, inputs = nil, nil
    collectgarbage()
    local t3 = show.clock()
    if i > 3 then
      table.insert(cols.build, t1 - t0)
      table.insert(cols.realize, t2 - t1 - ks)
      table.insert(cols.kernels, ks)
      table.insert(cols.gc, t3 - t2)
      count = #log
    end
  end
  print(("%-5s build %6.2f ms  realize beyond kernels %6.2f ms  kernels %7.2f ms (%d)  full GC of its garbage %6.2f ms"):format(
    label, median(cols.build) * 1e3, median(cols.realize) * 1e3, median(cols.kernels) * 1e3, count, median(cols.gc) * 1e3))
end

local w1 = (Tensor.rand(32, 1, 3, 3) - 0.5):realize():requires_grad_()
local w2 = (Tensor.rand(64, 32, 3, 3) - 0.5):realize():requires_grad_()
measure("U5", function()
  w1:assign(Tensor.rand(32, 1, 3, 3) - 0.5):realize()
  w2:assign(Tensor.rand(64, 32, 3, 3) - 0.5):realize()
  w1.grad, w2.grad = nil, nil
  return Tensor.rand(64, 1, 28, 28):realize()
end, function(img)
  img:conv2d(w1):relu():conv2d(w2):relu():sum():backward()
  return { w1.grad, w2.grad }
end)

local ok, ocr = pcall(dofile, (arg[0]:match("^(.*/)") or "") .. "../scripts/ocr_pipeline.lua")
local f = ok and io.open(ocr.models.det)
if not f then return print("(PaddleOCR's models are not installed: ./setup.sh)") end
f:close()
for _, kind in ipairs({ "det", "rec" }) do
  local m = onnx.load(ocr.models[kind])
  local shape = kind == "det" and { 1, 3, 320, 320 } or { 1, 3, 48, 320 }
  measure(kind, function() return Tensor.rand(shape):realize() end,
    function(x) return { m{ [m.inputs[1].name] = x }[m.outputs[1].name] } end)
end
