-- PaddleOCR v4's detector (1x3x320x320) and recognizer (1x3x48x320) at batch 1: moongrad's ONNX
-- import beside ONNX Runtime (npm's onnxruntime-node, tools/ort_run.js) at the same thread count,
-- on the same inputs in the same run. Median wall time of 10 runs after 3 warm-ups; moongrad's
-- time is a whole m{...}:realize(): building the graph, scheduling and the kernels, on a new input
-- buffer each run.
--   MG_THREADS=1 build/moongrad bench/onnx_ocr.lua      (bench/run.sh runs 1 and every core)
--   BEAM=2 ... for kernels tuned by BEAM search (its cache in ~/.cache/moongrad)
-- Prints two lines per model, plain and under TinyJit:
--   "det  moongrad TinyJit 95.1 ms  ORT 34.0 ms  speed ratio 0.36x (threads 1)"
local ocr = dofile((arg[0]:match("^(.*/)") or "") .. "../scripts/ocr_pipeline.lua")
assert(ocr.have_ort(), "ONNX Runtime for Node is missing: run ./setup.sh")

-- ONNX Runtime runs at moongrad's thread count: MG_THREADS, else every core (as the engine does)
local threads = tonumber(os.getenv("MG_THREADS") or "") or select(2, Device.machine()).cores
local RUNS, WARM = 10, 3
Tensor.manual_seed(0)

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

local function ort_ms(kind, x)
  local _, ms = ocr.ort(kind, x, threads, RUNS)
  return ms or error("ONNX Runtime printed no time")
end

-- jit: the call under TinyJit, which replays the captured kernels (no graph building, no scheduling)
local function moongrad_ms(kind, x, jit)
  local m = onnx.load(ocr.models[kind])
  local name, out = m.inputs[1].name, m.outputs[1].name
  local run = function(t) return m{ [name] = t }[out]:realize() end
  if jit then run = TinyJit(run) end
  local times = {}
  for i = 1, WARM + RUNS do
    -- a new input each run (the same values): on the same buffer the graph built again would be
    -- the one realized last time, whose values the engine may still hold
    local xi = x:clone():realize()
    local t0 = show.clock()
    run(xi)
    if i > WARM then times[#times + 1] = (show.clock() - t0) * 1e3 end
  end
  return median(times)
end

local inputs = { det = Tensor.rand(1, 3, 320, 320):realize(), rec = Tensor.rand(1, 3, 48, 320):realize() }
local beam = (os.getenv("BEAM") or "0") ~= "0" and ", BEAM=" .. os.getenv("BEAM") or ""
for _, kind in ipairs({ "det", "rec" }) do
  local ort = ort_ms(kind, inputs[kind])
  for _, jit in ipairs({ false, true }) do
    local mg = moongrad_ms(kind, inputs[kind], jit)
    print(("%-4s moongrad%-8s %8.2f ms  ORT %8.2f ms  speed ratio %.2fx (threads %d%s)"):format(kind,
      jit and " TinyJit" or "", mg, ort, ort / mg, threads, beam))
  end
end
